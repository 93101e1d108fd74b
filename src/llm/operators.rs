//! Operator decomposition of one training iteration (S1 Table I, MODELS.md §1.1), extended to Megatron-LM's
//! options: which operators one transformer layer, the first stage's embedding and the last stage's head run per
//! micro-batch, with their shapes, precisions, S1 feature vectors and call counts.
//!
//! Modeling choices beyond S1, each from its source:
//! - **GQA** (Ainslie et al. 2023): the QKV GEMM produces (h + 2·kv)·d/h columns; QKᵀ and ·V still run per query
//!   head (keys and values are broadcast to their group).
//! - **SwiGLU** (Shazeer 2020; Megatron-LM `--swiglu`): the up-projection is one GEMM of width 2·ffn (gate and up),
//!   the activation reads 2·ffn and writes ffn, the down-projection reads ffn.
//! - **Sequence parallelism** (Korthikanti et al. 2022, §4.2.2): norms run on tokens/tp rows; each tensor-parallel
//!   all-reduce becomes an all-gather plus a reduce-scatter of the same total volume. In the backward pass the
//!   extra all-gather of a column-parallel layer's input (for its weight gradient) overlaps the input-gradient
//!   GEMM and is not charged (Megatron's asynchronous gradient communication).
//! - **Context parallelism** ([`crate::llm::cp`], per `cp_comm_type`): each rank holds tokens/cp of every
//!   sequence (the load-balanced causal split of 2·cp chunks makes every rank's work equal). Megatron-Core's
//!   default `p2p` runs attention as cp FlashAttention calls of tokens/cp queries against one key/value chunk,
//!   while the next chunk's keys and values (and in the backward pass their gradients) travel to the ring
//!   neighbour; the send is hidden behind the step's attention and only its excess is charged. `all_gather`,
//!   `a2a` (Ulysses) and `a2a+p2p` communicate as [`crate::llm::cp`] says.
//! - **Recompute** (Korthikanti et al. 2022, §5): `full` re-runs every forward operator of the layer (its
//!   tensor- and context-parallel communication included) during the backward pass; `selective` re-runs the core
//!   attention (QKᵀ, softmax, its dropout, ·V, or the FlashAttention forward).
//! - **FP8** (Micikevicius et al. 2022; Transformer Engine): the four GEMMs of each layer run in fp8 (`fp8_block`
//!   under blockwise scaling, nvfp4 under fp4 training); everything else stays 16-bit. Under delayed scaling
//!   Transformer Engine fuses the fp8 casts into the neighbouring kernels (LayerNormLinear, LayerNormMLP, the GEMM
//!   epilogues), so they are not separate operators; current scaling's amax passes and MXFP8's scale writes are
//!   ([`crate::llm::recipe::scaling_ops`]).
//! - **Dropout** (Megatron-LM `--hidden-dropout`, `--attention-dropout`; Korthikanti et al.'s masks): with
//!   `model.dropout` > 0, each layer runs a dropout over the attention probabilities (b·h/tp·l² elements, unless
//!   FlashAttention fuses it) and two fused bias-dropout-add kernels on its two residual branches (reading the
//!   branch output, the bias and the residual). S1's Table I has neither (GPT-NeoX's configurations train without
//!   dropout), so the default 0 adds nothing.

use serde::Serialize;
use utoipa::ToSchema;

use super::config::{Activation, Attention, Norm, TrainingConfig};
use super::layout::Layout;
use crate::comm::Group;
use crate::hw::{GpuSpec, Precision};
use crate::op::Collective;
use crate::op::{OpClass, OpShape, Phase};

