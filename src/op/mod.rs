//! Operators (and [`Collective`]s): the units perfcast times. An operator is one framework-level call (a `torch.nn.functional`
//! op or a fused kernel) with a class, a phase, a precision and a shape. S1's Table I operators (MODELS.md §1.1)
//! map onto these classes — Linear1–4 and Final_Linear are all [`OpClass::Linear`] — so they share data.
//!
//! Shape convention (`dims`, [`DIMS`] unsigned integers; NeuSight's names for GEMMs and vector ops):
//! | class | dims | meaning |
//! |---|---|---|
//! | `linear` | B, M, N, K | B·(M×K)·(K×N): y[M,N] = x[M,K]·W[K,N], B = 1 for a plain linear |
//! | `bmm` | B, M, N, K | B independent (M×K)·(K×N) products |
//! | `layernorm`, `rmsnorm`, `softmax`, `fused_softmax`, `fillmask`, `gelu`, `swiglu` | B, H | B rows of H elements (swiglu: H = output width, input 2H) |
//! | `elementwise` | B, H, I | B rows of H elements, I input tensors (1 unary, 2 binary; 0 means 2) |
//! | `rope` | B, H | B = tokens·heads rows of H = head_dim elements, applied to q and k |
//! | `quantize`, `quantize_scale` | B, H | B rows (tokens) of H elements of a GEMM's 16-bit input quantized to the sample's precision (static cast; the dynamic scale's amax) |
//! | `flash_attention` | B, L, A, D, G | batch, sequence, query heads (on this GPU), head dim, key/value heads on this GPU (GQA; optional, 0 = A); causal (training: forward and backward) |
//! | `attention_prefill` | B, L, A, G, D | B sequences of L new tokens each, A query heads and G key/value heads on this GPU, head dim D; causal, writes the new K/V into the KV cache |
//! | `attention_decode` | B, C, A, G, D | B sequences decoding one token each, attending C cached tokens (history + the new one), A query heads, G key/value heads on this GPU, head dim D |
//! | `moe` | T, H, F, E, K | T tokens whose top-K routed copies this GPU's experts receive (tokens entering the layer / EP: T·K copies), hidden H, expert FFN width F on this GPU (inter_size / expert TP), E experts on this GPU (experts / EP), top-K routing; SwiGLU experts |
//! | `embedding` | T, V, H | tokens, vocabulary rows (on this GPU), hidden |
//! | `cross_entropy` | T, V | tokens, vocabulary columns (on this GPU); a third slot, not named (samples, the estimate API and traces leave it 0, the fused kernel), is 1 where the training decomposition upcasts the 16-bit logits to fp32 and runs the unfused loss on the copy (Megatron-DeepSpeed) |
//! | `optimizer` | P | parameters updated by this GPU (fused Adam) |
//! Unused trailing dims are 0.
//!
//! Training's flash attention is `flash_attention`; its forward pass is the same computation as an
//! `attention_prefill` of the same B, L, A, G, D (without the KV-cache write), which is how a learned prefill model
//! times it where no `flash_attention` model is active (`learn::backend`). Its backward pass is timed as
//! FlashAttention-2 counts it — about 2.5× the forward FLOPs (five GEMMs against two, Dao 2023 §3.1) — until
//! measured backward samples exist. The analytic count takes G = A (the K/V traffic is a small part of it).
//!
//! The serving classes (`attention_prefill`, `attention_decode`, `moe`) are forward only; their samples come from
//! NVIDIA aiconfigurator's performance database (the `aiconfigurator` upload format).
//!
//! Owns the vocabulary of timed work: operator classes, phases, shapes, collectives, and whose kernels measured
//! an operator ([`KernelFamily`]). May import: `hw`. Must not
//! import anything else of the crate.

mod collective;
mod kernels;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

pub use collective::Collective;
pub use kernels::KernelFamily;

/// Number of dims of every [`OpShape`] (the widest class, `attention_*` and `moe`, needs five).
pub const DIMS: usize = 5;

/// An operator's dims: meaning per class in the module's table; unused trailing dims are 0.
pub type Dims = [u64; DIMS];

