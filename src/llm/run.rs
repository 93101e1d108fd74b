//! Whole-run estimate: how long and how many GPU-hours a training run of a given length takes at the predicted
//! iteration time (steps × iteration; the learning-rate schedule, evaluation and checkpointing are not counted).

use super::config::RunSpec;
use super::report::{RunEstimate, TrainingPrediction};

/// The run of `run` (validated: exactly one of tokens and steps) at `prediction`'s iteration time, for a model of
/// `seq_len` tokens per sequence: steps = ⌈tokens / (global_batch · seq_len)⌉ when tokens are given.
pub fn run_estimate(prediction: &TrainingPrediction, run: &RunSpec, seq_len: u32) -> RunEstimate {
    let tokens_per_step = prediction.config.global_batch as f64 * seq_len as f64;
    let steps = match (run.steps, run.tokens) {
        (Some(s), _) => s,
        (None, Some(t)) => (t / tokens_per_step).ceil().max(1.0) as u64,
        (None, None) => 0,
    };
    let wall_clock_s = steps as f64 * prediction.iteration_time_s;
    RunEstimate {
        steps,
        tokens: steps as f64 * tokens_per_step,
        wall_clock_s,
        wall_clock_days: wall_clock_s / 86_400.0,
        gpu_hours: wall_clock_s * prediction.config.gpus as f64 / 3600.0,
    }
}