/// S1 Table I operator names, and the Megatron-LM operators beyond them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, ToSchema)]
pub enum OpName {
    Embedding,
    LayerNorm,
    RMSNorm,
    Linear1,
    RoPE,
    #[serde(rename = "QK^T")]
    QkT,
    Fillmask,
    Softmax,
    #[serde(rename = "Fused_Softmax")]
    FusedSoftmax,
    #[serde(rename = "V")]
    AttnV,
    #[serde(rename = "Flash_Attention")]
    FlashAttention,
    Linear2,
    Linear3,
    GeLU,
    SwiGLU,
    Linear4,
    /// Dropout over the attention probabilities.
    #[serde(rename = "Attention_Dropout")]
    AttentionDropout,
    /// Megatron's fused bias + dropout + residual add.
    #[serde(rename = "Bias_Dropout_Add")]
    BiasDropoutAdd,
    /// The extra element-wise kernels an eager PyTorch module launches beyond the fused kernel the table counts
    /// (RMSNorm's casts and statistics, SwiGLU's separate `silu` and `mul`, RoPE's complex casts;
    /// [`crate::llm::framework::EagerKernels`]), each one pass over the operator's tensor.
    #[serde(rename = "Eager_Elementwise")]
    EagerElementwise,
    #[serde(rename = "Final_Linear")]
    FinalLinear,
    #[serde(rename = "Parallel_Cross_Entropy")]
    CrossEntropy,
    #[serde(rename = "MP_Allreduce")]
    MpAllReduce,
    /// Sequence parallelism's all-gather into the tensor-parallel region.
    #[serde(rename = "MP_Allgather")]
    MpAllGather,
    /// Sequence parallelism's reduce-scatter out of the tensor-parallel region.
    #[serde(rename = "MP_Reduce_Scatter")]
    MpReduceScatter,
    /// Context parallelism's ring exchange of key/value chunks (and their gradients).
    #[serde(rename = "CP_P2P")]
    CpP2p,
    /// Context parallelism's all-gather of the whole sequence's keys and values (`cp_comm_type` `all_gather`).
    #[serde(rename = "CP_Allgather")]
    CpAllGather,
    /// Context parallelism's reduce-scatter of the key/value gradients (`cp_comm_type` `all_gather`, backward).
    #[serde(rename = "CP_Reduce_Scatter")]
    CpReduceScatter,
    /// Context parallelism's Ulysses all-to-alls of Q, K, V and O (`cp_comm_type` `a2a`, `a2a+p2p`).
    #[serde(rename = "CP_Alltoall")]
    CpAllToAll,
    #[serde(rename = "DP_Allreduce")]
    DpAllReduce,
    #[serde(rename = "DP_Reduce_Scatter")]
    DpReduceScatter,
    #[serde(rename = "DP_Allgather")]
    DpAllGather,
    /// All-reduce of the tied word-embedding gradients between the first and the last stage.
    #[serde(rename = "Embedding_Grad_Allreduce")]
    EmbeddingGradAllReduce,
    #[serde(rename = "PP_P2P")]
    PpP2p,
    Optimizer,
    /// Serving: prefill attention over the new prompt tokens, writing their K/V into the KV cache.
    #[serde(rename = "Attention_Prefill")]
    AttentionPrefill,
    /// Serving: decode attention of one new token per sequence over its KV cache.
    #[serde(rename = "Attention_Decode")]
    AttentionDecode,
    /// The MoE router GEMM (hidden → experts logits).
    #[serde(rename = "MoE_Router")]
    MoeRouter,
    /// The routed experts of an MoE layer: serving's fused MoE (top-k, grouped GEMMs, combine); training's grouped
    /// expert GEMMs (Megatron-Core TEGroupedMLP: gate+up, activation, down).
    #[serde(rename = "MoE")]
    Moe,
    /// Serving: sampling over the gathered logits (softmax and top-k/top-p over the vocabulary).
    Sampler,
    /// Expert parallelism's all-to-all: dispatching routed tokens to their experts' GPUs and combining the results
    /// back (training's alltoall, DeepEP and HybridEP dispatchers; serving's data-parallel attention).
    #[serde(rename = "EP_Alltoall")]
    EpAllToAll,
    /// The allgather dispatcher's all-gather of hidden states over the tp·ep group, and the alltoall dispatcher's
    /// all-gather of received tokens over the expert-tensor-parallel group.
    #[serde(rename = "EP_Allgather")]
    EpAllGather,
    /// The reduce-scatters mirroring [`OpName::EpAllGather`] in the combine.
    #[serde(rename = "EP_Reduce_Scatter")]
    EpReduceScatter,
    /// The router's score function and top-k selection over the experts' logits (Megatron-Core `router.py`).
    #[serde(rename = "MoE_TopK")]
    MoeTopK,
    /// Permutation of the tokens into expert order before the dispatch (and sorting by local expert after it).
    #[serde(rename = "MoE_Permute")]
    MoePermute,
    /// Unpermutation after the combine: each token's routed copies weighted by their probabilities and summed.
    #[serde(rename = "MoE_Unpermute")]
    MoeUnpermute,
    /// The routed experts' activation, recomputed on its own (`recompute_modules` `moe_act`; part of `MoE`
    /// otherwise).
    #[serde(rename = "MoE_SwiGLU")]
    MoeAct,
    /// One local expert's gate+up GEMM (SequentialMLP, without `moe_grouped_gemm`).
    #[serde(rename = "Expert_FC1")]
    ExpertFc1,
    /// One local expert's down GEMM (SequentialMLP).
    #[serde(rename = "Expert_FC2")]
    ExpertFc2,
    /// The shared experts' gate+up GEMM.
    #[serde(rename = "Shared_Expert_FC1")]
    SharedExpertFc1,
    /// The shared experts' activation.
    #[serde(rename = "Shared_Expert_SwiGLU")]
    SharedExpertAct,
    /// The shared experts' down GEMM.
    #[serde(rename = "Shared_Expert_FC2")]
    SharedExpertFc2,
    /// MLA's query down-projection.
    #[serde(rename = "MLA_Q_Down")]
    MlaQDown,
    /// MLA's key/value down-projection (with the shared rotary key).
    #[serde(rename = "MLA_KV_Down")]
    MlaKvDown,
    /// MLA's query up-projection.
    #[serde(rename = "MLA_Q_Up")]
    MlaQUp,
    /// MLA's key/value up-projection.
    #[serde(rename = "MLA_KV_Up")]
    MlaKvUp,
    /// MLA's RMSNorms of the query and key/value latents.
    #[serde(rename = "MLA_Norm")]
    MlaNorm,
    /// Multi-token prediction's projection of the concatenated hidden state and next-token embedding (2d → d).
    #[serde(rename = "MTP_Proj")]
    MtpProj,
    /// Gradient all-reduce of the expert parameters over the expert-data-parallel group.
    #[serde(rename = "EDP_Allreduce")]
    EdpAllReduce,
    /// Gradient reduce-scatter of the expert parameters over the expert-data-parallel group (distributed
    /// optimizer).
    #[serde(rename = "EDP_Reduce_Scatter")]
    EdpReduceScatter,
    /// All-gather of the updated expert parameters over the expert-data-parallel group.
    #[serde(rename = "EDP_Allgather")]
    EdpAllGather,
    /// Current scaling's absolute-maximum pass over an fp8 GEMM's operand before its cast (and MXFP8's scale
    /// writes; [`crate::llm::recipe::scaling_ops`]).
    #[serde(rename = "FP8_Amax")]
    Fp8Amax,
    /// Current scaling's all-reduce of a sequence-parallel operand's amax over the tensor-parallel group.
    #[serde(rename = "FP8_Amax_Allreduce")]
    Fp8AmaxAllreduce,
    /// Serving, DeepSeek sparse attention: the indexer's projections (`wq_b`, `wk`, `weights_proj`).
    #[serde(rename = "DSA_Indexer_Proj")]
    DsaIndexerProj,
    /// Serving, DeepSeek sparse attention: the indexer's fp8 multi-query logits over the cached index keys.
    #[serde(rename = "DSA_Indexer_Logits")]
    DsaIndexerLogits,
    /// Serving, DeepSeek sparse attention: the indexer's small kernels (key norm, rotary, Hadamard rotations, fp8
    /// quantization, index-cache write, head gates) and its top-k selection.
    #[serde(rename = "DSA_Indexer_Elementwise")]
    DsaIndexerElementwise,
}

