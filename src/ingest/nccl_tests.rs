//! nccl-tests results (`all_reduce_perf` and friends): the text log and the `-J` JSON report.
//!
//! **Text.** A file may hold several tests back to back; a test starts at `# nccl-tests version …`,
//! `# Collective test starting: <name>_perf` or `# nThread …` once the previous one has rows. Per test:
//! - the collective from the `Collective test starting` line; logs of older nccl-tests do not name it, so it comes
//!   from the upload's `collective`, else from the table: a `root` column with `redop` is reduce, `root` alone
//!   broadcast, `redop` alone all-reduce or reduce-scatter by the bus/algorithm bandwidth ratio (2(n−1)/n vs
//!   (n−1)/n); a table with neither is all-gather or alltoall, which cannot be told apart — that test fails with
//!   an error asking for the collective;
//! - ranks = the number of `#  Rank` lines (every rank of every process is listed once: with `nThread 1 nGpus 8`
//!   one process prints 8 lines, so the lines are not multiplied by nThread × nGpus), else the upload's `ranks`;
//!   nodes = distinct host names on those lines, GPUs per node = ranks / nodes; the device name (text after the
//!   PCI id) goes to the attribute `gpu`;
//! - the table header is read by name (`size count type redop root time algbw busbw #wrong …`, older: no `root`,
//!   `error` instead of `#wrong`, all_gather without `redop`); the first `time algbw busbw #wrong` group is
//!   out-of-place, the second in-place. Units: size B, time µs, algbw/busbw GB/s (10⁹ B/s) as printed.
//! - `NCCL INFO` lines, warnings and program output between rows are skipped; a numeric row with too few fields
//!   is rejected.
//!
//! **Samples.** One [`CommSample`] per (size, out-of-place | in-place) with attribute `in_place = false|true`
//! (both are kept: NCCL's in-place path can differ, and the regression can use the attribute). `bytes` = size as
//! nccl-tests counts it; `dtype` = the type column. Rows of size 0, non-positive time, or a failed data check
//! (`#wrong` > 0) are rejected. Attributes: `nccl_version` (from `nccl-library=22902` → `2.29.2`),
//! `nccl_tests_version`, `redop`, `root` (when not -1), `count`, `gpu`, `source_format`.
//!
//! **JSON** (`-J file`): `{"nccl_version": 22902, "args": ["./all_reduce_perf", …], "config": {"nthreads", "ngpus",
//! "devices": [{"rank", "hostname", "device_info"}]}, "results": [{"size", "count", "type", "redop", "root",
//! "out_of_place": {"time"|"cpu_time", "alg_bw", "bus_bw", "nwrong"}, "in_place": {…}}]}` — the same samples; the
//! collective from the program name in `args[0]`, else the upload's `collective`. Rejected JSON results carry line
//! 1 (nccl-tests writes the report on one line) and their index in the reason.

use crate::op::Collective;
use crate::samples::{Attributes, CommSample};

mod json;
mod log;

pub use json::parse_json;
pub use log::parse_text;

/// A nccl-tests log: its `# nThread`, `# nccl-tests version` or `# Collective test starting` lines.
pub fn looks_like_text(head: &[u8]) -> bool {
    let text = String::from_utf8_lossy(head);
    text.lines().map(str::trim).any(|l| {
        l.starts_with("# nThread ")
            || l.starts_with("# nccl-tests version")
            || l.starts_with("# Collective test starting")
    })
}

/// A nccl-tests `-J` report: a JSON object with `results` and the nccl-tests keys.
pub fn looks_like_json(head: &[u8]) -> bool {
    let text = String::from_utf8_lossy(head);
    let t = text.trim_start_matches('\u{feff}').trim_start();
    t.starts_with('{')
        && t.contains("\"results\"")
        && (t.contains("\"nccl_version\"") || t.contains("\"alg_bw\"") || t.contains("\"out_of_place\""))
}

/// The size and labels of one result row, as text (text log) or converted (JSON).
struct Row<'a> {
    size: u64,
    count: Option<&'a str>,
    dtype: Option<&'a str>,
    redop: Option<&'a str>,
    root: Option<&'a str>,
}

/// One `time algbw busbw #wrong` group of a row: µs, GB/s, GB/s, count.
struct Perf {
    time: Option<f64>,
    algbw: Option<f64>,
    busbw: Option<f64>,
    wrong: Option<f64>,
}

/// What the whole test shares: the collective and where its ranks ran.
#[derive(Clone, Copy)]
struct Shape {
    collective: Collective,
    ranks: u32,
    nodes: Option<u32>,
    gpus_per_node: Option<u32>,
}

/// One sample from a row and one of its groups; `Err` is the rejection reason.
fn sample(shape: Shape, row: &Row, perf: &Perf, in_place: bool, base: &Attributes) -> Result<CommSample, String> {
    let which = if in_place { "in-place" } else { "out-of-place" };
    if row.size == 0 {
        return Err(format!("size 0 ({which}): no data moved"));
    }
    let time_us = perf.time.filter(|t| *t > 0.0).ok_or_else(|| format!("{which} time is not a positive number"))?;
    if let Some(w) = perf.wrong.filter(|w| *w > 0.0) {
        return Err(format!("{which} data check failed: {w} wrong elements"));
    }
    let mut attributes = base.clone();
    attributes.insert("in_place".into(), in_place.to_string());
    for (k, v) in [("redop", row.redop), ("count", row.count)] {
        if let Some(v) = v.filter(|v| !v.is_empty()) {
            attributes.insert(k.into(), v.to_string());
        }
    }
    if let Some(root) = row.root.filter(|r| r.trim() != "-1") {
        attributes.insert("root".into(), root.trim().to_string());
    }
    let algbw = perf.algbw.unwrap_or_else(|| row.size as f64 / (time_us * 1e3));
    Ok(CommSample {
        collective: shape.collective,
        bytes: row.size,
        ranks: shape.ranks,
        nodes: shape.nodes,
        gpus_per_node: shape.gpus_per_node,
        time_us,
        algbw_gbs: Some(algbw),
        busbw_gbs: Some(perf.busbw.unwrap_or(algbw * shape.collective.busbw_factor(shape.ranks))),
        dtype: row.dtype.map(str::to_string),
        attributes,
    })
}

/// `all_reduce_perf` → all-reduce (also accepts a path and the name without `_perf`).
pub fn collective_of_test(name: &str) -> Option<Collective> {
    let n = name.trim().rsplit(['/', '\\']).next().unwrap_or("");
    let n = n.strip_suffix("_mpi").unwrap_or(n);
    let n = n.strip_suffix("_perf").unwrap_or(n);
    Some(match n {
        "all_reduce" | "allreduce" => Collective::AllReduce,
        "all_gather" | "allgather" => Collective::AllGather,
        "reduce_scatter" | "reducescatter" => Collective::ReduceScatter,
        "broadcast" | "bcast" => Collective::Broadcast,
        "reduce" => Collective::Reduce,
        "alltoall" | "all_to_all" => Collective::AllToAll,
        "sendrecv" | "send_recv" => Collective::SendRecv,
        _ => return None,
    })
}
/// `22902` → `2.29.2` (NCCL ≥ 2.9: major·10000 + minor·100 + patch; before: major·1000 + minor·100 + patch).
fn nccl_version(code: u32) -> String {
    if code >= 10000 {
        format!("{}.{}.{}", code / 10000, (code % 10000) / 100, code % 100)
    } else {
        format!("{}.{}.{}", code / 1000, (code % 1000) / 100, code % 100)
    }
}

#[cfg(test)]
mod tests;
