//! Megatron-LM / Megatron-Core / NeMo step lines: `training_log` in Megatron-LM's
//! `megatron/training/training.py` prints, every `--log-interval` iterations,
//! ` [date] iteration       10/    1000 | consumed samples: … | elapsed time per iteration (ms): 1147.6 | …`, the
//! time being the interval's wall clock divided by its iterations (`elapsed_time_per_iteration * 1000.0`,
//! formatted `{:.1f}`). NeMo 2 / Megatron-Bridge and Megatron-DeepSpeed print the same fields (the total may be
//! `infinity`).

use super::{integer, number, LineResult};

/// The field that makes a line a step line.
const ELAPSED: &str = "elapsed time per iteration (ms):";

/// One line: `None` unless it has [`ELAPSED`]; else its iteration number and iteration time (s).
pub(crate) fn parse_line(line: &str) -> LineResult {
    if !line.contains(ELAPSED) {
        return None;
    }
    Some(parse_step(line))
}

fn parse_step(line: &str) -> Result<(Option<u64>, f64), String> {
    let mut iteration = None;
    let mut elapsed_ms = None;
    for field in line.split('|').map(str::trim) {
        if let Some(v) = field.strip_prefix(ELAPSED) {
            elapsed_ms = Some(number(v.trim(), "the elapsed time per iteration (ms)")?);
        } else if let (None, Some(at)) = (iteration, field.find("iteration ")) {
            // `iteration   10/  1000` (the date before it is skipped).
            let rest = field[at + "iteration ".len()..].trim();
            let n = rest.split('/').next().unwrap_or("").trim();
            iteration = Some(integer(n, "the iteration")?);
        }
    }
    let iteration = iteration.ok_or("the line has no `iteration N/M` field before the elapsed time")?;
    let ms = elapsed_ms.ok_or("no value after `elapsed time per iteration (ms):`")?;
    Ok((Some(iteration), ms / 1000.0))
}
