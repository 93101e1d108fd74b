//! The training framework that runs a configuration, and what it changes in the time: which kernels a layer
//! launches (Transformer Engine's fused kernels, PyTorch eager operators or `torch.compile`'s fused ones), which
//! attention kernel runs, how the optimizer step is launched, in which precision gradients are reduced, and how a
//! fully sharded model's parameter gathers overlap the layers. Each behaviour is the framework's own, cited from
//! its code; none is a constant fitted to a source.
//!
//! The physical effects stay with the cost model's constants ([`crate::cost::Efficiency`]: DRAM fraction, per-kernel
//! GPU and host cost): a framework changes *how many* kernels and bytes there are, not what one costs.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::hw::GpuSpec;
use crate::llm::config::{bad, ConfigError};
use crate::llm::cuda_graphs::CudaGraphs;
use crate::llm::moe::{Dispatcher, MoeTraining};

/// The framework a training run uses (`framework` in a training request and a search).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema, Default)]
#[serde(rename_all = "lowercase")]
pub enum Framework {
    /// Megatron-LM / Megatron-Core with Transformer Engine (the default): TE's fused layers (LayerNormLinear,
    /// fused RoPE, fused SwiGLU, cuDNN / FlashAttention-3 attention), fused Adam, gradients reduced in fp32 under
    /// bf16 (Megatron-LM `arguments.py`: "bfloat16 requires gradient accumulation and all-reduce to be done in
    /// fp32", unless `--grad-reduce-in-bf16`).
    #[default]
    Megatron,
    /// Megatron-Core as NeMo / Megatron-Bridge's performance recipes run it: Megatron's kernels, gradients reduced
    /// in bf16 (`set_llama31_common_configs` etc.: `cfg.ddp.grad_reduce_in_fp32 = False`).
    Nemo,
    /// PyTorch-native torchtitan: FSDP2 (`fully_shard` per transformer block), DTensor tensor / sequence
    /// parallelism, `torch.distributed.pipelining`, context parallelism; PyTorch eager modules (`nn.RMSNorm`,
    /// `F.silu(w1(x)) * w3(x)`, complex-number RoPE) fused by `torch.compile` when `torch_compile` is set;
    /// attention through `F.scaled_dot_product_attention` (FlashAttention-2); fused AdamW
    /// (`OptimizersContainer`, `implementation: "fused"`); gradients reduce-scattered in fp32
    /// (`mixed_precision_reduce = "float32"`, `torchtitan/config/job_config.py`).
    Torchtitan,
    /// DeepSpeed (ZeRO 1–3; Megatron-DeepSpeed's models): Megatron's fused kernels (apex), DeepSpeed's fused
    /// Adam, gradients reduced in the training precision in `reduce_bucket_size` buckets (5·10⁸ elements).
    Deepspeed,
    /// Hugging Face Transformers' Trainer: eager PyTorch modules (`LlamaRMSNorm`, `rotate_half` RoPE, `act_fn(
    /// gate_proj(x)) * up_proj(x)`), SDPA attention, `torch.optim.AdamW` (foreach), DDP or PyTorch FSDP with
    /// gradients reduced in fp32 (FSDP `MixedPrecision(reduce_dtype=float32)`, as Composer's `DEFAULT`).
    Hf,
}

