//! Training's composition of operator times: every model chunk's forward and backward seconds per micro-batch
//! ([`chunk_seconds`]) and every stage's tail ([`StageTail`]), from a [`Decomposition`] ([`time_training`]) or,
//! without building one, straight from a configuration ([`pieces`], [`P2pTimes`], [`chunk_times`],
//! [`stage_tail`]: the search's per-candidate path, which must not allocate). Both paths share the arithmetic, so a
//! configuration the search finds predicts the same time through `POST /v1/predictions/training`.

use crate::comm::Group;
use crate::llm::config::{ConfigError, TrainingConfig};
#[cfg(doc)]
use crate::llm::decompose::Decomposition;
use crate::llm::decompose::{
    chunk_outside_layers_params, chunk_params, send_target, sync_buckets, zero_buckets, TailParts,
};
use crate::llm::layout::Layout;
use crate::llm::moe::layout::MoeLayout;
use crate::llm::moe::mtp::mtp_ops;
use crate::llm::moe::ops::moe_layer_ops;
use crate::llm::operators::{embedding_ops, head_ops, layer_ops, p2p_op, OpPrecisions, StageOp};
use crate::llm::pipeline::StageTail;
use crate::op::Collective;
use crate::op::Phase;

use super::{optimizer_tensors, overlap_charge, time_ops, Timer};

mod decomposed;

pub use decomposed::{time_training, TimedChunk, TimedStage, TimedTraining};

/// Per-micro-batch forward and backward seconds of one layer, of one MoE layer, of the first stage's embedding,
/// of the last stage's head and of one multi-token-prediction layer (zeros where the model has none).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Pieces {
    pub layer: (f64, f64),
    pub moe_layer: (f64, f64),
    pub embedding: (f64, f64),
    pub head: (f64, f64),
    pub mtp: (f64, f64),
}

/// The [`Pieces`] of `cfg`, without a [`Decomposition`] (the search's path).
pub fn pieces(
    cfg: &TrainingConfig,
    layout: &Layout,
    prec: OpPrecisions,
    v_padded: u64,
    timer: &mut Timer,
) -> Result<Pieces, ConfigError> {
    let moe_layer = match &cfg.moe {
        Some(moe) => {
            let ops = moe_layer_ops(cfg, layout, moe, prec);
            let timed = crate::llm::moe::timing::time_layer(cfg, &ops, timer)?;
            crate::llm::moe::timing::layer_seconds(cfg, timer, &ops, &timed)
        }
        None => (0.0, 0.0),
    };
    let mtp = mtp_seconds(cfg, &mtp_ops(cfg, layout, prec, v_padded), timer)?;
    let mut seconds = |ops: Vec<StageOp>, layer: bool| -> Result<(f64, f64), ConfigError> {
        let timed = time_ops(&ops, timer)?;
        Ok(if layer { timer.layer_seconds(&ops, &timed) } else { timer.outside_seconds(&ops, &timed) })
    };
    Ok(Pieces {
        layer: seconds(layer_ops(cfg, layout, prec), true)?,
        moe_layer,
        embedding: seconds(embedding_ops(cfg, layout, prec, v_padded), false)?,
        head: seconds(head_ops(cfg, layout, prec, v_padded), false)?,
        mtp,
    })
}

/// The forward and backward seconds of one MTP layer's operators (its MoE layer's expert-parallel overlap
/// applied; zeros without MTP).
fn mtp_seconds(cfg: &TrainingConfig, ops: &[StageOp], timer: &mut Timer) -> Result<(f64, f64), ConfigError> {
    if ops.is_empty() {
        return Ok((0.0, 0.0));
    }
    let timed = crate::llm::moe::timing::time_layer(cfg, ops, timer)?;
    Ok(crate::llm::moe::timing::layer_seconds(cfg, timer, ops, &timed))
}

/// ZeRO ≥ 2's per-micro-batch collectives of one model chunk, seconds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ZeroSeconds {
    /// The gradient reduce-scatter.
    pub reduce_scatter_s: f64,
    /// One parameter all-gather (ZeRO-3; 0 otherwise).
    pub all_gather_s: f64,
    /// The chunk's gradient buckets.
    pub buckets: f64,
}

