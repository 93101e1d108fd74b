//! torchtitan's metrics line: `MetricsProcessor.log` in `torchtitan/components/metrics.py` logs, every
//! `metrics.log_freq` steps, `step: 10  loss:  7.1234  grad_norm:  1.2345  memory: 30.12GiB(38.07%)  tps: 5,432
//! tflops: 123.45  mfu: 39.51%` (coloured with ANSI escapes, which are stripped). `tps` is tokens per second per
//! device: the tokens one rank processed since the last log over the elapsed time and
//! `parallel_dims.non_data_parallel_size`, so every GPU of the run processes `tps` tokens per second and one step
//! of `global_batch · seq_len` tokens takes `global_batch · seq_len / (tps · gpus)` s. Validation lines
//! (`validate step: …`) are not training steps and are skipped.

use super::{integer, number, value_after, LineResult, RunScale};

/// One line: `None` unless it has a training `step:` and `tps:`; else its step and iteration time (s).
pub(crate) fn parse_line(line: &str, scale: &RunScale) -> LineResult {
    let at = line.find("step:")?;
    if !line.contains("tps:") || line[..at].trim_end().ends_with("validate") {
        return None;
    }
    Some(parse_step(line, scale))
}

fn parse_step(line: &str, scale: &RunScale) -> Result<(Option<u64>, f64), String> {
    let step = integer(value_after(line, "step:").unwrap_or(""), "the step")?;
    // `{round(tps):,}`: thousands separators.
    let at = line.find("tps:").unwrap_or(0) + "tps:".len();
    let rest = line[at..].trim_start();
    let end = rest.find(|c: char| !(c.is_ascii_digit() || c == ',' || c == '.')).unwrap_or(rest.len());
    let tps = number(&rest[..end].replace(',', ""), "tps")?;
    if tps <= 0.0 {
        return Err(format!("tps {tps} is not positive"));
    }
    let tokens = scale.global_batch as f64 * scale.seq_len as f64;
    Ok((Some(step), tokens / (tps * scale.gpus as f64)))
}