impl Framework {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Framework::Megatron => "megatron",
            Framework::Nemo => "nemo",
            Framework::Torchtitan => "torchtitan",
            Framework::Deepspeed => "deepspeed",
            Framework::Hf => "hf",
        }
    }

    /// Megatron-Core runs the model (Megatron-LM, NeMo): every MoE option of a request is its own.
    pub fn is_megatron_core(self) -> bool {
        matches!(self, Framework::Megatron | Framework::Nemo)
    }

    /// The mixture-of-experts token dispatchers the framework has, its default first: Megatron-Core's four
    /// (`moe_token_dispatcher_type`, default `allgather`); torchtitan's `expert_parallel_comm_backend`
    /// (`standard` — `all_to_all_single` over the expert-parallel group, `distributed/expert_parallel.py` — or
    /// `deepep` / `hybridep`); DeepSpeed-MoE's all-to-all (`deepspeed/moe/sharded_moe.py` `_AllToAll`); Hugging
    /// Face Transformers' MoE blocks gather each expert's tokens on the GPU itself (no expert parallelism), the
    /// alltoall dispatcher's local permutation.
    pub fn moe_dispatchers(self) -> &'static [Dispatcher] {
        match self {
            Framework::Megatron | Framework::Nemo => &Dispatcher::ALL,
            Framework::Torchtitan => &[Dispatcher::Alltoall, Dispatcher::Deepep, Dispatcher::Hybridep],
            Framework::Deepspeed | Framework::Hf => &[Dispatcher::Alltoall],
        }
    }

    /// The framework shards experts over GPUs (expert parallelism, ep > 1): all but Hugging Face Transformers,
    /// whose MoE blocks (`Qwen3MoeSparseMoeBlock`, `MixtralSparseMoeBlock`) hold every expert on every rank.
    pub fn has_expert_parallelism(self) -> bool {
        self != Framework::Hf
    }

    /// The framework captures training steps as CUDA graphs: Megatron-Core (`--cuda-graph-impl local` or
    /// `transformer_engine`, NeMo's `cuda_graph_impl`); torchtitan, DeepSpeed and Hugging Face's Trainer have no
    /// such option for training.
    pub fn has_cuda_graphs(self) -> bool {
        self.is_megatron_core()
    }
}

/// How the optimizer step is launched (PyTorch `torch.optim.AdamW`'s `fused` / `foreach` / for-loop
/// implementations; apex's and Transformer Engine's `FusedAdam` are the fused kind).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum OptimizerImpl {
    /// One multi-tensor kernel reads p, g, m, v once and writes p, m, v (apex / TE `FusedAdam`, torch `fused=True`).
    Fused,
    /// `torch._foreach_*` ops: each of AdamW's element-wise steps is one multi-tensor kernel over every parameter,
    /// so the state is read and written once per step ([`OptimizerImpl::passes`]).
    Foreach,
    /// A Python loop over the parameter tensors (torch `foreach=False`, Composer's `DecoupledAdamW`): every step
    /// of every tensor is its own kernel.
    PerTensor,
}

impl OptimizerImpl {
    /// Passes over the optimizer state of one step relative to the fused kernel: 1 fused; foreach and per-tensor
    /// AdamW run its element-wise steps separately (torch `optim/adamw.py` `_multi_tensor_adamw` /
    /// `_single_tensor_adamw`: `lerp_` of m, `mul_` + `addcmul_` of v, `sqrt` + `div_` + `add_` of the
    /// denominator, `addcdiv_` of p, the decoupled `mul_` of p) — 8 kernels, each reading and writing one state
    /// tensor, against the fused kernel's single pass over all of them: about 8·2 tensor passes / 7 ≈ 2.3×
    /// the fused kernel's bytes; rounded to 2.
    pub fn passes(self) -> f64 {
        match self {
            OptimizerImpl::Fused => 1.0,
            OptimizerImpl::Foreach | OptimizerImpl::PerTensor => 2.0,
        }
    }

    /// Kernel launches of one step over `tensors` parameter tensors: the fused multi-tensor kernel and foreach
    /// ops launch once per chunk of tensors (`multi_tensor_apply`'s chunks; one per tensor list here), per-tensor
    /// once per tensor and step (8 steps).
    pub fn launches(self, tensors: f64) -> f64 {
        match self {
            OptimizerImpl::Fused => 1.0,
            OptimizerImpl::Foreach => 8.0,
            OptimizerImpl::PerTensor => 8.0 * tensors.max(1.0),
        }
    }
}

/// The attention kernel a framework calls (`attention_backend` in a training request's `parallelism`, after
/// Megatron-LM's `--attention-backend`; default: the framework's, [`FrameworkTraits::of`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum AttentionKernel {
    /// `fused`: Transformer Engine's fused attention, cuDNN's flash attention (`FusedAttention`, the backend TE
    /// selects on Hopper and later: [`CUDNN_OVER_FA3_ON_HOPPER`]). The learned prefill-attention model it is timed
    /// through measured vLLM's FlashAttention-3 on Hopper, so on Hopper it runs at cuDNN's share of that rate; on
    /// Blackwell the measured kernels are taken as cuDNN's.
    Fused,
    /// `flash2`: FlashAttention-2 (`flash-attn` 2.x, PyTorch `scaled_dot_product_attention`'s flash backend),
    /// which on Hopper uses neither TMA nor warp-group GEMMs ([`FA2_ON_HOPPER_SLOWDOWN`]).
    #[serde(rename = "flash2")]
    Flash2,
    /// `flash1`: FlashAttention (v1, `flash-attn` 1.x) — [`FLASH1_OVER_FA2`].
    #[serde(rename = "flash1")]
    Flash1,
    /// `triton`: FlashAttention's Triton port (Dao's `flash_attn_triton.py`; llm-foundry's MPT
    /// `attn_config.attn_impl: triton`) — [`TRITON_FLASH_OVER_FA2`].
    Triton,
}