/// What one model chunk runs per micro-batch, in seconds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ChunkInputs {
    /// Transformer layers of the chunk.
    pub layers: u32,
    /// Of those, MoE layers.
    pub moe_layers: u32,
    /// Multi-token-prediction layers the chunk runs.
    pub mtp: u32,
    /// The chunk runs the embedding.
    pub embedding: bool,
    /// The chunk runs the head.
    pub head: bool,
    /// Its forward pipeline send, s.
    pub send_fwd_s: Option<f64>,
    /// Its backward pipeline send, s.
    pub send_bwd_s: Option<f64>,
    /// Its ZeRO ≥ 2 collectives.
    pub zero: Option<ZeroSeconds>,
    /// The pipeline sends run asynchronously beside the computation (Megatron-Core's `overlap_p2p_comm`): the
    /// pass is charged only their contention, the receiver waits for them ([`super::pipeline::PipelineSpec`]).
    pub overlap_sends: bool,
    /// Contention κ of overlapped communication.
    pub contention: f64,
}

/// One model chunk's forward and backward seconds per micro-batch: its layers, the embedding and the head when it
/// holds them, its pipeline sends (charged to the sender, S1; with overlapped sends only their contention κ·send)
/// and, with ZeRO ≥ 2, the exposed part of its per-micro-batch gradient reduce-scatter (ZeRO-3 also the parameter
/// all-gathers before its forward and backward), overlapped bucket by bucket with the pass (plus the contention
/// of the hidden part).
pub fn chunk_seconds(p: &Pieces, c: &ChunkInputs) -> (f64, f64) {
    let (n, k) = (c.layers.saturating_sub(c.moe_layers) as f64, c.moe_layers.min(c.layers) as f64);
    let mtp = c.mtp as f64;
    let mut f = n * p.layer.0 + k * p.moe_layer.0 + mtp * p.mtp.0;
    let mut b = n * p.layer.1 + k * p.moe_layer.1 + mtp * p.mtp.1;
    if c.embedding {
        f += p.embedding.0;
        b += p.embedding.1;
    }
    if c.head {
        f += p.head.0;
        b += p.head.1;
    }
    let send = |s: f64| if c.overlap_sends { c.contention * s } else { s };
    if let Some(s) = c.send_fwd_s {
        f += send(s);
    }
    if let Some(s) = c.send_bwd_s {
        b += send(s);
    }
    if let Some(z) = c.zero {
        let exposed = |t: f64, window: f64| overlap_charge(t, zero_exposed(t, window, z.buckets), c.contention);
        let (rs, ag) = (z.reduce_scatter_s, z.all_gather_s);
        // The backward's gather and reduce-scatter share the links: they hide behind it together.
        if ag > 0.0 {
            f += exposed(ag, f);
        }
        b += exposed(rs + ag, b);
    }
    (f, b)
}

/// The exposed seconds of a ZeRO / FSDP collective of `comm` seconds split into `buckets` equal buckets and
/// pipelined with a pass of `window` seconds over the same buckets: bucket i + 1's gather runs during bucket i's
/// computation (FSDP2's implicit prefetch: `fully_shard`'s pre-forward hook of block i issues block i + 1's
/// all-gather on the all-gather stream, `torch/distributed/fsdp/_fully_shard/_fsdp_state.py`; FSDP1's
/// `BACKWARD_PRE` prefetch and Megatron's bucketed overlap alike), so the first bucket's gather has nothing to
/// hide behind and every later one is exposed by what outlasts its predecessor's computation:
/// comm/B + (B − 1)·max(0, comm/B − window/B) = comm/B + (B − 1)/B · max(0, comm − window). The reduce-scatter of
/// the backward is the mirror image (the last bucket's has nothing after it).
pub fn zero_exposed(comm: f64, window: f64, buckets: f64) -> f64 {
    let b = buckets.max(1.0);
    comm / b + (b - 1.0) / b * (comm - window).max(0.0)
}