/// What an operator does: a computation of a shape in a precision, or a collective of a size over a group.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Work {
    Compute {
        shape: OpShape,
        dtype: Precision,
    },
    Collective {
        collective: Collective,
        /// Bytes as nccl-tests counts them.
        bytes: f64,
        group: Group,
        /// GPUs per node communicating at the same time (they share the NICs).
        active_per_node: u32,
    },
}

/// One operator: runs `calls` times per micro-batch (per step for the update operators) in the pass `phase` it
/// is charged to.
#[derive(Debug, Clone, PartialEq)]
pub struct StageOp {
    pub name: OpName,
    /// The pass the time is charged to (a recomputed forward operator is charged to the backward pass).
    pub phase: Phase,
    pub calls: u32,
    pub work: Work,
    /// The S1 Table I feature vector.
    pub features: Vec<u64>,
    /// A forward operator re-run during the backward pass (activation recomputation).
    pub recompute: bool,
    /// Runs concurrently with one call of another operator of the same phase ([`Overlap`]); only what it does not
    /// hide behind that operator is exposed.
    pub overlaps: Option<Overlap>,
}

/// A collective overlapped with one call of a computation of the same pass.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Overlap {
    /// The operator it hides behind.
    pub with: OpName,
    /// Chunks the collective and the computation are split into and pipelined (Transformer Engine's userbuffers
    /// overlap: one chunk's communication runs while the previous chunk computes); ≤ 1 = not split, the whole
    /// collective runs beside the whole computation (context parallelism's ring exchange).
    pub chunks: u32,
}