/// Operator class: what a regressor is keyed on (with phase and precision).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum OpClass {
    /// GEMM of a linear layer (S1: Linear1–4, Final_Linear).
    Linear,
    /// Batched GEMM (S1: QK^T, ·V).
    Bmm,
    #[serde(rename = "layernorm")]
    LayerNorm,
    #[serde(rename = "rmsnorm")]
    RmsNorm,
    /// Unfused softmax (S1: Softmax).
    Softmax,
    /// Scale + causal mask + softmax in one kernel (S1: Fused Softmax).
    FusedSoftmax,
    /// Causal mask fill (S1: Fillmask).
    #[serde(rename = "fillmask")]
    FillMask,
    Gelu,
    /// SwiGLU gate: silu(a)·b.
    Swiglu,
    /// Rotary position embedding on q and k.
    Rope,
    /// FlashAttention (causal), replacing QK^T, mask, softmax and ·V (training; backward ≈ 2.5× forward FLOPs).
    FlashAttention,
    /// Serving prefill attention: causal flash attention over the new tokens, with grouped key/value heads and
    /// the write of the new K/V into the paged KV cache (vLLM's FlashAttention-2/3 path).
    AttentionPrefill,
    /// Serving decode attention: one new query token per sequence against its KV cache (memory-bound on the KV
    /// read), with the write of the new token's K/V.
    AttentionDecode,
    /// Fused mixture-of-experts layer on one GPU: top-k routing, the routed tokens through gate+up and down GEMMs
    /// of SwiGLU experts, weighted combine (vLLM FusedMoE). Excludes the router GEMM and communication.
    Moe,
    /// Vocabulary-parallel embedding lookup.
    Embedding,
    /// Vocabulary-parallel cross-entropy.
    CrossEntropy,
    /// Fused Adam step.
    Optimizer,
    /// Any other element-wise op (add, mul, pow, relu, tanh, dropout, …): one read per input, one write.
    Elementwise,
    /// Static per-tensor quantization of B rows of H 16-bit elements into the sample's precision (fp8): one kernel
    /// reading 2 B and writing the low-precision element (TensorRT-LLM's `static_quantize_e4m3_per_tensor`,
    /// aiconfigurator's `scale_matrix`): what a low-precision GEMM's input costs when no earlier kernel produced it
    /// quantized.
    Quantize,
    /// The scale computation of dynamic per-tensor quantization over B rows of H 16-bit elements (an absolute-
    /// maximum reduction): dynamic quantization's time less static quantization's (TensorRT-LLM's
    /// `quantize_e4m3_per_tensor` against `static_quantize_e4m3_per_tensor`, aiconfigurator's `compute_scale`).
    QuantizeScale,
}

impl OpClass {
    /// Every class.
    pub const ALL: [OpClass; 20] = [
        OpClass::Linear,
        OpClass::Bmm,
        OpClass::LayerNorm,
        OpClass::RmsNorm,
        OpClass::Softmax,
        OpClass::FusedSoftmax,
        OpClass::FillMask,
        OpClass::Gelu,
        OpClass::Swiglu,
        OpClass::Rope,
        OpClass::FlashAttention,
        OpClass::Embedding,
        OpClass::CrossEntropy,
        OpClass::Optimizer,
        OpClass::Elementwise,
        OpClass::AttentionPrefill,
        OpClass::AttentionDecode,
        OpClass::Moe,
        OpClass::Quantize,
        OpClass::QuantizeScale,
    ];

