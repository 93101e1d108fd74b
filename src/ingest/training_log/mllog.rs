//! MLPerf Training's `:::MLLOG {json}` events (the `mlperf_logging` package: `namespace`, `time_ms`,
//! `event_type`, `key`, `value`, `metadata`). A step time is either a `tracked_stats` event whose `value` holds
//! `train_step_time` — as the NVIDIA Megatron-Bridge submissions' `DeltaTimingCallback` logs it:
//! `value: {"train_step_time": d, "reduced_train_loss": …}` with `d` the step's wall clock in seconds and
//! `metadata.samples_count = global_batch_size · step` — or an event with key `train_step_time` and a number of
//! seconds as its value. The step is `metadata.step` where given, else `samples_count / global_batch`. Other
//! events (run_start, eval_accuracy, …) are skipped; an `:::MLLOG` line that is not JSON is an error.

use serde_json::Value;

use super::{LineResult, RunScale};

const PREFIX: &str = ":::MLLOG";

/// One line: `None` unless it is an `:::MLLOG` event carrying a `train_step_time`; else its step and time (s).
pub(crate) fn parse_line(line: &str, scale: &RunScale) -> LineResult {
    let at = line.find(PREFIX)?;
    let event: Value = match serde_json::from_str(line[at + PREFIX.len()..].trim()) {
        Ok(v) => v,
        Err(e) => return Some(Err(format!("the :::MLLOG event is not JSON: {e}"))),
    };
    let time = match event.get("key").and_then(Value::as_str) {
        Some("tracked_stats") => event.get("value")?.get("train_step_time")?,
        Some("train_step_time") => event.get("value").unwrap_or(&Value::Null),
        _ => return None,
    };
    Some(parse_step(time, event.get("metadata"), scale))
}

fn parse_step(time: &Value, metadata: Option<&Value>, scale: &RunScale) -> Result<(Option<u64>, f64), String> {
    let seconds = time.as_f64().ok_or_else(|| format!("train_step_time {time} is not a number of seconds"))?;
    let meta = |k: &str| metadata.and_then(|m| m.get(k));
    let step = match (meta("step"), meta("samples_count")) {
        (Some(s), _) => Some(s.as_u64().ok_or_else(|| format!("metadata.step {s} is not a non-negative integer"))?),
        (None, Some(c)) => {
            let c = c.as_u64().ok_or_else(|| format!("metadata.samples_count {c} is not a non-negative integer"))?;
            Some(c / scale.global_batch.max(1))
        }
        (None, None) => None,
    };
    Ok((step, seconds))
}
