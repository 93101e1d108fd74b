//! DeepSpeed's step lines, two kinds:
//! - `ThroughputTimer.stop` (`deepspeed/utils/timer.py`), every `steps_per_print` steps:
//!   `epoch=0/micro_step=40/global_step=10, RunningAvgSamplesPerSec=…, CurrSamplesPerSec=51.2, MemAllocated=…GB,
//!   MaxMemAllocated=…GB`, where `CurrSamplesPerSec = batch_size / step_elapsed_time` of the last optimizer step
//!   and the engine builds the timer with `batch_size=self.train_batch_size()` (the global batch), so the step took
//!   `global_batch / CurrSamplesPerSec` s;
//! - `PipelineEngine.train_batch` (`deepspeed/runtime/pipe/engine.py`): `steps: 10 loss: 2.3456 iter time (s):
//!   1.234 samples/sec: 51.860`, the mean iteration over the last `steps_per_print` steps.

use super::{integer, number, value_after, LineResult, RunScale};

/// One line: `None` unless it is one of the two step lines; else its global step and iteration time (s).
pub(crate) fn parse_line(line: &str, scale: &RunScale) -> LineResult {
    if line.contains("CurrSamplesPerSec=") {
        return Some(throughput_timer(line, scale));
    }
    if line.contains("iter time (s):") {
        return Some(pipeline(line));
    }
    None
}

fn throughput_timer(line: &str, scale: &RunScale) -> Result<(Option<u64>, f64), String> {
    let step =
        integer(value_after(line, "global_step=").ok_or("no `global_step=` before the throughput")?, "global_step")?;
    let rate = number(value_after(line, "CurrSamplesPerSec=").unwrap_or(""), "CurrSamplesPerSec")?;
    if rate <= 0.0 {
        return Err(format!("CurrSamplesPerSec {rate} is not positive"));
    }
    Ok((Some(step), scale.global_batch as f64 / rate))
}

fn pipeline(line: &str) -> Result<(Option<u64>, f64), String> {
    let step = match value_after(line, "steps:").or_else(|| value_after(line, "step:")) {
        Some(s) => Some(integer(s, "the step")?),
        None => None,
    };
    let s = number(value_after(line, "iter time (s):").unwrap_or(""), "the iter time (s)")?;
    Ok((step, s))
}
