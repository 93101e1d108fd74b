//! Training logs → per-iteration step times: the end-to-end measurements users upload to calibrate a system ×
//! framework (`POST /v1/systems/{system}/training-runs`). One module per log format, each a pure function from
//! one log line to one logged step:
//! - [`megatron`]: Megatron-LM / Megatron-Core / NeMo `training_log` lines (`elapsed time per iteration (ms)`),
//! - [`torchtitan`]: torchtitan's metrics lines (`step: … tps: …`),
//! - [`mllog`]: MLPerf `:::MLLOG` events with a `train_step_time`,
//! - [`deepspeed`]: DeepSpeed's `ThroughputTimer` (`CurrSamplesPerSec=`) and pipeline-engine
//!   (`iter time (s):`) lines.
//!
//! Lines of other kinds are skipped; a line that is one of the format's step lines but does not parse is an error
//! naming its (1-based) line number and what is wrong. The run's measured iteration time is the **median** of the
//! logged steps after the warm-up: the first [`WARMUP_FRACTION`] of the logged steps (at least one, rounded up) are
//! dropped — they hold the first iterations' compilation, allocator growth and data-loader start — and at least
//! one step must remain, so a log needs two step lines.
//!
//! May import: nothing outside `std` and serde (the run's scale comes as plain numbers, [`RunScale`]).

pub mod deepspeed;
pub mod megatron;
pub mod mllog;
pub mod torchtitan;

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// The log formats of training runs perfcast reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    /// Megatron-LM / Megatron-Core / NeMo / Megatron-DeepSpeed `training_log` lines.
    Megatron,
    /// torchtitan's `MetricsProcessor.log` lines.
    Torchtitan,
    /// MLPerf Training `:::MLLOG` JSON events.
    Mllog,
    /// DeepSpeed's throughput-timer or pipeline-engine lines.
    Deepspeed,
}

impl LogFormat {
    /// The stored name (`megatron`, `torchtitan`, `mllog`, `deepspeed`).
    pub fn as_str(self) -> &'static str {
        match self {
            LogFormat::Megatron => "megatron",
            LogFormat::Torchtitan => "torchtitan",
            LogFormat::Mllog => "mllog",
            LogFormat::Deepspeed => "deepspeed",
        }
    }
}

/// Fraction of the logged steps counted as warm-up and dropped (rounded up, at least one).
pub const WARMUP_FRACTION: f64 = 0.2;
/// Most step lines one log may hold (bounds the work and memory of one upload).
pub const MAX_LOGGED_STEPS: usize = 100_000;

/// What converts a logged throughput into a step time, from the run's configuration.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RunScale {
    /// Sequences per optimizer step (all data-parallel ranks and micro-batches).
    pub global_batch: u64,
    /// Tokens per sequence.
    pub seq_len: u64,
    /// GPUs of the run.
    pub gpus: u64,
}

/// One logged step (or logging interval's average iteration).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LoggedStep {
    /// The iteration number the log gives (or the step line's ordinal where it gives none).
    pub step: u64,
    /// Time of one iteration (optimizer step), s.
    pub iteration_s: f64,
    /// 1-based line of the log.
    pub line: u64,
}

/// A step line that does not parse, or a log without enough steps (`line` 0: the whole log).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{}{message}", if *.line > 0 { format!("line {}: ", .line) } else { String::new() })]
pub struct LogError {
    /// 1-based line of the log; 0 for the log as a whole.
    pub line: u64,
    pub message: String,
}

/// The steps of one log and the run's measured iteration time.
#[derive(Debug, Clone, PartialEq)]
pub struct StepTimes {
    /// Every logged step, in log order.
    pub steps: Vec<LoggedStep>,
    /// The first steps dropped as warm-up.
    pub warmup_dropped: usize,
    /// Median iteration time of the remaining steps, s.
    pub iteration_s: f64,
}

/// What one format's line parser says of a line: not a step line of the format (`None`), or a step (its number
/// where the line has one, and its iteration time in s), or why the step line is bad.
pub(crate) type LineResult = Option<Result<(Option<u64>, f64), String>>;

