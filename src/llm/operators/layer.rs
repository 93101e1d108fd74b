//! The operators of one transformer layer ([`layer_ops`], [`layer_passes`]): norms, attention (with the fused-softmax
//! kernel's conditions, [`fused_softmax_available`]), the dense MLP, dropout, and the layer's tensor-parallel
//! synchronization.

use super::work::{collective, comm_elem_bytes, compute, eager_ops, OpPrecisions, Overlap, StageOp};
use super::OpName;
use crate::hw::Precision;
use crate::llm::config::{Activation, Attention, Norm, TrainingConfig};
use crate::llm::framework::Framework;
use crate::llm::layout::Layout;
use crate::op::Collective;
use crate::op::{OpClass, Phase};

pub(crate) fn norm_op(cfg: &TrainingConfig) -> (OpName, OpClass) {
    match cfg.model.norm {
        Norm::Layernorm => (OpName::LayerNorm, OpClass::LayerNorm),
        Norm::Rmsnorm => (OpName::RMSNorm, OpClass::RmsNorm),
    }
}

/// Tensor-parallel communication of `sites` synchronization points of `bytes` (the b·l·d/cp activation of
/// `tokens_d` elements) in `phase`: all-reduces, or all-gather + reduce-scatter pairs with sequence parallelism.
/// The all-gathers move `tokens_d` × [`TrainingConfig::sp_gather_elem_bytes`] (Transformer Engine gathers the
/// quantized tensor under fp8 and nvfp4 recipes); all-reduces and reduce-scatters move `bytes`.
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
/// Without it, under Megatron-Core (Transformer Engine's modules), the backward reduce-scatters of the
/// column-parallel layers' input gradients (Linear1, Linear3) run asynchronously beside those layers' weight-gradient
/// GEMMs ([`super::work::Overlap::wgrad_only`]); every other sequence-parallel collective is charged in full.
/// Without sequence parallelism, under `deepspeed` (Megatron-DeepSpeed's `ColumnParallelLinear` with its default
/// asynchronous all-reduce), the backward all-reduces of the same input gradients overlap the same way.
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
    let ag_bytes = tokens_d as f64 * cfg.sp_gather_elem_bytes(phase);
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
                let (c, size) =
                    if name == Ag { (Collective::AllGather, ag_bytes) } else { (Collective::ReduceScatter, bytes) };
                let mut o = collective(name, phase, 1, c, size, tp, a, f.clone());
                o.overlaps = Some(Overlap { with: gemm, chunks: cfg.tp, wgrad_only: false });
                o
            })
            .collect();
    }
    // The column-parallel layers of the sites (QKV = Linear1, the MLP's up-projection = Linear3), whose backward
    // input-gradient collective may run beside their weight-gradient GEMM.
    let column: &[OpName] = match (mlp, sites) {
        (true, 2) => &[OpName::Linear3, OpName::Linear1],
        (_, 1) => &[OpName::Linear1],
        _ => &[],
    };
    if cfg.sp() {
        let ag = collective(OpName::MpAllGather, phase, sites, Collective::AllGather, ag_bytes, tp, a, f.clone());
        // Without Userbuffers, Transformer Engine's column-parallel layers (QKV = Linear1, the MLP's
        // up-projection = Linear3) still overlap their backward reduce-scatter: `_Linear.backward`,
        // `_LayerNormLinear.backward` and `_LayerNormMLP` (FC1) launch `reduce_scatter_along_first_dim(dgrad,
        // tp_group, async_op=True)` after the dgrad GEMM, compute the weight gradient, then wait on `dgrad_work`
        // (`transformer_engine/pytorch/module/linear.py`, `layernorm_linear.py`, `layernorm_mlp.py`, the branch
        // `elif ctx.parallel_mode == "column" and not ctx.ub_bulk_wgrad`). The all-gathers of the row-parallel
        // layers' output gradients (`grad_output_preprocess`) stay synchronous.
        if phase == Phase::Bwd && cfg.framework.framework.is_megatron_core() && !column.is_empty() {
            let mut ops = vec![ag];
            for &gemm in column {
                let mut rs =
                    collective(OpName::MpReduceScatter, phase, 1, Collective::ReduceScatter, bytes, tp, a, f.clone());
                rs.overlaps = Some(Overlap { with: gemm, chunks: 1, wgrad_only: true });
                ops.push(rs);
            }
            return ops;
        }
        vec![ag, collective(OpName::MpReduceScatter, phase, sites, Collective::ReduceScatter, bytes, tp, a, f)]
    } else if phase == Phase::Bwd && cfg.framework.framework == Framework::Deepspeed && !column.is_empty() {
        // Megatron-DeepSpeed's `ColumnParallelLinear` without sequence parallelism (`megatron/core/tensor_parallel/
        // layers.py`, `LinearWithGradAccumulationAndAsyncCommunication.backward`): with
        // `async_tensor_model_parallel_allreduce` (on unless `--no-async-tensor-model-parallel-allreduce`,
        // `arguments.py`) it launches `torch.distributed.all_reduce(grad_input, async_op=True)` after the dgrad
        // GEMM, computes the weight gradient, then waits on the handle: each column-parallel input-gradient
        // all-reduce hides behind its layer's weight-gradient GEMM.
        column
            .iter()
            .map(|&gemm| {
                let mut ar = collective(OpName::MpAllReduce, phase, 1, Collective::AllReduce, bytes, tp, a, f.clone());
                ar.overlaps = Some(Overlap { with: gemm, chunks: 1, wgrad_only: true });
                ar
            })
            .collect()
    } else {
        vec![collective(OpName::MpAllReduce, phase, sites, Collective::AllReduce, bytes, tp, a, f)]
    }
}

