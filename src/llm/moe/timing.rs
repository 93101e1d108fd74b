//! Timing an MoE layer: its operators through the shared [`Timer`] and [`time_ops`], then Megatron-Core's
//! `overlap_moe_expert_parallel_comm`, which no single operator's overlap expresses: the combined 1F1B schedule
//! (`combined_1f1b.py`, `model_chunk_schedule_plan.py`) runs one micro-batch's forward of a layer beside another
//! micro-batch's backward of it, the dispatch and combine of each on the communication stream while the other
//! computes, so a pass's expert-parallel communication is exposed only where it outlasts the other pass's
//! computation of the layer, plus the contention κ of what it hides ([`crate::llm::timing::overlap_charge`]).
//! The warm-up and cool-down micro-batches, which have no partner, are treated like the steady state.

use crate::llm::config::{ConfigError, TrainingConfig};
use crate::llm::operators::{OpName, StageOp, Work};
use crate::llm::timing::{overlap_charge, time_ops, TimedOp, Timer};
use crate::op::Phase;

fn is_ep_comm(name: OpName) -> bool {
    matches!(name, OpName::EpAllToAll | OpName::EpAllGather | OpName::EpReduceScatter)
}

/// Times one MoE layer's operators (as [`time_ops`]) and applies the 1F1B expert-parallel overlap when `cfg` asks
/// for it.
pub fn time_layer(cfg: &TrainingConfig, ops: &[StageOp], timer: &mut Timer) -> Result<Vec<TimedOp>, ConfigError> {
    let mut timed = time_ops(ops, timer)?;
    if cfg.moe.as_ref().is_some_and(|m| m.overlap_ep_comm) {
        apply_ep_overlap(ops, &mut timed, timer.contention());
    }
    Ok(timed)
}

/// Scales the charged time of each pass's expert-parallel collectives so that together they are charged their
/// exposed part beside the other pass's computation (plus κ × the hidden part).
pub fn apply_ep_overlap(ops: &[StageOp], timed: &mut [TimedOp], kappa: f64) {
    let sum = |phase: Phase, pick: &dyn Fn(&StageOp) -> bool, full: bool| -> f64 {
        ops.iter()
            .zip(timed.iter())
            .filter(|(o, _)| o.phase == phase && pick(o))
            .map(|(o, t)| o.calls as f64 * if full { t.time.time_us } else { t.charged_us })
            .sum()
    };
    let compute = |o: &StageOp| matches!(o.work, Work::Compute { .. });
    let comm = |o: &StageOp| is_ep_comm(o.name);
    let mut ratio = [1.0; 2];
    for (i, (phase, other)) in [(Phase::Fwd, Phase::Bwd), (Phase::Bwd, Phase::Fwd)].into_iter().enumerate() {
        let full = sum(phase, &comm, true);
        if full <= 0.0 {
            continue;
        }
        let window = sum(other, &compute, false);
        ratio[i] = overlap_charge(full, (full - window).max(0.0), kappa) / full;
    }
    for (o, t) in ops.iter().zip(timed.iter_mut()) {
        if is_ep_comm(o.name) {
            t.charged_us = t.time.time_us * ratio[usize::from(o.phase == Phase::Bwd)];
        }
    }
}