impl Overlap {
    /// The exposed seconds (or µs) of a collective of `comm` overlapped with a computation of `compute`: unsplit,
    /// max(0, comm − compute); split in n chunks, the two-stage pipeline's excess over the computation,
    /// max(comm/n, comm − compute·(n − 1)/n) (the first chunk's communication, or the last one's, has no
    /// computation beside it).
    pub fn exposed(&self, comm: f64, compute: f64) -> f64 {
        if self.chunks <= 1 {
            (comm - compute).max(0.0)
        } else {
            let n = self.chunks as f64;
            (comm / n).max(comm - compute * (n - 1.0) / n)
        }
    }
}

/// The precisions operators run in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OpPrecisions {
    /// The transformer layers' four GEMMs (fp8 under fp8 training, `fp8_block` under blockwise scaling, nvfp4 under
    /// fp4 training).
    pub gemm: Precision,
    /// Everything else.
    pub other: Precision,
}

impl OpPrecisions {
    /// The precisions of `cfg` on `gpu` (see [`TrainingConfig::non_gemm_precision`]).
    pub fn of(cfg: &TrainingConfig, gpu: &GpuSpec) -> OpPrecisions {
        OpPrecisions { gemm: cfg.gemm_precision(), other: cfg.non_gemm_precision(gpu.peak_tflops.bf16.is_some()) }
    }
}

/// Bytes per element of activations and gradients exchanged in `cfg`'s precision (fp8 training keeps 16-bit
/// activations and gradients), and of the parameters a ZeRO / FSDP all-gather moves. The data-parallel gradient
/// reduction may be in fp32 instead ([`TrainingConfig::grad_elem_bytes`]).
pub fn comm_elem_bytes(cfg: &TrainingConfig) -> f64 {
    cfg.precision.bytes().max(2.0)
}

pub(crate) fn op(name: OpName, phase: Phase, calls: u32, work: Work, features: Vec<u64>) -> StageOp {
    StageOp { name, phase, calls, work, features, recompute: false, overlaps: None }
}

pub(crate) fn compute(
    name: OpName,
    class: OpClass,
    dtype: Precision,
    dims: &[u64],
    features: Vec<u64>,
    calls: u32,
) -> [StageOp; 2] {
    [Phase::Fwd, Phase::Bwd].map(|phase| {
        op(name, phase, calls, Work::Compute { shape: OpShape::new(class, phase, dims), dtype }, features.clone())
    })
}

/// The eager kernels beyond a fused operator over `rows` × `width` elements: `(fwd, bwd)` kernels per call of an
/// operator that runs `calls` times, each a unary element-wise pass (read and write the tensor once). Full
/// recomputation re-runs them with the rest of the forward; selective recomputation's modules do not (they name
/// the fused operators).
pub(crate) fn eager_ops(dtype: Precision, rows: u64, width: u64, (fwd, bwd): (u32, u32), calls: u32) -> Vec<StageOp> {
    [(Phase::Fwd, fwd), (Phase::Bwd, bwd)]
        .into_iter()
        .filter(|(_, n)| *n > 0)
        .map(|(phase, n)| {
            let shape = OpShape::new(OpClass::Elementwise, phase, &[rows, width, 1]);
            op(OpName::EagerElementwise, phase, n * calls, Work::Compute { shape, dtype }, vec![rows, width, n as u64])
        })
        .collect()
}

pub(crate) fn norm_op(cfg: &TrainingConfig) -> (OpName, OpClass) {
    match cfg.model.norm {
        Norm::Layernorm => (OpName::LayerNorm, OpClass::LayerNorm),
        Norm::Rmsnorm => (OpName::RMSNorm, OpClass::RmsNorm),
    }
}

#[allow(clippy::too_many_arguments)]
pub(crate) fn collective(
    name: OpName,
    phase: Phase,
    calls: u32,
    c: Collective,
    bytes: f64,
    group: Group,
    active: u32,
    features: Vec<u64>,
) -> StageOp {
    op(name, phase, calls, Work::Collective { collective: c, bytes, group, active_per_node: active }, features)
}