/// The element-wise kernels (forward, backward) that Megatron-LM's softmax fallback runs beyond the mask fill and
/// the softmax, per call, over the b·heads·sq·sk scores: `FusedScaleMaskSoftmax.forward_torch_softmax`
/// (`megatron/model/fused_softmax.py`, Megatron-LM ≤ 0.x legacy and Megatron-DeepSpeed) casts the fp16/bf16 scores
/// to fp32 (`softmax_in_fp32`), multiplies them by the layer's scale, fills the mask, takes the softmax and casts
/// the probabilities back: 5 eager kernels where perfcast's `Fillmask` + `Softmax` count 2; autograd runs the 5
/// backward (`ToCopy`, `SoftmaxBackward`, `MaskedFill`, `Mul`, `ToCopy`). `softmax_in_fp32` and the scale are on by
/// the legacy default `apply_query_key_layer_scaling` (`arguments.py`: `--no-query-key-layer-scaling` is
/// `store_false`; `transformer.py` sets `attention_softmax_in_fp32` when it applies). Timed as one 16-bit read and
/// write each (the fp32 passes move up to twice that; these small launches are host-bound). Counted with the eager
/// element-wise kernels: full recomputation re-runs them, selective `core_attn` does not.
pub const MEGATRON_SOFTMAX_FALLBACK_EXTRA: (u32, u32) = (3, 3);

/// Whether Megatron-LM's fused causal scale-mask-softmax kernel runs for `b` sequences of `heads` heads (per
/// tensor-parallel rank) and `seq` tokens in `dtype`; otherwise Megatron falls back to PyTorch's mask fill and
/// softmax (S1's unfused `Fillmask` + `Softmax`). The conditions of `FusedScaleMaskSoftmax.is_kernel_available`
/// (Megatron-LM `megatron/model/fused_softmax.py`, the same in GPT-NeoX and Megatron-DeepSpeed; the fallback's
/// extra kernels: [`MEGATRON_SOFTMAX_FALLBACK_EXTRA`]): 16-bit input,
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

/// The query and key heads' RMSNorms of a `qk_layernorm` model ([`crate::llm::config::ModelSpec::qk_norm`]) for
/// `t` tokens on this GPU, `hp` query and `kvp` key heads per tensor-parallel rank (the key heads at least one: a
/// rank holds a replica when tp exceeds them) and head dim `dh`: Megatron-Core's `SelfAttention` builds
/// `q_layernorm` and `k_layernorm` (`attention.py` `get_query_key_value_tensors` applies them to the query
/// [sq, b, heads, dh] and key [sq, b, kv heads, dh] after the QKV split), two Transformer Engine `RMSNorm` modules
/// over the last dim: one `QK_Norm` [t·hp, dh] and one [t·kvp, dh], forward and backward, with an eager
/// framework's extra kernels ([`crate::llm::framework::EagerKernels`], as the layer's own norms). Not in a
/// selective `layernorm` recomputation (that module re-runs `input_layernorm` and `pre_mlp_layernorm` only,
/// `transformer_layer.py`); full recomputation re-runs them.
fn qk_norm_ops(cfg: &TrainingConfig, t: u64, hp: u64, kvp: u64, dh: u64, o: Precision) -> Vec<StageOp> {
    let b = (cfg.micro_batch as u64).max(1);
    let eager = cfg.framework.eager;
    let mut ops = Vec::with_capacity(8);
    for rows in [t * hp, t * kvp.max(1)] {
        ops.extend(compute(OpName::QkNorm, OpClass::RmsNorm, o, &[rows, dh], vec![b, rows / b, dh], 1));
        ops.extend(eager_ops(o, rows, dh, eager.rmsnorm, 1));
    }
    ops
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
            if m.qk_norm {
                ops.extend(qk_norm_ops(cfg, t, hp, kvp, dh, o));
            }
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
                if m.attention == Attention::FusedSoftmax {
                    ops.extend(eager_ops(o, b * hp * lr, lr, MEGATRON_SOFTMAX_FALLBACK_EXTRA, 1));
                }
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
    if m.attention == Attention::Flash {
        // The ring's merges of each step's partial output and gradients.
        ops.extend(crate::llm::cp::merge_ops(cfg, hp, core_kv, core_dh, o));
    }
    ops
}
