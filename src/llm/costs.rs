//! From operators to schedule inputs: times every operator through a [`CostBackend`] (once per distinct piece of
//! work), sums a layer, the embedding and the head per micro-batch, builds every model chunk's forward and backward
//! time and every stage's tail (gradient reduction, update). The prediction and the search share this code, so a
//! configuration found by the search predicts the same time through `POST /v1/predictions/training`.

use std::collections::HashMap;

use super::config::{ConfigError, TrainingConfig};
use super::layout::Layout;
use super::operators::{
    comm_elem_bytes, embedding_ops, head_ops, layer_ops, p2p_op, OpName, OpPrecisions, StageOp, Work,
};
use super::partition::StageRole;
use super::pipeline::StageTail;
use super::sizing::{embedding_params, layer_params, stage_params_of};
use crate::cost::{CostBackend, Timed};
use crate::comm::{Collective, Group};
use crate::op::{OpClass, OpShape, Phase};

/// Megatron-Core's default gradient bucket: max(40 M, 1 M · dp) parameters (`DistributedDataParallelConfig`).
pub fn bucket_params(dp: u32) -> f64 {
    (40e6f64).max(1e6 * dp as f64)
}

#[derive(PartialEq, Eq, Hash, Clone, Copy)]
enum WorkKey {
    Compute(OpShape, crate::hw::Precision),
    Collective(Collective, u64, Group, u32),
}

/// Times operators through a backend, once per distinct piece of work (a search keeps one timer for all its
/// candidates: operator times depend on shapes, not on the whole configuration).
pub struct Timer<'a> {
    backend: &'a dyn CostBackend,
    cache: HashMap<WorkKey, Timed>,
}

impl<'a> Timer<'a> {
    /// A timer over `backend` with an empty cache.
    pub fn new(backend: &'a dyn CostBackend) -> Timer<'a> {
        Timer { backend, cache: HashMap::new() }
    }

    /// The backend.
    pub fn backend(&self) -> &'a dyn CostBackend {
        self.backend
    }

    /// The time of `work`. Errors: a precision the GPU has no path for (field `precision`).
    pub fn time(&mut self, work: &Work) -> Result<Timed, ConfigError> {
        let key = match *work {
            Work::Compute { shape, dtype } => WorkKey::Compute(shape, dtype),
            Work::Collective { collective, bytes, group, active_per_node } => {
                WorkKey::Collective(collective, bytes.to_bits(), group, active_per_node)
            }
        };
        if let Some(t) = self.cache.get(&key) {
            return Ok(t.clone());
        }
        let t = match *work {
            Work::Compute { shape, dtype } => self
                .backend
                .compute(&shape, dtype)
                .map_err(|e| ConfigError { field: "precision".into(), message: e.to_string() })?,
            Work::Collective { collective, bytes, group, active_per_node } => {
                self.backend.collective(collective, bytes, group, active_per_node)
            }
        };
        self.cache.insert(key, t.clone());
        Ok(t)
    }

    /// Seconds of `c` of `bytes` over `group` (0 for a group of one rank).
    pub fn collective_s(&mut self, c: Collective, bytes: f64, group: Group, active: u32) -> Result<f64, ConfigError> {
        if group.ranks <= 1 {
            return Ok(0.0);
        }
        Ok(self.time(&Work::Collective { collective: c, bytes, group, active_per_node: active })?.time_us * 1e-6)
    }

    /// Seconds of a fused Adam step over `params` parameters (timed under the training's non-GEMM precision, the
    /// key its regressor is trained under).
    pub fn optimizer_s(&mut self, params: f64, dtype: crate::hw::Precision) -> Result<f64, ConfigError> {
        Ok(self.time(&optimizer_work(params, dtype))?.time_us * 1e-6)
    }
}

/// The fused Adam step over `params` parameters.
pub fn optimizer_work(params: f64, dtype: crate::hw::Precision) -> Work {
    Work::Compute { shape: OpShape::new(OpClass::Optimizer, Phase::Fwd, &[params.round() as u64]), dtype }
}

/// Per-call charged time of every op of `ops`, µs, in order: its time, or for an op overlapping another only the
/// excess over one call of its partner (same phase, same recomputation flag).
pub fn charged_us(ops: &[StageOp], timer: &mut Timer) -> Result<Vec<(f64, Timed)>, ConfigError> {
    let timed: Vec<Timed> = ops.iter().map(|o| timer.time(&o.work)).collect::<Result<_, _>>()?;
    Ok(ops
        .iter()
        .zip(&timed)
        .map(|(o, t)| {
            let charged = match o.overlaps {
                None => t.time_us,
                Some(partner) => {
                    let hidden = ops
                        .iter()
                        .zip(&timed)
                        .find(|(p, _)| p.name == partner && p.phase == o.phase && p.recompute == o.recompute)
                        .map_or(0.0, |(_, pt)| pt.time_us);
                    (t.time_us - hidden).max(0.0)
                }
            };
            (charged, t.clone())
        })
        .collect())
}