/// Tensor-parallel communication of `sites` synchronization points of `bytes` (the b·l·d/cp activation) in
/// `phase`: all-reduces, or all-gather + reduce-scatter pairs with sequence parallelism.
///
/// With Transformer Engine's TP overlap ([`TrainingConfig::tp_overlap`]) every sequence-parallel collective is
/// paired with the GEMM it feeds or drains (TE `LayerNormLinear` / `Linear` with `ub_overlap_ag` /
/// `ub_overlap_rs`, and the bulk overlaps of the backward): forward, the all-gather before QKV (Linear1) and
/// before the MLP's up-projection (Linear3), the reduce-scatter after the attention projection (Linear2) and after
/// the down-projection (Linear4) — with the parallel residual one all-gather before Linear1 and one
/// reduce-scatter after Linear4; backward, the mirror image (all-gathers of the output gradients with Linear4 and
/// Linear2, reduce-scatters of the input gradients with Linear3 and Linear1). Each is split in tp chunks (TE's
/// ring-exchange and pipelined methods split by the tp ranks or a few splits; tp is used for both).
///
/// An MoE layer's MLP is not tensor-parallel (`mlp` false): its one site surrounds the attention (all-gather before
/// Linear1, reduce-scatter after Linear2; backward the mirror image); the MoE module adds the shared experts'.
pub(crate) fn tp_sync(
    cfg: &TrainingConfig,
    layout: &Layout,
    phase: Phase,
    sites: u32,
    bytes: f64,
    tokens_d: u64,
    mlp: bool,
) -> Vec<StageOp> {
    if cfg.tp <= 1 || sites == 0 {
        return Vec::new();
    }
    let tp = layout.tp_group;
    let f = vec![tokens_d, tp.nodes as u64, tp.ranks_per_node as u64];
    let a = layout.active_per_node;
    if cfg.tp_overlap() {
        use OpName::{Linear1, Linear2, Linear3, Linear4, MpAllGather as Ag, MpReduceScatter as Rs};
        let pairs: &[(OpName, OpName)] = match (phase, sites) {
            (Phase::Fwd, _) if !mlp => &[(Ag, Linear1), (Rs, Linear2)],
            (Phase::Bwd, _) if !mlp => &[(Ag, Linear2), (Rs, Linear1)],
            (Phase::Fwd, 1) => &[(Ag, Linear1), (Rs, Linear4)],
            (Phase::Fwd, _) => &[(Ag, Linear1), (Rs, Linear2), (Ag, Linear3), (Rs, Linear4)],
            (Phase::Bwd, _) => &[(Ag, Linear4), (Rs, Linear3), (Ag, Linear2), (Rs, Linear1)],
        };
        return pairs
            .iter()
            .map(|&(name, gemm)| {
                let c = if name == Ag { Collective::AllGather } else { Collective::ReduceScatter };
                let mut o = collective(name, phase, 1, c, bytes, tp, a, f.clone());
                o.overlaps = Some(Overlap { with: gemm, chunks: cfg.tp });
                o
            })
            .collect();
    }
    if cfg.sp() {
        vec![
            collective(OpName::MpAllGather, phase, sites, Collective::AllGather, bytes, tp, a, f.clone()),
            collective(OpName::MpReduceScatter, phase, sites, Collective::ReduceScatter, bytes, tp, a, f),
        ]
    } else {
        vec![collective(OpName::MpAllReduce, phase, sites, Collective::AllReduce, bytes, tp, a, f)]
    }
}

/// Whether Megatron-LM's fused causal scale-mask-softmax kernel runs for `b` sequences of `heads` heads (per
/// tensor-parallel rank) and `seq` tokens in `dtype`; otherwise Megatron falls back to PyTorch's mask fill and
/// softmax (S1's unfused `Fillmask` + `Softmax`). The conditions of `FusedScaleMaskSoftmax.is_kernel_available`
/// (Megatron-LM `megatron/model/fused_softmax.py`, the same in GPT-NeoX and Megatron-DeepSpeed): 16-bit input,
/// 16 < sk ≤ 4096, sq and sk multiples of 4, b·heads a multiple of 4 and of the kernel's batches per block (4
/// warps of 128 threads, each holding 2 rows when sk ≤ 128 and 1 otherwise: 8 or 4;
/// `scaled_upper_triang_masked_softmax.h`). E.g. 16 heads at tp 8 with micro-batch 1: 2 attention batches, unfused.
pub fn fused_softmax_available(b: u64, heads: u64, seq: u64, dtype: Precision) -> bool {
    let attn_batches = b * heads;
    let batches_per_block = if seq.next_power_of_two() <= 128 { 8 } else { 4 };
    matches!(dtype, Precision::Fp16 | Precision::Bf16)
        && 16 < seq
        && seq <= 4096
        && seq % 4 == 0
        && attn_batches % 4 == 0
        && attn_batches % batches_per_block == 0
}