/// FlashAttention-2's time over FlashAttention-3's on Hopper and later GPUs, forward and backward together:
/// Shah et al. 2024 ("FlashAttention-3", Fig. 5 and 6, H100 SXM5, bf16, 16k tokens): head dim 128, FA2 forward
/// 370 TFLOP/s against FA3's 648 (1.75×), backward 322 against 561 (1.74×); head dim 64, backward 291 against 474
/// (1.63×). 1.75: the head dim of 128 of the models trained today. These are the panels without causal mask (Fig.
/// 5(c), 6(b)); with the causal mask the forward is 335 against 616 (1.84×, Fig. 5(d)), and no causal backward is
/// published, so one ratio serves both passes.
pub const FA2_ON_HOPPER_SLOWDOWN: f64 = 1.75;

/// cuDNN's flash-attention time over FlashAttention-3's on Hopper, (forward, backward): Shah et al. 2024
/// ("FlashAttention-3", Fig. 5 and 6, H100 SXM5, bf16, head dim 128, 16k tokens): cuDNN forward 595 TFLOP/s against
/// FlashAttention-3's 648, backward 516 against 561 — 648 / 595 = 1.089 and 561 / 516 = 1.087. Transformer Engine
/// runs cuDNN, not FlashAttention-3, whenever both can serve a bf16/fp16 call on Hopper or later
/// (`transformer_engine/pytorch/attention/dot_product_attention/utils.py` `get_attention_backend`, "Disabling
/// FlashAttention to give FusedAttention preference on Hopper+ for performance reasons"; TE 1.2's release notes:
/// "Performance of DotProductAttention is increased on Hopper GPUs by utilizing cuDNN"), while the learned H100
/// prefill model measured vLLM's FlashAttention-3 (`vllm_flash_attn_fa3` in aiconfigurator's tables).
pub const CUDNN_OVER_FA3_ON_HOPPER: (f64, f64) = (648.0 / 595.0, 561.0 / 516.0);

/// FlashAttention-2's rate with the causal mask over its rate without, on Hopper: Shah et al. 2024
/// ("FlashAttention-3", Fig. 5(d) against 5(c), H100 SXM5, bf16, head dim 128, 16k tokens, FLOPs of the causal
/// call counted as half): 335 TFLOP/s against 370. A call without the mask of the same FLOPs therefore takes 335 / 370
/// = 0.905 of the causal call's time: every tile is full, no diagonal tile is masked and every thread block of
/// the grid does the same work (with the mask, query block i visits i + 1 key blocks).
pub const FA2_CAUSAL_OVER_FULL_RATE_ON_HOPPER: f64 = 335.0 / 370.0;

/// cuDNN's flash-attention rate with the causal mask over its rate without, on Hopper: Shah et al. 2024 (Fig. 5(d)
/// against 5(c), same benchmark as [`FA2_CAUSAL_OVER_FULL_RATE_ON_HOPPER`]): 539 TFLOP/s against 595.
pub const CUDNN_CAUSAL_OVER_FULL_RATE_ON_HOPPER: f64 = 539.0 / 595.0;

/// FlashAttention (v1)'s time over FlashAttention-2's, (forward, backward): Dao 2023 ("FlashAttention-2", §4.1,
/// A100 80 GB, head dim 64 and 128, causal and not, 512–16k tokens): "FlashAttention-2 is around 2× faster than
/// FlashAttention" in both passes.
pub const FLASH1_OVER_FA2: (f64, f64) = (2.0, 2.0);

/// FlashAttention's Triton port's time over FlashAttention-2's, (forward, backward): Dao 2023
/// ("FlashAttention-2", §4.1, same benchmark): FlashAttention-2 is "around 1.3–1.5× faster than FlashAttention
/// in Triton in the forward pass and around 2× faster in the backward pass" — 1.4 (the middle) and 2.
pub const TRITON_FLASH_OVER_FA2: (f64, f64) = (1.4, 2.0);