    /// The wire name (`"fused_softmax"`).
    pub fn as_str(self) -> &'static str {
        match self {
            OpClass::Linear => "linear",
            OpClass::Bmm => "bmm",
            OpClass::LayerNorm => "layernorm",
            OpClass::RmsNorm => "rmsnorm",
            OpClass::Softmax => "softmax",
            OpClass::FusedSoftmax => "fused_softmax",
            OpClass::FillMask => "fillmask",
            OpClass::Gelu => "gelu",
            OpClass::Swiglu => "swiglu",
            OpClass::Rope => "rope",
            OpClass::FlashAttention => "flash_attention",
            OpClass::Embedding => "embedding",
            OpClass::CrossEntropy => "cross_entropy",
            OpClass::Optimizer => "optimizer",
            OpClass::Elementwise => "elementwise",
            OpClass::AttentionPrefill => "attention_prefill",
            OpClass::AttentionDecode => "attention_decode",
            OpClass::Moe => "moe",
            OpClass::Quantize => "quantize",
            OpClass::QuantizeScale => "quantize_scale",
        }
    }

    /// Names of the meaningful dims, in order (see the module's table).
    pub fn dim_names(self) -> &'static [&'static str] {
        match self {
            OpClass::Linear | OpClass::Bmm => &["B", "M", "N", "K"],
            OpClass::FlashAttention => &["B", "L", "A", "D", "G"],
            OpClass::AttentionPrefill => &["B", "L", "A", "G", "D"],
            OpClass::AttentionDecode => &["B", "C", "A", "G", "D"],
            OpClass::Moe => &["T", "H", "F", "E", "K"],
            OpClass::Embedding => &["T", "V", "H"],
            OpClass::CrossEntropy => &["T", "V"],
            OpClass::Optimizer => &["P"],
            OpClass::Elementwise => &["B", "H", "I"],
            _ => &["B", "H"],
        }
    }

    /// True for classes that run on tensor/matrix cores (when the precision allows).
    pub fn is_matmul(self) -> bool {
        matches!(
            self,
            OpClass::Linear
                | OpClass::Bmm
                | OpClass::FlashAttention
                | OpClass::AttentionPrefill
                | OpClass::AttentionDecode
                | OpClass::Moe
        )
    }
}

impl OpClass {
    /// True for the serving classes (`attention_prefill`, `attention_decode`, `moe`, and the fp8 activation
    /// quantization kernels `quantize`, `quantize_scale`): forward only, measured by serving frameworks rather than
    /// by perfcast's training collector.
    pub fn is_serving(self) -> bool {
        matches!(
            self,
            OpClass::AttentionPrefill
                | OpClass::AttentionDecode
                | OpClass::Moe
                | OpClass::Quantize
                | OpClass::QuantizeScale
        )
    }
}

impl std::fmt::Display for OpClass {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Forward or backward pass.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum Phase {
    Fwd,
    Bwd,
}

impl Phase {
    /// `"fwd"` or `"bwd"`.
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Fwd => "fwd",
            Phase::Bwd => "bwd",
        }
    }
}

/// One operator instance to time: class, phase and shape (see the module's dims table).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct OpShape {
    pub class: OpClass,
    pub phase: Phase,
    /// [`DIMS`] dims; meaning per class in the module doc; unused ones are 0.
    pub dims: Dims,
}

impl OpShape {
    /// Builds a shape, zero-filling unused dims.
    pub fn new(class: OpClass, phase: Phase, dims: &[u64]) -> OpShape {
        OpShape { class, phase, dims: dims_from(dims) }
    }
}

/// [`Dims`] from the leading dims `dims` (a class's meaningful ones), zero-filling the rest; dims past [`DIMS`]
/// are ignored.
pub fn dims_from(dims: &[u64]) -> Dims {
    let mut d = [0u64; DIMS];
    for (slot, v) in d.iter_mut().zip(dims) {
        *slot = *v;
    }
    d
}

/// Places named dims (`{"M": 4096, …}`, the names of the table above) into the class's slots — the contract the
/// sample format, the operator-estimate API and the learner share. A linear layer's `B` defaults to 1,
/// elementwise's `I` to binary and flash attention's `G` to 0 (= A); every other dim of the class is required and
/// positive. Errors name the unknown or missing dim.
pub fn place_dims(class: OpClass, named: &BTreeMap<String, u64>) -> Result<Dims, String> {
    let names = class.dim_names();
    let mut dims = [0u64; DIMS];
    for (k, v) in named {
        let Some(pos) = names.iter().position(|n| n == k) else {
            return Err(format!("dim {k:?} is not one of {class}'s dims {names:?}"));
        };
        dims[pos] = *v;
    }
    for (pos, n) in names.iter().enumerate() {
        // The batch of a linear layer defaults to 1; elementwise arity defaults to binary.
        let optional = (matches!(class, OpClass::Linear) && *n == "B")
            || (class == OpClass::Elementwise && *n == "I")
            || (class == OpClass::FlashAttention && *n == "G");
        if dims[pos] == 0 && !optional {
            return Err(format!("dim {n} of {class} is missing or 0 (dims are {names:?})"));
        }
    }
    if class == OpClass::Linear && dims[0] == 0 {
        dims[0] = 1;
    }
    Ok(dims)
}
