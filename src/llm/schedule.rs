//! Stage 3 of a training prediction — **schedule**: the step's timeline from the timed stages. S1's pipeline gets
//! the 1F1B timeline with data parallelism of S1 eq. 7 (this module); every other configuration the simulated
//! 1F1B / interleaved schedule ([`super::pipeline`]). Eq. 7's components are computed for both (the answer for
//! S1's pipeline, a reference otherwise).

use serde::Serialize;
use utoipa::ToSchema;

use super::config::{ConfigError, TrainingConfig};
use super::pipeline::{simulate, step_time, PipelineSpec, StageTail};
use super::timing::TimedTraining;

/// The four components of S1 eq. 7, seconds.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, ToSchema)]
pub struct Eq7 {
    /// Largest per-micro-batch forward time over stages (MP all-reduces and the stage's P2P send included), s.
    pub max_fwd_s: f64,
    /// Largest per-micro-batch backward time over stages, s.
    pub max_bwd_s: f64,
    /// (m − 1 + pp) · (Max_Fwd + Max_Bwd), s.
    pub pipeline_s: f64,
    /// All-reduce of the first stage's gradients over dp (the other stages' are hidden behind it), s.
    pub first_stage_grad_sync_s: f64,
    /// max over stages of (optimizer + ZeRO all-gather of the stage's parameters), s.
    pub max_update_s: f64,
}

impl Eq7 {
    /// Runtime = (m − 1 + pp)·(Max_Fwd + Max_Bwd) + First_Stage_Gradient_Synchronization + Max_Update.
    pub fn iteration_s(&self) -> f64 {
        self.pipeline_s + self.first_stage_grad_sync_s + self.max_update_s
    }
}

/// Evaluates S1 eq. 7 from per-stage times (seconds): `fwd_s[s]`, `bwd_s[s]` per micro-batch, `update_s[s]` per
/// step; `m` micro-batches per step, `pp` = number of stages (= the slices' length).
///
/// Panics never; empty slices give zeros.
pub fn eq7(fwd_s: &[f64], bwd_s: &[f64], update_s: &[f64], first_stage_grad_sync_s: f64, m: u32) -> Eq7 {
    let max = |v: &[f64]| v.iter().copied().fold(0.0_f64, f64::max);
    let pp = fwd_s.len() as f64;
    let (max_fwd_s, max_bwd_s) = (max(fwd_s), max(bwd_s));
    Eq7 {
        max_fwd_s,
        max_bwd_s,
        pipeline_s: (m as f64 - 1.0 + pp) * (max_fwd_s + max_bwd_s),
        first_stage_grad_sync_s,
        max_update_s: max(update_s),
    }
}

/// 1F1B pipeline bubble fraction (pp − 1)/m (Narayanan et al. 2021).
pub fn bubble_fraction(pp: u32, m: u32) -> f64 {
    (pp as f64 - 1.0) / m.max(1) as f64
}

/// Interleaved 1F1B bubble fraction (pp − 1)/(m·v) with v model chunks per stage (Narayanan et al. 2021,
/// §2.2.2); v = 1 is [`bubble_fraction`].
pub fn interleaved_bubble_fraction(pp: u32, m: u32, v: u32) -> f64 {
    (pp as f64 - 1.0) / (m.max(1) as f64 * v.max(1) as f64)
}

/// The step's timeline as the schedule model composes it.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, ToSchema)]
pub struct Timeline {
    /// `eq7` (S1's pipeline: S1 eq. 7) or `simulated` (the 1F1B / interleaved simulation).
    pub model: &'static str,
    /// First forward to last backward, s.
    pub pipeline_s: f64,
    /// Gradient reduction not hidden behind the pipeline, s.
    pub exposed_grad_sync_s: f64,
    /// Optimizer step and parameter all-gather of the slowest stage, s.
    pub update_s: f64,
}

impl Timeline {
    /// pipeline + exposed gradient reduction + update, s: the iteration time.
    pub fn iteration_s(&self) -> f64 {
        self.pipeline_s + self.exposed_grad_sync_s + self.update_s
    }
}