/// The operators of one transformer layer for one micro-batch (calls per layer), forward and backward, with the
/// layer's tensor- and context-parallel communication and its recomputation ([`crate::llm::moe::recompute`]).
///
/// Tensor-parallel synchronization points (S1): per layer 1 forward with the parallel residual, else 2, and 2
/// backward, each of the b·(l/cp)·d activation.
pub fn layer_ops(cfg: &TrainingConfig, layout: &Layout, prec: OpPrecisions) -> Vec<StageOp> {
    let mut ops = layer_passes(cfg, layout, prec, true);
    let recomputed = crate::llm::moe::recompute::recomputed(cfg, &ops);
    ops.extend(recomputed);
    let scaling = crate::llm::recipe::scaling_ops(cfg, layout, &ops);
    ops.extend(scaling);
    ops
}

/// The forward and backward operators of one layer without its recomputation: attention (multi-head, grouped-query
/// or MLA, [`crate::llm::moe::mla`]) and, with `mlp`, the dense MLP (an MoE layer's MLP comes from
/// [`crate::llm::moe::ops`]), with their tensor- and context-parallel communication.
pub fn layer_passes(cfg: &TrainingConfig, layout: &Layout, prec: OpPrecisions, mlp: bool) -> Vec<StageOp> {
    let m = &cfg.model;
    let (b, l, d, h) = (cfg.micro_batch as u64, m.seq_len as u64, m.hidden as u64, m.heads as u64);
    let (tp, cp) = (cfg.tp as u64, cfg.cp as u64);
    let lr = l / cp; // tokens of one sequence on this rank
    let t = b * lr;
    let (hp, kvp, dh) = (h / tp, cfg.kv_heads as u64 / tp, cfg.head_dim as u64);
    let f = cfg.ffn_hidden as u64 / tp;
    let rows = if cfg.sp() { t / tp } else { t };
    let (g, o) = (prec.gemm, prec.other);
    let norm = norm_op(cfg);
    let mut ops = Vec::with_capacity(40);
    // Two norms per layer (before attention and before the MLP; also with the parallel residual).
    ops.extend(compute(norm.0, norm.1, o, &[rows, d], vec![b, rows / b.max(1), d], 2));
    let eager = cfg.framework.eager;
    if m.norm == Norm::Rmsnorm {
        ops.extend(eager_ops(o, rows, d, eager.rmsnorm, 2));
    }
    // The attention's projections: QKV, or MLA's down- and up-projections; RoPE's rotated heads and dims; the
    // core attention's head dim (MLA: the mean of its query/key and value dims) and key/value heads; the output
    // projection's input width.
    let (rope_heads, rope_dim, core_dh, core_kv, out_k) = match &m.mla {
        None => {
            let qkv = (h + 2 * cfg.kv_heads as u64) * dh / tp;
            ops.extend(compute(OpName::Linear1, OpClass::Linear, g, &[1, t, qkv, d], vec![t, d, qkv], 1));
            (hp + kvp, dh, dh, kvp.max(1), hp * dh)
        }
        Some(mla) => {
            ops.extend(crate::llm::moe::mla::projection_ops(cfg, mla, t, rows, prec));
            let (qk, v) = (mla.qk_head_dim() as u64, mla.v_head_dim as u64);
            (hp + 1, mla.qk_rope_head_dim as u64, (qk + v).div_ceil(2), hp, hp * v)
        }
    };
    if m.rotary {
        // q and k rotate: the analytic rope kernel counts two tensors of B rows, so B = tokens·(q + k heads)/2.
        ops.extend(compute(
            OpName::RoPE,
            OpClass::Rope,
            o,
            &[(t * rope_heads).div_ceil(2), rope_dim],
            vec![b, lr, hp, rope_dim],
            1,
        ));
        ops.extend(eager_ops(o, t * rope_heads, rope_dim, eager.rope, 1));
    }
    match m.attention {
        Attention::FusedSoftmax | Attention::Unfused => {
            ops.extend(compute(
                OpName::QkT,
                OpClass::Bmm,
                o,
                &[b * hp, lr, lr, core_dh],
                vec![b * hp, lr, core_dh, lr],
                1,
            ));
            if m.attention == Attention::FusedSoftmax && fused_softmax_available(b, hp, lr, o) {
                ops.extend(compute(
                    OpName::FusedSoftmax,
                    OpClass::FusedSoftmax,
                    o,
                    &[b * hp * lr, lr],
                    vec![b * hp, lr, lr],
                    1,
                ));
            } else {
                ops.extend(compute(OpName::Fillmask, OpClass::FillMask, o, &[b * hp * lr, lr], vec![b, hp, lr, d], 1));
                ops.extend(compute(OpName::Softmax, OpClass::Softmax, o, &[b * hp * lr, lr], vec![b, hp, lr, lr], 1));
            }
            ops.extend(compute(
                OpName::AttnV,
                OpClass::Bmm,
                o,
                &[b * hp, lr, core_dh, lr],
                vec![b * hp, lr, lr, core_dh],
                1,
            ));
        }
        Attention::Flash => {
            // With cp > 1 (crate::llm::cp): ring steps of tokens/ring queries against one key/value chunk, on the
            // heads left after the all-to-all (p2p: cp steps of tokens/cp on every head; a2a: the whole sequence
            // on heads/cp). G: key/value heads on this GPU (Megatron replicates them when tp exceeds them).
            let (calls, q, heads, kv) = crate::llm::cp::attention_calls(cfg, hp, core_kv);
            ops.extend(compute(
                OpName::FlashAttention,
                OpClass::FlashAttention,
                o,
                &[b, q, heads, core_dh, kv],
                vec![b, q, heads, core_dh],
                calls,
            ));
        }
    }
    ops.extend(compute(OpName::Linear2, OpClass::Linear, g, &[1, t, d, out_k], vec![t, out_k, d], 1));
    if mlp {
        let up = if m.activation == Activation::Swiglu { 2 * f } else { f };
        ops.extend(compute(OpName::Linear3, OpClass::Linear, g, &[1, t, up, d], vec![t, d, up], 1));
        match m.activation {
            Activation::Gelu => ops.extend(compute(OpName::GeLU, OpClass::Gelu, o, &[t, f], vec![b, lr, f], 1)),
            Activation::Swiglu => {
                ops.extend(compute(OpName::SwiGLU, OpClass::Swiglu, o, &[t, f], vec![b, lr, f], 1));
                ops.extend(eager_ops(o, t, f, eager.swiglu, 1));
            }
        }
        ops.extend(compute(OpName::Linear4, OpClass::Linear, g, &[1, t, d, f], vec![t, f, d], 1));
    }
    if m.dropout > 0.0 {
        if m.attention != Attention::Flash {
            let scores = [b * hp * lr, lr, 1];
            ops.extend(compute(OpName::AttentionDropout, OpClass::Elementwise, o, &scores, vec![b, hp, lr, lr], 1));
        }
        let rows = [t, d, 3];
        ops.extend(compute(OpName::BiasDropoutAdd, OpClass::Elementwise, o, &rows, vec![b, lr, d], 2));
    }
    let e = comm_elem_bytes(cfg);
    let act_bytes = (t * d) as f64 * e;
    let (fwd_sites, bwd_sites) = match (mlp, m.parallel_residual) {
        (false, _) => (1, 1),
        (true, true) => (1, 2),
        (true, false) => (2, 2),
    };
    ops.extend(tp_sync(cfg, layout, Phase::Fwd, fwd_sites, act_bytes, t * d, mlp));
    ops.extend(tp_sync(cfg, layout, Phase::Bwd, bwd_sites, act_bytes, t * d, mlp));
    // Context parallelism's communication (MLA: the per-head keys and values of the head dims).
    ops.extend(crate::llm::cp::cp_ops(cfg, layout, hp, core_kv, core_dh, e));
    ops
}