impl AttentionKernel {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            AttentionKernel::Fused => "fused",
            AttentionKernel::Flash2 => "flash2",
            AttentionKernel::Flash1 => "flash1",
            AttentionKernel::Triton => "triton",
        }
    }

    /// Time multipliers (forward, backward) of this kernel over the measured one (the learned prefill model's) on
    /// `gpu`: cuDNN's on Hopper ([`CUDNN_OVER_FA3_ON_HOPPER`], 1 elsewhere); FlashAttention-2 on Hopper and later
    /// ([`FA2_ON_HOPPER_SLOWDOWN`]), 1 on Ampere and older, where FlashAttention-2 is the fastest kernel there is;
    /// FlashAttention (v1) and its Triton port are FlashAttention-2's times these kernels' ratios measured on the
    /// A100 ([`FLASH1_OVER_FA2`], [`TRITON_FLASH_OVER_FA2`]; assumed to hold on later GPUs, where neither was
    /// tuned). A recomputed forward is a forward.
    pub fn slowdown(self, gpu: &GpuSpec) -> (f64, f64) {
        let fa2 = if gpu.hopper_or_later() { FA2_ON_HOPPER_SLOWDOWN } else { 1.0 };
        match self {
            AttentionKernel::Fused if gpu.generation() == "hopper" => CUDNN_OVER_FA3_ON_HOPPER,
            AttentionKernel::Fused => (1.0, 1.0),
            AttentionKernel::Flash2 => (fa2, fa2),
            AttentionKernel::Flash1 => (fa2 * FLASH1_OVER_FA2.0, fa2 * FLASH1_OVER_FA2.1),
            AttentionKernel::Triton => (fa2 * TRITON_FLASH_OVER_FA2.0, fa2 * TRITON_FLASH_OVER_FA2.1),
        }
    }

    /// The time of a call without the causal mask over a causal call of the same FLOPs, forward and backward, on
    /// `gpu` — what a context-parallel ring step that attends a whole other chunk costs per FLOP against the
    /// learned model's causal prefill ([`crate::llm::cp::ring_step_scale`]): cuDNN's and FlashAttention-2's
    /// measured ratios on Hopper ([`CUDNN_CAUSAL_OVER_FULL_RATE_ON_HOPPER`],
    /// [`FA2_CAUSAL_OVER_FULL_RATE_ON_HOPPER`]); 1 where no measurement exists (other GPUs, FlashAttention v1, the
    /// Triton port). Assumption: the backward takes the forward's ratio — the paper publishes no causal backward,
    /// and the backward's causal grid is the forward's mirror image (key block j visits the query blocks from j on).
    pub fn full_over_causal(self, gpu: &GpuSpec) -> (f64, f64) {
        let r = match self {
            _ if gpu.generation() != "hopper" => 1.0,
            AttentionKernel::Fused => CUDNN_CAUSAL_OVER_FULL_RATE_ON_HOPPER,
            AttentionKernel::Flash2 => FA2_CAUSAL_OVER_FULL_RATE_ON_HOPPER,
            AttentionKernel::Flash1 | AttentionKernel::Triton => 1.0,
        };
        (r, r)
    }
}

/// Extra element-wise kernels an eager PyTorch operator launches beyond the one fused kernel the operator table
/// counts, forward and backward, each reading and writing the operator's tensor once (counted from the module
/// code, autograd's backward of each step included):
/// - RMSNorm (`nn.RMSNorm` / `LlamaRMSNorm`: cast to fp32, `pow(2)`, `mean`, `+ eps` and `rsqrt` on the row
///   statistic, multiply, cast back, multiply by the weight): 4 full-size passes beyond one forward, 8 backward;
///   LayerNorm is one native kernel (`F.layer_norm`) in every framework: 0.
/// - SwiGLU (`F.silu(gate) * up`): the separate `silu` and `mul` add one pass forward, two backward.
/// - RoPE, torchtitan's complex form (`view_as_complex` of the fp32 copy, complex multiply, `view_as_real`,
///   `type_as`): 2 forward, 2 backward; Hugging Face's `rotate_half` (`cat` of the negated half, two multiplies, an
///   add, for q and k): 4 and 4.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct EagerKernels {
    pub rmsnorm: (u32, u32),
    pub swiglu: (u32, u32),
    pub rope: (u32, u32),
}