/// The scheduled step: S1 eq. 7's components and the timeline the iteration time comes from.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Step {
    /// S1 eq. 7's components (the answer for S1's pipeline; for reference otherwise).
    pub components: Eq7,
    /// How the iteration time is composed.
    pub timeline: Timeline,
}

/// The simulation's input for `cfg` (the prediction's and the search's): chunk times `fwd_s`, `bwd_s` and sends
/// `send_fwd_s`, `send_bwd_s` (indexed `stage · v + chunk`), the stages' `tails`; the sends become lags with
/// `overlap_p2p_comm`, the tails prefetch their parameter all-gathers with `overlap_param_gather`.
pub fn pipeline_spec<'a>(
    cfg: &TrainingConfig,
    fwd_s: &'a [f64],
    bwd_s: &'a [f64],
    send_fwd_s: &'a [f64],
    send_bwd_s: &'a [f64],
    tails: &'a [StageTail],
) -> PipelineSpec<'a> {
    let lags = cfg.overlap_p2p();
    PipelineSpec {
        lag_fwd_s: if lags { send_fwd_s } else { &[] },
        lag_bwd_s: if lags { send_bwd_s } else { &[] },
        tails: if cfg.overlap_param_gather { tails } else { &[] },
        align_gather: cfg.align_param_gather,
        ..PipelineSpec::new(cfg.pp, cfg.virtual_stages.max(1), cfg.grad_accum, fwd_s, bwd_s)
    }
}

/// Schedules the timed stages of `cfg`: eq. 7 for S1's pipeline ([`TrainingConfig::s1_pipeline`]), the simulated
/// (interleaved) 1F1B schedule followed by the stages' tails otherwise.
///
/// Errors: a pipeline the simulation cannot run (field `parallelism`; validation rules it out).
pub fn schedule(cfg: &TrainingConfig, timed: &TimedTraining) -> Result<Step, ConfigError> {
    let stage_f: Vec<f64> = timed.stages.iter().map(|s| s.forward_s).collect();
    let stage_b: Vec<f64> = timed.stages.iter().map(|s| s.backward_s).collect();
    let tails: Vec<StageTail> = timed.stages.iter().map(|s| s.tail).collect();
    let updates: Vec<f64> = tails.iter().map(|t| t.update_s).collect();
    let first_sync = tails.first().map_or(0.0, |t| t.grad_sync_s + t.after_sync_s);
    let components = eq7(&stage_f, &stage_b, &updates, first_sync, cfg.grad_accum);
    let timeline = if cfg.s1_pipeline() {
        Timeline {
            model: "eq7",
            pipeline_s: components.pipeline_s,
            exposed_grad_sync_s: components.first_stage_grad_sync_s,
            update_s: components.max_update_s,
        }
    } else {
        let spec = pipeline_spec(cfg, &timed.fwd_s, &timed.bwd_s, &timed.send_fwd_s, &timed.send_bwd_s, &tails);
        let sim = simulate(&spec).ok_or_else(|| ConfigError {
            field: "parallelism".into(),
            message: "the pipeline schedule cannot be simulated".into(),
        })?;
        let st = step_time(&sim, &tails, cfg.overlap_grad_reduce);
        Timeline {
            model: "simulated",
            pipeline_s: st.pipeline_s,
            exposed_grad_sync_s: st.exposed_grad_sync_s,
            update_s: st.update_s,
        }
    };
    Ok(Step { components, timeline })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn eq7_and_bubbles_by_hand() {
        // Stages (F, B) = (3, 6) and (2, 7) ms, m = 4: (4 − 1 + 2)·(3 + 7) = 50 ms, + 5 + max(1, 2) = 57 ms.
        let e = eq7(&[3.0, 2.0], &[6.0, 7.0], &[1.0, 2.0], 5.0, 4);
        assert_eq!((e.max_fwd_s, e.max_bwd_s, e.pipeline_s, e.iteration_s()), (3.0, 7.0, 50.0, 57.0));
        assert_eq!(bubble_fraction(4, 16), 0.1875);
        // Narayanan et al.: interleaving with v chunks divides the bubble by v.
        assert_eq!(interleaved_bubble_fraction(4, 16, 3), 0.0625);
        assert_eq!(interleaved_bubble_fraction(4, 16, 1), bubble_fraction(4, 16));
    }
}