/// Forward and backward seconds of a set of ops per micro-batch: per pass the longer of its GPU time (Σ calls ×
/// charged time) and its host time (Σ calls × [`Timed::host_us`]) — the CPU dispatches kernels ahead of the GPU,
/// so a pass of short kernels runs at the host's pace and a pass of long ones at the GPU's (the launch-bound regime
/// of small models and large tensor parallelism).
fn sum_s(ops: &[StageOp], timer: &mut Timer) -> Result<(f64, f64), ConfigError> {
    let (mut f, mut b) = (0.0, 0.0);
    let (mut host_f, mut host_b) = (0.0, 0.0);
    for (o, (charged, t)) in ops.iter().zip(charged_us(ops, timer)?) {
        let calls = o.calls as f64;
        match o.phase {
            Phase::Fwd => (f, host_f) = (f + calls * charged, host_f + calls * t.host_us),
            Phase::Bwd => (b, host_b) = (b + calls * charged, host_b + calls * t.host_us),
        }
    }
    Ok((f.max(host_f) * 1e-6, b.max(host_b) * 1e-6))
}

/// Per-micro-batch forward and backward seconds of one layer, of the first stage's embedding and of the last
/// stage's head.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Pieces {
    pub layer: (f64, f64),
    pub embedding: (f64, f64),
    pub head: (f64, f64),
}

/// The [`Pieces`] of `cfg`.
pub fn pieces(
    cfg: &TrainingConfig,
    layout: &Layout,
    prec: OpPrecisions,
    v_padded: u64,
    timer: &mut Timer,
) -> Result<Pieces, ConfigError> {
    Ok(Pieces {
        layer: sum_s(&layer_ops(cfg, layout, prec), timer)?,
        embedding: sum_s(&embedding_ops(cfg, layout, prec, v_padded), timer)?,
        head: sum_s(&head_ops(cfg, layout, prec, v_padded), timer)?,
    })
}

/// The stage a model chunk's pipeline send goes to: forward to the next virtual stage, backward to the previous
/// one (`None` at the ends of the pipeline).
pub fn send_target(pp: u32, v: u32, s: u32, c: u32, phase: Phase) -> Option<u32> {
    let vs = c * pp + s;
    match phase {
        Phase::Fwd if vs + 1 < pp * v => Some((s + 1) % pp),
        Phase::Bwd if vs > 0 => Some((s + pp - 1) % pp),
        _ => None,
    }
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

/// Every model chunk's forward and backward seconds per micro-batch, indexed `stage · v + chunk`: its layers, the
/// embedding (chunk 0 of stage 0), the head (last chunk of the last stage), its pipeline sends (charged to the
/// sender, S1) and, with ZeRO ≥ 2, the exposed part of its per-micro-batch gradient reduce-scatter (ZeRO-3 also
/// the parameter all-gathers before its forward and backward), overlapped bucket by bucket with the pass.
#[allow(clippy::too_many_arguments)]
pub fn chunk_times(
    cfg: &TrainingConfig,
    layout: &Layout,
    layers: &[u32],
    p: &Pieces,
    sends: &P2pTimes,
    v_padded: u64,
    timer: &mut Timer,
    fwd: &mut Vec<f64>,
    bwd: &mut Vec<f64>,
) -> Result<(), ConfigError> {
    let (pp, v) = (cfg.pp, cfg.virtual_stages.max(1));
    fwd.clear();
    bwd.clear();
    for s in 0..pp {
        for c in 0..v {
            let n = layers[(s * v + c) as usize] as f64;
            let (mut f, mut b) = (n * p.layer.0, n * p.layer.1);
            if s == 0 && c == 0 {
                f += p.embedding.0;
                b += p.embedding.1;
            }
            if s + 1 == pp && c + 1 == v {
                f += p.head.0;
                b += p.head.1;
            }
            if let Some(to) = send_target(pp, v, s, c, Phase::Fwd) {
                f += sends.get(cfg, layout, Phase::Fwd, s, to);
            }
            if let Some(to) = send_target(pp, v, s, c, Phase::Bwd) {
                b += sends.get(cfg, layout, Phase::Bwd, s, to);
            }
            if cfg.zero_stage >= 2 && cfg.grad_ranks() > 1 {
                let params = chunk_params(cfg, s, c, layers[(s * v + c) as usize], v_padded);
                let bytes = params * comm_elem_bytes(cfg);
                let buckets = (params / bucket_params(cfg.dp)).ceil().max(1.0);
                let exposed = |t: f64, window: f64| (t - window).max(t / buckets);
                let a = layout.active_per_node;
                let rs = timer.collective_s(Collective::ReduceScatter, bytes, layout.dp_group, a)?;
                let ag = if cfg.zero_stage >= 3 {
                    timer.collective_s(Collective::AllGather, bytes, layout.dp_group, a)?
                } else {
                    0.0
                };
                // The backward's gather and reduce-scatter share the links: they hide behind it together.
                if ag > 0.0 {
                    f += exposed(ag, f);
                }
                b += exposed(rs + ag, b);
            }
            fwd.push(f);
            bwd.push(b);
        }
    }
    Ok(())
}

/// Parameters of one GPU's model chunk c of stage s (the stage's embedding on chunk 0 of stage 0, its head on the
/// last chunk of the last stage).
pub fn chunk_params(cfg: &TrainingConfig, s: u32, c: u32, layers: u32, v_padded: u64) -> f64 {
    let (pp, v) = (cfg.pp, cfg.virtual_stages.max(1));
    let mut p = layers as f64 * layer_params(cfg);
    if s == 0 && c == 0 {
        p += embedding_params(cfg, v_padded);
    }
    if s + 1 == pp && c + 1 == v {
        p += stage_params_of(cfg, StageRole::of(s, pp), 0, v_padded)
            - if pp == 1 { embedding_params(cfg, v_padded) } else { 0.0 };
    }
    p
}

/// Parameters on one GPU of stage s (all chunks).
pub fn stage_params(cfg: &TrainingConfig, s: u32, layers: &[u32], v_padded: u64) -> f64 {
    let v = cfg.virtual_stages.max(1);
    let n: u32 = (0..v).map(|c| layers[(s * v + c) as usize]).sum();
    stage_params_of(cfg, StageRole::of(s, cfg.pp), n as u64, v_padded)
}

/// The names and kinds of a stage's tail operators, for the operator table.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TailParts {
    /// Gradient reduction: (name, collective, bytes) or none.
    pub sync: Option<(OpName, Collective, f64)>,
    /// Parameter all-gather bytes after the update (ZeRO-1/2, distributed optimizer).
    pub gather_bytes: Option<f64>,
    /// Parameters the optimizer updates on this GPU.
    pub optimizer_params: f64,
    /// Tied-embedding gradient all-reduce bytes (first and last stage, pp > 1).
    pub embedding_grad_bytes: Option<f64>,
}