/// One pipeline send's seconds, forward and backward, within a node and across nodes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct P2pTimes {
    pub fwd_intra: f64,
    pub fwd_inter: f64,
    pub bwd_intra: f64,
    pub bwd_inter: f64,
}

impl P2pTimes {
    /// The sends of `cfg`.
    pub fn of(cfg: &TrainingConfig, layout: &Layout, timer: &mut Timer) -> Result<P2pTimes, ConfigError> {
        let intra = Group { ranks: 2, nodes: 1, ranks_per_node: 2 };
        let inter = Group { ranks: 2, nodes: 2, ranks_per_node: 1 };
        let mut t = |phase, g| -> Result<f64, ConfigError> {
            Ok(timer.time(&p2p_op(cfg, layout, phase, g).work)?.time_us * 1e-6)
        };
        Ok(P2pTimes {
            fwd_intra: t(Phase::Fwd, intra)?,
            fwd_inter: t(Phase::Fwd, inter)?,
            bwd_intra: t(Phase::Bwd, intra)?,
            bwd_inter: t(Phase::Bwd, inter)?,
        })
    }

    /// The send from stage `from` to stage `to` in `phase`.
    pub fn get(&self, cfg: &TrainingConfig, layout: &Layout, phase: Phase, from: u32, to: u32) -> f64 {
        let across = layout.p2p_group(cfg, from, to).nodes > 1;
        match (phase, across) {
            (Phase::Fwd, false) => self.fwd_intra,
            (Phase::Fwd, true) => self.fwd_inter,
            (Phase::Bwd, false) => self.bwd_intra,
            (Phase::Bwd, true) => self.bwd_inter,
        }
    }
}

/// Every model chunk's per-micro-batch times, indexed `stage · v + chunk`: forward and backward seconds
/// ([`chunk_seconds`]) and its forward and backward pipeline sends, s (0 where it sends nothing).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ChunkTimes {
    pub fwd: Vec<f64>,
    pub bwd: Vec<f64>,
    pub send_fwd: Vec<f64>,
    pub send_bwd: Vec<f64>,
}

impl ChunkTimes {
    fn clear(&mut self) {
        self.fwd.clear();
        self.bwd.clear();
        self.send_fwd.clear();
        self.send_bwd.clear();
    }
}

/// Every model chunk's times ([`ChunkTimes`]) into `out`, without a [`Decomposition`] (the search's path: no
/// allocation once the buffers have grown).
#[allow(clippy::too_many_arguments)]
pub fn chunk_times(
    cfg: &TrainingConfig,
    layout: &Layout,
    layers: &[u32],
    moe_layers: &[u32],
    p: &Pieces,
    sends: &P2pTimes,
    v_padded: u64,
    timer: &mut Timer,
    out: &mut ChunkTimes,
) -> Result<(), ConfigError> {
    let (pp, v) = (cfg.pp, cfg.virtual_stages.max(1));
    let contention = timer.contention();
    out.clear();
    for s in 0..pp {
        for c in 0..v {
            let n = layers[(s * v + c) as usize];
            let send = |phase| send_target(pp, v, s, c, phase).map(|to| sends.get(cfg, layout, phase, s, to));
            let zero = if cfg.zero_stage >= 2 && cfg.grad_ranks() > 1 {
                let params = chunk_params(cfg, s, c, n, v_padded);
                let bytes = cfg.param_gather_bytes(params, chunk_outside_layers_params(cfg, s, c, v_padded));
                let a = layout.active_per_node;
                let rs_bytes = params * cfg.grad_elem_bytes();
                let rs = timer.collective_s(Collective::ReduceScatter, rs_bytes, layout.dp_group, a)?;
                let ag = if cfg.zero_stage >= 3 {
                    timer.collective_s(Collective::AllGather, bytes, layout.dp_group, a)?
                } else {
                    0.0
                };
                let buckets = zero_buckets(cfg, params, n, s == 0 && c == 0, s + 1 == pp && c + 1 == v);
                Some(ZeroSeconds { reduce_scatter_s: rs, all_gather_s: ag, buckets })
            } else {
                None
            };
            let (send_fwd_s, send_bwd_s) = (send(Phase::Fwd), send(Phase::Bwd));
            let (f, b) = chunk_seconds(
                p,
                &ChunkInputs {
                    layers: n,
                    moe_layers: moe_layers.get((s * v + c) as usize).copied().unwrap_or(0),
                    mtp: cfg.chunk_mtp_layers(s, c),
                    embedding: s == 0 && c == 0,
                    head: s + 1 == pp && c + 1 == v,
                    send_fwd_s,
                    send_bwd_s,
                    zero,
                    overlap_sends: cfg.overlap_p2p(),
                    contention,
                },
            );
            out.fwd.push(f);
            out.bwd.push(b);
            out.send_fwd.push(send_fwd_s.unwrap_or(0.0));
            out.send_bwd.push(send_bwd_s.unwrap_or(0.0));
        }
    }
    Ok(())
}

