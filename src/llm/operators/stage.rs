//! The operators of a pipeline stage beyond its transformer layers: the first stage's embedding
//! ([`embedding_ops`]), the last stage's head ([`head_ops`]), the pipeline send between stages ([`p2p_op`]) and the
//! optimizer step ([`optimizer_work`]).

use super::layer::norm_op;
use super::work::{collective, comm_elem_bytes, compute, eager_ops, OpPrecisions, StageOp, Work};
use super::OpName;
use crate::comm::Group;
use crate::hw::Precision;
use crate::llm::config::{Norm, TrainingConfig};
use crate::llm::framework::Framework;
use crate::llm::layout::Layout;
use crate::op::Collective;
use crate::op::{OpClass, OpShape, Phase};

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
    // Megatron-DeepSpeed's `GPTModelPipe` upcasts the logits (`float16_to_fp32`) and runs the unfused
    // vocabulary-parallel loss on the fp32 copy (the shape's third dim 1: [`crate::op`]'s table).
    let upcast = u64::from(cfg.framework.framework == Framework::Deepspeed);
    ops.extend(compute(
        OpName::CrossEntropy,
        OpClass::CrossEntropy,
        prec.other,
        &[t, vp, upcast],
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
