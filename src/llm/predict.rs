//! Training-iteration prediction (S1, MODELS.md §1, and the Megatron-LM options of §1.6) as four stages, each in
//! its own module with typed inputs and outputs:
//!
//! 1. **decompose** ([`super::decompose`]): the configuration → the operators and collectives every pipeline stage
//!    runs (S1 Table I and its Megatron-LM extensions), with shapes, sizes and calls; no times.
//! 2. **time** ([`super::timing`]): every distinct operator timed once through a [`CostBackend`], composed into
//!    every model chunk's forward and backward time per micro-batch and every stage's tail.
//! 3. **schedule** ([`super::schedule`]): S1 eq. 7 for S1's pipeline, the simulated 1F1B / interleaved schedule
//!    otherwise ([`super::pipeline`]).
//! 4. **report** ([`super::report`]): where the time and the memory go — stages, operator table, memory,
//!    throughput, warnings.

use super::config::{ConfigError, TrainingConfig};
use super::decompose::{decompose, Decomposition};
use super::report::{report, TrainingPrediction};
use super::schedule::{schedule, Step};
use super::timing::{time_training, TimedTraining, Timer};
use super::trace::{trace, Trace};
use crate::cost::CostBackend;
use crate::hw::GpuSpec;

/// Predicts one training iteration of `cfg` with `backend` (which also provides the system).
///
/// Errors: a precision the GPU cannot compute in (`precision`). Configuration errors are caught earlier by
/// [`super::validate`].
pub fn predict(cfg: &TrainingConfig, backend: &dyn CostBackend) -> Result<TrainingPrediction, ConfigError> {
    let (work, timed, step) = stages(cfg, backend)?;
    Ok(report(cfg, backend, &work, &timed, &step))
}

/// Stages 1–3: decompose, time, schedule.
fn stages(
    cfg: &TrainingConfig,
    backend: &dyn CostBackend,
) -> Result<(Decomposition, TimedTraining, Step), ConfigError> {
    let system = backend.system();
    check_precision(cfg, &system.gpu)?;
    let work = decompose(cfg, system);
    let timed = time_training(cfg, &work, &mut Timer::for_training(backend, cfg))?;
    let step = schedule(cfg, &timed)?;
    Ok((work, timed, step))
}

/// [`predict`] and the iteration's timeline ([`super::trace`]) from the same stages' outputs: the trace's span is
/// the prediction's `iteration_time_s`. Errors as [`predict`].
pub fn predict_traced(
    cfg: &TrainingConfig,
    backend: &dyn CostBackend,
) -> Result<(TrainingPrediction, Trace), ConfigError> {
    let (work, timed, step) = stages(cfg, backend)?;
    let timeline = trace(cfg, &work, &timed, &step)?;
    Ok((report(cfg, backend, &work, &timed, &step), timeline))
}

/// Refuses a precision or fp8 recipe the GPU lacks ([`crate::llm::recipe::check_gpu`]).
fn check_precision(cfg: &TrainingConfig, gpu: &GpuSpec) -> Result<(), ConfigError> {
    crate::llm::recipe::check_gpu(cfg, gpu)
}
