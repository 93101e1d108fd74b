//! Operator decomposition of one training iteration (S1 Table I, MODELS.md §1.1): which operators every pipeline
//! stage runs per micro-batch, with their shapes, S1 feature vectors and call counts.

use serde::Serialize;
use utoipa::ToSchema;

use super::config::{Attention, Norm, TrainingConfig};
use super::partition::StageRole;
use crate::comm::{Collective, Group};
use crate::op::{OpClass, OpShape, Phase};

/// S1 Table I operator names.
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
    Linear4,
    #[serde(rename = "Final_Linear")]
    FinalLinear,
    #[serde(rename = "Parallel_Cross_Entropy")]
    CrossEntropy,
    #[serde(rename = "MP_Allreduce")]
    MpAllReduce,
    #[serde(rename = "DP_Allreduce")]
    DpAllReduce,
    #[serde(rename = "DP_Reduce_Scatter")]
    DpReduceScatter,
    #[serde(rename = "DP_Allgather")]
    DpAllGather,
    #[serde(rename = "PP_P2P")]
    PpP2p,
    Optimizer,
}

/// What an operator does: a computation of a shape, or a collective of a size over a group.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Work {
    Compute(OpShape),
    Collective {
        collective: Collective,
        /// Bytes as nccl-tests counts them.
        bytes: f64,
        group: Group,
        /// GPUs per node communicating at the same time (they share the NICs).
        active_per_node: u32,
    },
}

/// One operator of a stage: runs `calls` times per micro-batch (per step for the update operators).
#[derive(Debug, Clone, PartialEq)]
pub struct StageOp {
    pub name: OpName,
    pub phase: Phase,
    pub calls: u32,
    pub work: Work,
    /// The S1 Table I feature vector.
    pub features: Vec<u64>,
}

/// Where the parallel groups sit. Rank order is tp fastest, then dp, then pp (Megatron's and GPT-NeoX's
/// default topology), so a tensor-parallel group is packed into as few nodes as possible and a data-parallel
/// group strides by tp.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Layout {
    pub tp_group: Group,
    pub dp_group: Group,
    /// GPUs of a node that communicate at once in tp/dp collectives.
    pub active_per_node: u32,
    pub gpus_per_node: u32,
}

impl Layout {
    /// The layout of `cfg` on nodes of `gpus_per_node` GPUs.
    pub fn new(cfg: &TrainingConfig, gpus_per_node: u32) -> Layout {
        let gpn = gpus_per_node.max(1);
        let tp_group = Group::new(cfg.tp, cfg.tp.min(gpn));
        let dp_per_node = if cfg.tp >= gpn { 1 } else { (gpn / cfg.tp).max(1).min(cfg.dp) };
        let dp_group = Group::new(cfg.dp, dp_per_node);
        let active = (cfg.gpus().min(gpn as u64)) as u32;
        Layout { tp_group, dp_group, active_per_node: active, gpus_per_node: gpn }
    }

    /// The pipeline send from stage `s` to `s + 1` (or back): within a node when both ends' first ranks are on
    /// the same node.
    pub fn p2p_group(&self, cfg: &TrainingConfig, s: u32) -> Group {
        let stride = cfg.tp as u64 * cfg.dp as u64;
        let gpn = self.gpus_per_node as u64;
        if (s as u64 * stride) / gpn == ((s as u64 + 1) * stride) / gpn {
            Group { ranks: 2, nodes: 1, ranks_per_node: 2 }
        } else {
            Group { ranks: 2, nodes: 2, ranks_per_node: 1 }
        }
    }

    /// GPUs of a node that send pipeline activations at the same time (one stage's tp·dp ranks on a node).
    pub fn p2p_active_per_node(&self, cfg: &TrainingConfig) -> u32 {
        (cfg.tp as u64 * cfg.dp as u64).min(self.gpus_per_node as u64) as u32
    }
}

/// Bytes per element of activations and gradients exchanged in `cfg`'s precision (fp8 training keeps 16-bit
/// activations and gradients).
pub fn comm_elem_bytes(cfg: &TrainingConfig) -> f64 {
    cfg.precision.bytes().max(2.0)
}

fn compute(name: OpName, class: OpClass, dims: &[u64], features: Vec<u64>, calls: u32) -> [StageOp; 2] {
    [Phase::Fwd, Phase::Bwd].map(|phase| StageOp {
        name,
        phase,
        calls,
        work: Work::Compute(OpShape::new(class, phase, dims)),
        features: features.clone(),
    })
}