/// The first stage's operators beyond its layers: the vocabulary-parallel embedding and its tensor-parallel
/// reduction (Megatron's `VocabParallelEmbedding` all-reduces its output — S1 omits it; with sequence
/// parallelism it reduce-scatters instead, and the backward all-gathers the gradient).
pub fn embedding_ops(cfg: &TrainingConfig, layout: &Layout, prec: OpPrecisions, v_padded: u64) -> Vec<StageOp> {
    let d = cfg.model.hidden as u64;
    let t = cfg.tokens_per_rank();
    let vp = v_padded / cfg.tp as u64;
    let mut ops = Vec::with_capacity(4);
    ops.extend(compute(OpName::Embedding, OpClass::Embedding, prec.other, &[t, vp, d], vec![t, vp, d], 1));
    if cfg.tp > 1 {
        let bytes = (t * d) as f64 * comm_elem_bytes(cfg);
        let tp = layout.tp_group;
        let f = vec![t * d, tp.nodes as u64, tp.ranks_per_node as u64];
        let a = layout.active_per_node;
        if cfg.sp() {
            ops.push(collective(
                OpName::MpReduceScatter,
                Phase::Fwd,
                1,
                Collective::ReduceScatter,
                bytes,
                tp,
                a,
                f.clone(),
            ));
            ops.push(collective(OpName::MpAllGather, Phase::Bwd, 1, Collective::AllGather, bytes, tp, a, f));
        } else {
            ops.push(collective(OpName::MpAllReduce, Phase::Fwd, 1, Collective::AllReduce, bytes, tp, a, f));
        }
    }
    ops
}