impl EagerKernels {
    /// No extra kernels (Transformer Engine / Megatron's fused kernels, or `torch.compile`).
    pub const FUSED: EagerKernels = EagerKernels { rmsnorm: (0, 0), swiglu: (0, 0), rope: (0, 0) };
    /// torchtitan without `torch.compile`.
    pub const TORCHTITAN: EagerKernels = EagerKernels { rmsnorm: (4, 8), swiglu: (1, 2), rope: (2, 2) };
    /// Hugging Face Transformers' eager modules.
    pub const HF: EagerKernels = EagerKernels { rmsnorm: (4, 8), swiglu: (1, 2), rope: (4, 4) };
}

/// What a framework (with the request's options) does that changes the time.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FrameworkTraits {
    pub framework: Framework,
    /// Extra eager kernels per operator.
    pub eager: EagerKernels,
    /// The attention kernel.
    pub attention: AttentionKernel,
    /// The optimizer's implementation.
    pub optimizer: OptimizerImpl,
    /// Gradients are reduced (all-reduce or reduce-scatter) in fp32: 4 bytes per element instead of 2.
    pub grad_reduce_in_fp32: bool,
    /// A fully sharded model (ZeRO-3) gathers its parameters per wrapped transformer block (FSDP's
    /// `fully_shard` / `FullyShardedDataParallel` units, DeepSpeed's per-module fetch) instead of in Megatron's
    /// parameter-count buckets: the gather of block i + 1 is prefetched during block i's forward, so each
    /// block's gather hides behind its predecessor's computation ([`crate::llm::timing::chunk_seconds`]).
    pub gather_per_block: bool,
    /// Which parts of the iteration replay as CUDA graphs (host time, [`crate::llm::cuda_graphs`]).
    pub cuda_graphs: CudaGraphs,
}

/// A framework's defaults and the request's options over them.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct FrameworkOptions {
    /// `torch.compile` (torchtitan `compile`, Hugging Face `torch_compile`): Inductor fuses the eager element-wise
    /// kernels as Transformer Engine does. Only the PyTorch-native frameworks compile.
    pub torch_compile: Option<bool>,
    /// The optimizer implementation, else the framework's.
    pub optimizer: Option<OptimizerImpl>,
    /// Reduce gradients in fp32 (Megatron-Core DDP `grad_reduce_in_fp32`, FSDP `reduce_dtype`), else the
    /// framework's default.
    pub grad_reduce_in_fp32: Option<bool>,
    /// The mixture-of-experts token dispatcher, else the framework's default ([`Framework::moe_dispatchers`]).
    pub moe_token_dispatcher: Option<Dispatcher>,
    /// CUDA graphs, else none (every framework's default; [`Framework::has_cuda_graphs`]).
    pub cuda_graphs: Option<CudaGraphs>,
    /// The attention kernel, else the framework's.
    pub attention_backend: Option<AttentionKernel>,
}

impl FrameworkTraits {
    /// The traits of `framework` with `opts`, for training in 16 bits (`bf16`: whether the training precision is
    /// bf16, where Megatron-LM reduces gradients in fp32 by default).
    pub fn of(framework: Framework, opts: &FrameworkOptions, bf16: bool) -> FrameworkTraits {
        let compiled = opts.torch_compile.unwrap_or(false);
        let (eager, attention, optimizer, reduce_fp32, per_block) = match framework {
            Framework::Megatron => (EagerKernels::FUSED, AttentionKernel::Fused, OptimizerImpl::Fused, bf16, false),
            Framework::Nemo => (EagerKernels::FUSED, AttentionKernel::Fused, OptimizerImpl::Fused, false, false),
            Framework::Deepspeed => (EagerKernels::FUSED, AttentionKernel::Fused, OptimizerImpl::Fused, false, true),
            Framework::Torchtitan => {
                let eager = if compiled { EagerKernels::FUSED } else { EagerKernels::TORCHTITAN };
                (eager, AttentionKernel::Flash2, OptimizerImpl::Fused, true, true)
            }
            Framework::Hf => {
                let eager = if compiled { EagerKernels::FUSED } else { EagerKernels::HF };
                (eager, AttentionKernel::Flash2, OptimizerImpl::Foreach, true, true)
            }
        };
        FrameworkTraits {
            framework,
            eager,
            attention: opts.attention_backend.unwrap_or(attention),
            optimizer: opts.optimizer.unwrap_or(optimizer),
            grad_reduce_in_fp32: opts.grad_reduce_in_fp32.unwrap_or(reduce_fp32),
            gather_per_block: per_block,
            cuda_graphs: opts.cuda_graphs.unwrap_or_default(),
        }
    }