/// The compute operators of one encoder forward and backward (S1 Table I), each with `calls` = `encoders`.
pub fn encoder_ops(cfg: &TrainingConfig, encoders: u32) -> Vec<StageOp> {
    let m = &cfg.model;
    let (b, l, d, h) = (cfg.micro_batch as u64, m.seq_len as u64, m.hidden as u64, m.heads as u64);
    let mp = cfg.tp as u64;
    let (bl, hp, dh) = (b * l, h / mp, d / h);
    let ffn = 4 * d / mp;
    let norm = match m.norm {
        Norm::Layernorm => (OpName::LayerNorm, OpClass::LayerNorm),
        Norm::Rmsnorm => (OpName::RMSNorm, OpClass::RmsNorm),
    };
    let mut ops = Vec::with_capacity(24);
    // Two norms per encoder (before attention and before the MLP; also with the parallel residual).
    ops.extend(compute(norm.0, norm.1, &[bl, d], vec![b, l, d], 2 * encoders));
    ops.extend(compute(OpName::Linear1, OpClass::Linear, &[1, bl, 3 * d / mp, d], vec![bl, d, 3 * d / mp], encoders));
    if m.rotary {
        ops.extend(compute(OpName::RoPE, OpClass::Rope, &[b * l * hp, dh], vec![b, l, hp, dh], encoders));
    }
    match m.attention {
        Attention::FusedSoftmax | Attention::Unfused => {
            ops.extend(compute(OpName::QkT, OpClass::Bmm, &[b * hp, l, l, dh], vec![b * hp, l, dh, l], encoders));
            if m.attention == Attention::FusedSoftmax {
                ops.extend(compute(
                    OpName::FusedSoftmax,
                    OpClass::FusedSoftmax,
                    &[b * hp * l, l],
                    vec![b * hp, l, l],
                    encoders,
                ));
            } else {
                ops.extend(compute(OpName::Fillmask, OpClass::FillMask, &[b * hp * l, l], vec![b, hp, l, d], encoders));
                ops.extend(compute(OpName::Softmax, OpClass::Softmax, &[b * hp * l, l], vec![b, hp, l, l], encoders));
            }
            ops.extend(compute(OpName::AttnV, OpClass::Bmm, &[b * hp, l, dh, l], vec![b * hp, l, l, dh], encoders));
        }
        Attention::Flash => {
            ops.extend(compute(
                OpName::FlashAttention,
                OpClass::FlashAttention,
                &[b, l, hp, dh],
                vec![b, l, hp, dh],
                encoders,
            ));
        }
    }
    ops.extend(compute(OpName::Linear2, OpClass::Linear, &[1, bl, d, d / mp], vec![bl, d / mp, d], encoders));
    ops.extend(compute(OpName::Linear3, OpClass::Linear, &[1, bl, ffn, d], vec![bl, d, ffn], encoders));
    ops.extend(compute(OpName::GeLU, OpClass::Gelu, &[bl, ffn], vec![b, l, ffn], encoders));
    ops.extend(compute(OpName::Linear4, OpClass::Linear, &[1, bl, d, ffn], vec![bl, ffn, d], encoders));
    ops
}

/// Every operator stage `s` runs per micro-batch (compute, tensor-parallel all-reduces, the pipeline send it is
/// charged for), given its role, its encoders and the padded vocabulary.
///
/// Tensor-parallel all-reduces of the b·l·d activations (S1): per encoder 1 forward with the parallel residual,
/// else 2, and 2 backward; one more forward on the first stage for the vocabulary-parallel embedding (Megatron's
/// `VocabParallelEmbedding` all-reduces its output; S1 omits it). The all-reduces inside the parallel
/// cross-entropy are ignored (S1: negligible volume). The PP_P2P send of b·l·d/mp activations is charged to the
/// sender: forward on every stage but the last, backward on every stage but the first.
pub fn stage_ops(
    cfg: &TrainingConfig,
    layout: &Layout,
    s: u32,
    role: StageRole,
    encoders: u32,
    v_padded: u64,
) -> Vec<StageOp> {
    let m = &cfg.model;
    let (b, l, d) = (cfg.micro_batch as u64, m.seq_len as u64, m.hidden as u64);
    let mp = cfg.tp as u64;
    let bl = b * l;
    let vp = v_padded / mp;
    let e = comm_elem_bytes(cfg);
    let mut ops = encoder_ops(cfg, encoders);
    let first = matches!(role, StageRole::First | StageRole::Only);
    let last = matches!(role, StageRole::Last | StageRole::Only);
    if first {
        ops.extend(compute(OpName::Embedding, OpClass::Embedding, &[bl, vp, d], vec![bl, vp, d], 1));
    }
    if last {
        let norm = match m.norm {
            Norm::Layernorm => (OpName::LayerNorm, OpClass::LayerNorm),
            Norm::Rmsnorm => (OpName::RMSNorm, OpClass::RmsNorm),
        };
        ops.extend(compute(norm.0, norm.1, &[bl, d], vec![b, l, d], 1));
        ops.extend(compute(OpName::FinalLinear, OpClass::Linear, &[1, bl, vp, d], vec![bl, d, vp], 1));
        ops.extend(compute(OpName::CrossEntropy, OpClass::CrossEntropy, &[bl, vp], vec![b, l, vp], 1));
    }
    if cfg.tp > 1 {
        let tp = layout.tp_group;
        let fwd_calls = encoders * if m.parallel_residual { 1 } else { 2 } + u32::from(first);
        let features = vec![bl * d, tp.nodes as u64, tp.ranks_per_node as u64];
        for (phase, calls) in [(Phase::Fwd, fwd_calls), (Phase::Bwd, 2 * encoders)] {
            if calls > 0 {
                ops.push(StageOp {
                    name: OpName::MpAllReduce,
                    phase,
                    calls,
                    work: Work::Collective {
                        collective: Collective::AllReduce,
                        bytes: (bl * d) as f64 * e,
                        group: tp,
                        active_per_node: layout.active_per_node,
                    },
                    features: features.clone(),
                });
            }
        }
    }
    let p2p_bytes = (bl * d / mp) as f64 * e;
    let mut p2p = |phase: Phase, group: Group| {
        ops.push(StageOp {
            name: OpName::PpP2p,
            phase,
            calls: 1,
            work: Work::Collective {
                collective: Collective::SendRecv,
                bytes: p2p_bytes,
                group,
                active_per_node: layout.p2p_active_per_node(cfg),
            },
            features: vec![bl * d / mp, group.nodes as u64, group.ranks_per_node as u64],
        })
    };
    if s + 1 < cfg.pp {
        p2p(Phase::Fwd, layout.p2p_group(cfg, s));
    }
    if s > 0 {
        p2p(Phase::Bwd, layout.p2p_group(cfg, s - 1));
    }
    ops
}