/// What stage s does after its last backward: S1 all-reduces the gradients over dp (the distributed optimizer
/// reduce-scatters them; ZeRO ≥ 2 reduced them during the backward passes), all-reduces the tied embedding's
/// gradients between the first and last stage, runs fused Adam over its (ZeRO-partitioned) parameters and
/// all-gathers the updated parameters (ZeRO-1/2 and the distributed optimizer; ZeRO-3 keeps them partitioned).
pub fn tail_parts(cfg: &TrainingConfig, s: u32, params: f64, v_padded: u64) -> TailParts {
    let n = cfg.grad_ranks();
    let e = comm_elem_bytes(cfg);
    let sharded = cfg.zero_stage >= 1 || cfg.distributed_optimizer;
    let sync = if n <= 1 || cfg.zero_stage >= 2 {
        None
    } else if cfg.distributed_optimizer {
        Some((OpName::DpReduceScatter, Collective::ReduceScatter, params * e))
    } else {
        Some((OpName::DpAllReduce, Collective::AllReduce, params * e))
    };
    let gather_bytes = (sharded && cfg.zero_stage < 3 && n > 1).then_some(params * e);
    let tied = cfg.model.tied_embeddings && cfg.pp > 1 && (s == 0 || s + 1 == cfg.pp);
    TailParts {
        sync,
        gather_bytes,
        optimizer_params: if sharded { params / n as f64 } else { params },
        embedding_grad_bytes: tied.then(|| embedding_params(cfg, v_padded) * e),
    }
}

/// The [`StageTail`] of stage s: its parts timed, with the overlap window of its last micro-batch's backward.
pub fn stage_tail(
    cfg: &TrainingConfig,
    layout: &Layout,
    parts: &TailParts,
    overlap_window_s: f64,
    prec: OpPrecisions,
    timer: &mut Timer,
) -> Result<StageTail, ConfigError> {
    let a = layout.active_per_node;
    let grad_sync_s = match parts.sync {
        Some((_, c, bytes)) => timer.collective_s(c, bytes, layout.dp_group, a)?,
        None => 0.0,
    };
    let gather = match parts.gather_bytes {
        Some(bytes) => timer.collective_s(Collective::AllGather, bytes, layout.dp_group, a)?,
        None => 0.0,
    };
    let after_sync_s = match parts.embedding_grad_bytes {
        Some(bytes) => timer.collective_s(Collective::AllReduce, bytes, layout.p2p_group(cfg, 0, cfg.pp - 1), a)?,
        None => 0.0,
    };
    let buckets = match parts.sync {
        Some((_, _, bytes)) => (bytes / comm_elem_bytes(cfg) / bucket_params(cfg.dp)).ceil().max(1.0) as u32,
        None => 1,
    };
    Ok(StageTail {
        grad_sync_s,
        overlap_window_s,
        buckets,
        after_sync_s,
        update_s: timer.optimizer_s(parts.optimizer_params, prec.other)? + gather,
    })
}