/// A stage's [`StageTail`] from its timed parts: the parameter all-gather follows the optimizer step, or with
/// `overlap_param_gather` moves to the next iteration's first forward ([`StageTail::param_gather_s`]).
#[allow(clippy::too_many_arguments)]
pub fn compose_tail(
    cfg: &TrainingConfig,
    grad_sync_s: f64,
    overlap_window_s: f64,
    buckets: u32,
    after_sync_s: f64,
    optimizer_s: f64,
    gather_s: f64,
    contention: f64,
) -> StageTail {
    let prefetch = cfg.overlap_param_gather;
    StageTail {
        grad_sync_s,
        overlap_window_s,
        buckets,
        after_sync_s,
        update_s: optimizer_s + if prefetch { 0.0 } else { gather_s },
        param_gather_s: if prefetch { gather_s } else { 0.0 },
        contention,
    }
}

/// The [`StageTail`] of stage `s` (holding `layers` transformer layers, `moe_layers` of them MoE layers) from its
/// tail `parts` (the search's path), with the overlap window of its last micro-batch's backward.
#[allow(clippy::too_many_arguments)]
pub fn stage_tail(
    cfg: &TrainingConfig,
    layout: &Layout,
    s: u32,
    layers: u32,
    moe_layers: u32,
    parts: &TailParts,
    overlap_window_s: f64,
    prec: OpPrecisions,
    timer: &mut Timer,
) -> Result<StageTail, ConfigError> {
    let a = layout.active_per_node;
    let edp = cfg.moe.as_ref().map_or(layout.dp_group, |m| MoeLayout::new(m, layout.gpus_per_node).edp_group);
    let mut grad_sync_s = match parts.sync {
        Some((_, c, bytes)) => timer.collective_s(c, bytes, layout.dp_group, a)?,
        None => 0.0,
    };
    if let Some((_, c, bytes)) = parts.expert_sync {
        grad_sync_s += timer.collective_s(c, bytes, edp, a)?;
    }
    let mut gather = match parts.gather_bytes {
        Some(bytes) => timer.collective_s(Collective::AllGather, bytes, layout.dp_group, a)?,
        None => 0.0,
    };
    if let Some(bytes) = parts.expert_gather_bytes {
        gather += timer.collective_s(Collective::AllGather, bytes, edp, a)?;
    }
    let after_sync_s = match parts.embedding_grad_bytes {
        Some(bytes) => timer.collective_s(Collective::AllReduce, bytes, layout.p2p_group(cfg, 0, cfg.pp - 1), a)?,
        None => 0.0,
    };
    let tensors = optimizer_tensors(cfg, layers, moe_layers);
    let optimizer_s = timer.optimizer_s(parts.optimizer_params, prec.other, tensors)?;
    let kappa = timer.contention();
    Ok(compose_tail(
        cfg,
        grad_sync_s,
        overlap_window_s,
        sync_buckets(cfg, s, parts),
        after_sync_s,
        optimizer_s,
        gather,
        kappa,
    ))
}