/// The last stage's operators beyond its layers: final norm, LM head (16-bit even under fp8 training, as
/// Transformer Engine recipes keep the output layer), vocabulary-parallel cross-entropy (its internal
/// all-reduces are ignored, S1), and with sequence parallelism the all-gather before the LM head (reduce-scatter
/// backward).
pub fn head_ops(cfg: &TrainingConfig, layout: &Layout, prec: OpPrecisions, v_padded: u64) -> Vec<StageOp> {
    let (b, d) = (cfg.micro_batch as u64, cfg.model.hidden as u64);
    let t = cfg.tokens_per_rank();
    let vp = v_padded / cfg.tp as u64;
    let rows = if cfg.sp() { t / cfg.tp as u64 } else { t };
    let norm = norm_op(cfg);
    let mut ops = Vec::with_capacity(8);
    ops.extend(compute(norm.0, norm.1, prec.other, &[rows, d], vec![b, rows / b.max(1), d], 1));
    if cfg.model.norm == Norm::Rmsnorm {
        ops.extend(eager_ops(prec.other, rows, d, cfg.framework.eager.rmsnorm, 1));
    }
    if cfg.sp() {
        let bytes = (t * d) as f64 * comm_elem_bytes(cfg);
        let tp = layout.tp_group;
        let f = vec![t * d, tp.nodes as u64, tp.ranks_per_node as u64];
        let a = layout.active_per_node;
        ops.push(collective(OpName::MpAllGather, Phase::Fwd, 1, Collective::AllGather, bytes, tp, a, f.clone()));
        ops.push(collective(OpName::MpReduceScatter, Phase::Bwd, 1, Collective::ReduceScatter, bytes, tp, a, f));
    }
    ops.extend(compute(OpName::FinalLinear, OpClass::Linear, prec.other, &[1, t, vp, d], vec![t, d, vp], 1));
    ops.extend(compute(
        OpName::CrossEntropy,
        OpClass::CrossEntropy,
        prec.other,
        &[t, vp],
        vec![b, t / b.max(1), vp],
        1,
    ));
    ops
}

/// The pipeline send of one micro-batch's activations (forward) or their gradients (backward), b·(l/cp)·d/tp
/// elements (Megatron's scatter-gather optimization, or the sequence-parallel shard), charged to the sender
/// (S1).
pub fn p2p_op(cfg: &TrainingConfig, layout: &Layout, phase: Phase, group: Group) -> StageOp {
    let t = cfg.tokens_per_rank();
    let d = cfg.model.hidden as u64;
    let elems = t * d / cfg.tp as u64;
    collective(
        OpName::PpP2p,
        phase,
        1,
        Collective::SendRecv,
        elems as f64 * comm_elem_bytes(cfg),
        group,
        layout.p2p_active_per_node(cfg),
        vec![elems, group.nodes as u64, group.ranks_per_node as u64],
    )
}

/// The fused Adam step over `params` parameters (timed under the training's non-GEMM precision, the key its
/// regressor is trained under).
pub fn optimizer_work(params: f64, dtype: Precision) -> Work {
    Work::Compute { shape: OpShape::new(OpClass::Optimizer, Phase::Fwd, &[params.round() as u64]), dtype }
}

#[cfg(test)]
#[path = "operators_tests.rs"]
mod tests;