/// Every step of `text` in `format`. Errors: a bad step line (its number and what is wrong); more than
/// [`MAX_LOGGED_STEPS`] step lines.
pub fn parse(format: LogFormat, text: &str, scale: &RunScale) -> Result<Vec<LoggedStep>, LogError> {
    let mut steps: Vec<LoggedStep> = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let line = i as u64 + 1;
        let clean = strip_ansi(raw);
        let parsed = match format {
            LogFormat::Megatron => megatron::parse_line(&clean),
            LogFormat::Torchtitan => torchtitan::parse_line(&clean, scale),
            LogFormat::Mllog => mllog::parse_line(&clean, scale),
            LogFormat::Deepspeed => deepspeed::parse_line(&clean, scale),
        };
        let Some(parsed) = parsed else { continue };
        let (step, iteration_s) = parsed.map_err(|message| LogError { line, message })?;
        if !(iteration_s.is_finite() && iteration_s > 0.0) {
            return Err(LogError { line, message: format!("the step time {iteration_s} s is not a positive number") });
        }
        if steps.len() == MAX_LOGGED_STEPS {
            return Err(LogError { line, message: format!("more than {MAX_LOGGED_STEPS} step lines in one log") });
        }
        let step = step.unwrap_or(steps.len() as u64 + 1);
        steps.push(LoggedStep { step, iteration_s, line });
    }
    Ok(steps)
}

/// The steps of `text` and the run's measured iteration time (the module's warm-up rule and median). Errors as
/// [`parse`], and a log with fewer than two step lines (line 0).
pub fn step_times(format: LogFormat, text: &str, scale: &RunScale) -> Result<StepTimes, LogError> {
    let steps = parse(format, text, scale)?;
    if steps.len() < 2 {
        return Err(LogError {
            line: 0,
            message: format!(
                "the log has {} {} step line(s); at least 2 are needed (the first is warm-up)",
                steps.len(),
                format.as_str()
            ),
        });
    }
    let warmup_dropped = warmup_steps(steps.len());
    let mut kept: Vec<f64> = steps[warmup_dropped..].iter().map(|s| s.iteration_s).collect();
    let iteration_s = median(&mut kept);
    Ok(StepTimes { steps, warmup_dropped, iteration_s })
}

/// Steps dropped as warm-up out of `n` logged: ⌈[`WARMUP_FRACTION`]·n⌉, at least 1, leaving at least 1.
pub fn warmup_steps(n: usize) -> usize {
    ((WARMUP_FRACTION * n as f64).ceil() as usize).max(1).min(n.saturating_sub(1))
}

/// The median of `v` (mean of the two middle values for an even count); `v` non-empty.
fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// `line` without ANSI escape sequences (torchtitan colours its metrics line: `ESC[31m`…).
fn strip_ansi(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            if chars.peek() == Some(&'[') {
                chars.next();
                // Parameters and intermediates, then one final byte in @–~.
                for d in chars.by_ref() {
                    if ('@'..='~').contains(&d) {
                        break;
                    }
                }
            }
            continue;
        }
        out.push(c);
    }
    out
}

/// The number after `key` in `line` (up to the next whitespace, `,`, `|` or `/`; thousands separators `,` inside
/// digits are kept out by the caller when it allows them). None when `key` is absent.
pub(crate) fn value_after<'a>(line: &'a str, key: &str) -> Option<&'a str> {
    let at = line.find(key)? + key.len();
    let rest = line[at..].trim_start();
    let end = rest.find(|c: char| c.is_whitespace() || c == '|' || c == '/' || c == ',').unwrap_or(rest.len());
    Some(&rest[..end])
}

/// `s` as a finite number, or an error naming `what`.
pub(crate) fn number(s: &str, what: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if v.is_finite() => Ok(v),
        _ => Err(format!("{what} `{s}` is not a number")),
    }
}

/// `s` as a step number, or an error naming `what`.
pub(crate) fn integer(s: &str, what: &str) -> Result<u64, String> {
    s.parse::<u64>().map_err(|_| format!("{what} `{s}` is not a non-negative integer"))
}

#[cfg(test)]
mod tests;