    /// Bytes per gradient element in the data-parallel reduction: 4 in fp32, else the 16-bit `elem_bytes`.
    pub fn grad_bytes(&self, elem_bytes: f64) -> f64 {
        if self.grad_reduce_in_fp32 {
            4.0
        } else {
            elem_bytes
        }
    }
}

/// `moe`, resolved as Megatron-Core runs it, as `framework` runs it: with the dispatcher the request named
/// (`requested`) or the framework's default ([`Framework::moe_dispatchers`]). The MoE layers are timed as
/// Megatron-Core's (router, permutation, dispatch, grouped or per-expert GEMMs, combine) under every framework; the
/// framework's kernels, optimizer and gradient reduction apply to them as to the dense layers. Errors name the
/// field: `parallelism.ep` > 1 under `hf` (no expert parallelism); `parallelism.moe_token_dispatcher` naming a
/// dispatcher the framework lacks; Megatron-Core's `parallelism.overlap_moe_expert_parallel_comm`,
/// `parallelism.moe_shared_expert_overlap` and `parallelism.moe_hybridep_num_sms` under another framework.
pub fn moe_under(
    framework: Framework,
    moe: &mut MoeTraining,
    requested: Option<Dispatcher>,
) -> Result<(), ConfigError> {
    if framework.is_megatron_core() {
        return Ok(());
    }
    let fw = framework.as_str();
    if moe.ep > 1 && !framework.has_expert_parallelism() {
        return Err(bad(
            "parallelism.ep",
            format!(
                "{fw} holds every expert on every GPU (Hugging Face Transformers' MoE blocks have no expert \
                 parallelism): ep must be 1, or use megatron, nemo, torchtitan or deepspeed"
            ),
        ));
    }
    let allowed = framework.moe_dispatchers();
    match requested {
        Some(d) if !allowed.contains(&d) => {
            let names: Vec<&str> = allowed.iter().map(|d| d.as_str()).collect();
            return Err(bad(
                "parallelism.moe_token_dispatcher",
                format!("{fw} has no {} dispatcher: it dispatches with {}", d.as_str(), names.join(", ")),
            ));
        }
        Some(d) => moe.dispatcher = d,
        None => moe.dispatcher = allowed[0],
    }
    for (on, field) in [
        (moe.overlap_ep_comm, "overlap_moe_expert_parallel_comm"),
        (moe.shared_expert_overlap, "moe_shared_expert_overlap"),
        (moe.hybridep_num_sms.is_some(), "moe_hybridep_num_sms"),
    ] {
        if on {
            return Err(bad(
                &format!("parallelism.{field}"),
                format!("{field} is Megatron-Core's: {fw} does not run it (use framework megatron or nemo)"),
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_follow_each_frameworks_code() {
        let none = FrameworkOptions::default();
        let mega = FrameworkTraits::of(Framework::Megatron, &none, true);
        // Megatron-LM reduces bf16 gradients in fp32; NeMo's performance recipes in bf16; fp16 never in fp32.
        assert!(mega.grad_reduce_in_fp32);
        assert!(!FrameworkTraits::of(Framework::Megatron, &none, false).grad_reduce_in_fp32);
        assert!(!FrameworkTraits::of(Framework::Nemo, &none, true).grad_reduce_in_fp32);
        assert_eq!(
            (mega.grad_bytes(2.0), FrameworkTraits::of(Framework::Nemo, &none, true).grad_bytes(2.0)),
            (4.0, 2.0)
        );
        let titan = FrameworkTraits::of(Framework::Torchtitan, &none, true);
        assert_eq!(
            (titan.eager, titan.attention, titan.optimizer),
            (EagerKernels::TORCHTITAN, AttentionKernel::Flash2, OptimizerImpl::Fused)
        );
        assert!(titan.gather_per_block && titan.grad_reduce_in_fp32);
        // torch.compile fuses the eager kernels; the attention stays SDPA.
        let compiled =
            FrameworkTraits::of(Framework::Torchtitan, &FrameworkOptions { torch_compile: Some(true), ..none }, true);
        assert_eq!((compiled.eager, compiled.attention), (EagerKernels::FUSED, AttentionKernel::Flash2));
        let hf = FrameworkTraits::of(Framework::Hf, &none, true);
        assert_eq!((hf.eager, hf.optimizer), (EagerKernels::HF, OptimizerImpl::Foreach));
        // Options override the defaults.
        let o =
            FrameworkOptions { optimizer: Some(OptimizerImpl::PerTensor), grad_reduce_in_fp32: Some(false), ..none };
        let t = FrameworkTraits::of(Framework::Hf, &o, true);
        assert_eq!((t.optimizer, t.grad_reduce_in_fp32), (OptimizerImpl::PerTensor, false));
    }

    #[test]
    fn flash_attention_2_is_slower_only_from_hopper_on() {
        let gpu = |name: &str| crate::hw::catalog::lookup(name).unwrap().spec.clone();
        assert_eq!(AttentionKernel::Flash2.slowdown(&gpu("A100-SXM4-80GB")), (1.0, 1.0));
        assert_eq!(AttentionKernel::Flash2.slowdown(&gpu("H100-SXM5-80GB")), (1.75, 1.75));
        // Transformer Engine's cuDNN over the measured FlashAttention-3 on Hopper: 648 / 595 and 561 / 516.
        assert_eq!(AttentionKernel::Fused.slowdown(&gpu("H100-SXM5-80GB")), (648.0 / 595.0, 561.0 / 516.0));
        assert_eq!(AttentionKernel::Fused.slowdown(&gpu("A100-SXM4-80GB")), (1.0, 1.0));
        // By hand from FA3's figures (head dim 128, 16k): a forward and its backward (2.5× the FLOPs) take
        // 1/370 + 2.5/322 = 0.010467 under FlashAttention-2 and 1/648 + 2.5/561 = 0.0059995 under
        // FlashAttention-3 (per TFLOP/s): 1.745×.
        assert!((FA2_ON_HOPPER_SLOWDOWN - (1.0 / 370.0 + 2.5 / 322.0) / (1.0 / 648.0 + 2.5 / 561.0)).abs() < 0.01);
    }

    #[test]
    fn flash_attention_1_and_its_triton_port_are_slower_than_flash_attention_2() {
        let gpu = |name: &str| crate::hw::catalog::lookup(name).unwrap().spec.clone();
        // FlashAttention-2 §4.1 on the A100: FA2 about 2x FlashAttention in both passes; 1.3-1.5x (1.4) the
        // Triton port's forward, 2x its backward.
        assert_eq!(AttentionKernel::Flash1.slowdown(&gpu("A100-SXM4-80GB")), (2.0, 2.0));
        assert_eq!(AttentionKernel::Triton.slowdown(&gpu("A100-SXM4-80GB")), (1.4, 2.0));
        // On the H100 on top of FlashAttention-2's 1.75x: 1.75 * 1.4 = 2.45 and 1.75 * 2 = 3.5.
        let (f, b) = AttentionKernel::Triton.slowdown(&gpu("H100-SXM5-80GB"));
        assert!((f - 2.45).abs() < 1e-12 && (b - 3.5).abs() < 1e-12, "{f} {b}");
        // The request's option overrides the framework's kernel.
        let o = FrameworkOptions { attention_backend: Some(AttentionKernel::Triton), ..FrameworkOptions::default() };
        assert_eq!(FrameworkTraits::of(Framework::Hf, &o, true).attention, AttentionKernel::Triton);
        assert_eq!(
            serde_json::from_value::<AttentionKernel>(serde_json::json!("flash2")).unwrap(),
            AttentionKernel::Flash2
        );
    }

    #[test]
    fn optimizer_launches_and_passes() {
        assert_eq!((OptimizerImpl::Fused.launches(500.0), OptimizerImpl::Fused.passes()), (1.0, 1.0));
        assert_eq!(OptimizerImpl::Foreach.launches(500.0), 8.0);
        assert_eq!(OptimizerImpl::PerTensor.launches(500.0), 4000.0);
        assert_eq!(OptimizerImpl::PerTensor.passes(), 2.0);
    }
}
