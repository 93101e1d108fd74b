//! OSU Micro-Benchmarks (OMB) text output: `osu_latency`, `osu_bw`, `osu_bibw`, `osu_mbw_mr`, `osu_multi_lat`,
//! the blocking collectives (`osu_allreduce`, `osu_allgather`, `osu_alltoall`, `osu_bcast`, `osu_reduce`,
//! `osu_reduce_scatter`) and `osu_iallreduce`; MPI, MPI-CUDA/ROCM and NCCL/RCCL builds alike.
//!
//! A file may hold several benchmarks back to back: each starts at `# OSU <build> <Name> Test v<version>`. Per
//! benchmark the optional `# Datatype: MPI_CHAR.`, `# Send Buffer on DEVICE (D) and Receive Buffer on HOST (H)` and
//! `# [ pairs: 2 ] [ window size: 64 ]` lines are read, then the column header (`# Size  Avg Latency(us)`,
//! `# Size  Latency (us)`, `# Size  Bandwidth (MB/s)`, `# Size  MB/s  Messages/s`, with `-f`: `Min Latency(us)
//! Max Latency(us) Iterations`, OMB ≥ 7.3: `P50/P90/P99 Tail Lat(us)`, with `-c`: `Validation`), matched by name
//! whatever the spacing. Data rows are whitespace-separated with the size in bytes first; MPI/UCX warnings, blank
//! lines and other text are skipped; a row with the wrong number of fields or a failed validation is rejected.
//!
//! One [`CommSample`] per size:
//! - point-to-point tests → `send_recv`, 2 ranks, bytes = the message size. Latency tests: time = the reported
//!   (one-way) latency. Bandwidth tests report a streaming rate (MB/s = 10⁶ B/s over a window of back-to-back
//!   messages): time = size / rate, the time per message at that rate with the latency overlapped (attribute
//!   `time_from = bandwidth`); `osu_bibw` counts both directions, so time = 2·size / rate; `osu_mbw_mr` sums all
//!   pairs (from the `pairs:` line, else the upload's ranks / 2), so time = pairs·size / rate.
//! - collectives → their [`Collective`] with the ranks from the upload's `ranks` (OSU does not print the
//!   communicator size; without it the benchmark is rejected once, with the reason); bytes as nccl-tests counts
//!   them: the message size, except all-gather and alltoall, where OSU's size is one rank's block, so bytes =
//!   size × ranks. Time = the average latency (`osu_iallreduce`: `Pure Comm.(us)` when printed).
//! - algbw = bytes / time; busbw = algbw × the nccl-tests factor for the collective and ranks.
//! - attributes: `benchmark`, `omb_version`, `min_latency_us`, `max_latency_us`, `iterations`, `p50_us`,
//!   `p90_us`, `p99_us`, `send_buffer`/`recv_buffer`, `gpu` (the upload's), `source_format = osu`.
//!
//! Not mapped (rejected with the reason): gather, scatter, barrier, scan, the `v` collectives with per-rank sizes,
//! one-sided put/get/accumulate.

use super::text::{number, whole};
use super::{utf8, Context, ParseError, Parsed};
use crate::op::Collective;
use crate::samples::{Attributes, CommSample, Rejected, Sample};

/// Parses OSU Micro-Benchmarks output (see the module doc).
///
/// Errors: no `# OSU` benchmark header with a result table.
pub fn parse(bytes: &[u8], ctx: &Context) -> Result<Parsed, ParseError> {
    let text = utf8(bytes)?;
    let mut out = Parsed::default();
    let mut bench: Option<Bench> = None;
    let mut found = 0usize;
    for (i, raw) in text.lines().enumerate() {
        let line = i as u64 + 1;
        let t = raw.trim();
        if let Some(title) = t.strip_prefix("# OSU") {
            if let Some(b) = bench.take() {
                found += b.finish(ctx, &mut out);
            }
            bench = Some(Bench::new(title.trim(), line));
            continue;
        }
        let Some(b) = bench.as_mut() else { continue };
        if let Some(h) = t.strip_prefix('#') {
            b.header(h.trim());
        } else if t.split_whitespace().next().is_some_and(|w| w.bytes().all(|c| c.is_ascii_digit())) {
            b.rows.push((line, t.split_whitespace().map(str::to_string).collect()));
        }
    }
    if let Some(b) = bench.take() {
        found += b.finish(ctx, &mut out);
    }
    if found == 0 {
        return Err(ParseError::whole("no OSU benchmark: expected a '# OSU … Test' header followed by a table"));
    }
    Ok(out)
}

/// OSU output: a line starting with `# OSU `.
pub fn looks_like(head: &[u8]) -> bool {
    let text = String::from_utf8_lossy(head);
    text.lines().any(|l| l.trim_start().starts_with("# OSU "))
}

/// What a benchmark measures.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Kind {
    Latency,
    Bandwidth,
    BiBandwidth,
    MultiBandwidth,
    Collective(Collective),
}

/// Known column names, compared without spaces and case.
const COLUMNS: [&str; 18] = [
    "size",
    "latency(us)",
    "avglatency(us)",
    "minlatency(us)",
    "maxlatency(us)",
    "iterations",
    "p50taillat(us)",
    "p90taillat(us)",
    "p99taillat(us)",
    "bandwidth(mb/s)",
    "mb/s",
    "messages/s",
    "overall(us)",
    "compute(us)",
    "purecomm.(us)",
    "overlap(%)",
    "validation",
    "avgbandwidth(mb/s)",
];

struct Bench {
    line: u64,
    name: String,
    version: Option<String>,
    kind: Result<Kind, String>,
    dtype: Option<String>,
    buffers: Option<(String, String)>,
    pairs: Option<u32>,
    columns: Option<Vec<String>>,
    rows: Vec<(u64, Vec<String>)>,
}

impl Bench {
    fn new(title: &str, line: u64) -> Bench {
        // "MPI-CUDA Allreduce Latency Test v7.3"
        let (body, version) = match title.rfind(" Test") {
            Some(p) => (&title[..p], title[p + 5..].trim().strip_prefix('v').map(str::to_string)),
            None => (title, None),
        };
        let mut words: Vec<&str> = body.split_whitespace().collect();
        if words.len() > 1 && words[0].chars().all(|c| c.is_ascii_uppercase() || c == '-' || c.is_ascii_digit()) {
            words.remove(0);
        }
        let name = words.join(" ");
        Bench {
            line,
            kind: kind_of(&name),
            name,
            version,
            dtype: None,
            buffers: None,
            pairs: None,
            columns: None,
            rows: Vec::new(),
        }
    }

    fn header(&mut self, h: &str) {
        if let Some(d) = h.strip_prefix("Datatype:") {
            let d = d.trim().trim_end_matches('.').trim();
            let d = d.strip_prefix("MPI_").unwrap_or(d);
            self.dtype = Some(d.to_ascii_lowercase());
        } else if h.starts_with("Send Buffer on") {
            let words: Vec<&str> = h.split_whitespace().collect();
            let on: Vec<String> = words
                .iter()
                .enumerate()
                .filter(|(_, w)| **w == "on")
                .filter_map(|(i, _)| words.get(i + 1).map(|w| w.to_ascii_lowercase()))
                .collect();
            if let [send, recv] = on.as_slice() {
                self.buffers = Some((send.clone(), recv.clone()));
            }
        } else if let Some(p) = h.find("pairs:") {
            self.pairs =
                h[p + 6..].split(|c: char| !c.is_ascii_digit() && c != ' ').next().and_then(|s| s.trim().parse().ok());
        } else if h.split_whitespace().next().is_some_and(|w| w.eq_ignore_ascii_case("size")) {
            self.columns = Some(columns(h));
        }
    }

    /// Emits the benchmark's samples; returns 1 when it had a table.
    fn finish(self, ctx: &Context, out: &mut Parsed) -> usize {
        let Some(columns) = &self.columns else { return 0 };
        let kind = match &self.kind {
            Ok(k) => *k,
            Err(why) => {
                out.rejected.push(Rejected { line: self.line, reason: format!("OSU {}: {why}", self.name) });
                return 1;
            }
        };
        let pos = |n: &str| columns.iter().position(|c| c == n);
        let time_col = match kind {
            Kind::Bandwidth | Kind::BiBandwidth | Kind::MultiBandwidth => {
                pos("bandwidth(mb/s)").or(pos("mb/s")).or(pos("avgbandwidth(mb/s)"))
            }
            _ => pos("purecomm.(us)").or(pos("avglatency(us)")).or(pos("latency(us)")).or(pos("overall(us)")),
        };
        let Some(time_col) = time_col else {
            out.rejected.push(Rejected {
                line: self.line,
                reason: format!("OSU {}: no latency or bandwidth column in {columns:?}", self.name),
            });
            return 1;
        };
        let ranks = match kind {
            Kind::Collective(_) => match ctx.ranks.filter(|r| *r > 0) {
                Some(r) => r,
                None => {
                    out.rejected.push(Rejected {
                        line: self.line,
                        reason: format!(
                            "OSU {}: the rank count is unknown (OSU output does not record it): give ranks; {} rows \
                             skipped",
                            self.name,
                            self.rows.len()
                        ),
                    });
                    return 1;
                }
            },
            _ => 2,
        };
        let pairs = match kind {
            Kind::MultiBandwidth => match self.pairs.or(ctx.ranks.map(|r| r / 2)).filter(|p| *p > 0) {
                Some(p) => p,
                None => {
                    out.rejected.push(Rejected {
                        line: self.line,
                        reason: format!("OSU {}: the number of pairs is unknown: give ranks", self.name),
                    });
                    return 1;
                }
            },
            _ => 1,
        };
        let collective = match kind {
            Kind::Collective(c) => c,
            _ => Collective::SendRecv,
        };
        let mut base = Attributes::new();
        base.insert("source_format".into(), "osu".into());
        base.insert("benchmark".into(), self.name.clone());
        if let Some(v) = &self.version {
            base.insert("omb_version".into(), v.clone());
        }
        if let Some((s, r)) = &self.buffers {
            base.insert("send_buffer".into(), s.clone());
            base.insert("recv_buffer".into(), r.clone());
        }
        if let Some(g) = &ctx.gpu {
            base.insert("gpu".into(), g.clone());
        }
        if matches!(kind, Kind::Bandwidth | Kind::BiBandwidth | Kind::MultiBandwidth) {
            base.insert("time_from".into(), "bandwidth".into());
        }
        if kind == Kind::MultiBandwidth {
            base.insert("pairs".into(), pairs.to_string());
        }
        for (line, words) in &self.rows {
            match self.sample(kind, collective, ranks, pairs, columns, time_col, words, &base, ctx) {
                Ok(s) => out.samples.push(Sample::Comm(s)),
                Err(reason) => out.rejected.push(Rejected { line: *line, reason }),
            }
        }
        1
    }

    #[allow(clippy::too_many_arguments)]
    fn sample(
        &self,
        kind: Kind,
        collective: Collective,
        ranks: u32,
        pairs: u32,
        columns: &[String],
        time_col: usize,
        words: &[String],
        base: &Attributes,
        ctx: &Context,
    ) -> Result<CommSample, String> {
        if words.len() != columns.len() {
            return Err(format!("expected {} fields like the header, found {}", columns.len(), words.len()));
        }
        let size = words.first().and_then(|w| whole(w)).ok_or("size is not a whole number")?;
        if size == 0 {
            return Err("size 0: no data moved".into());
        }
        let get = |name: &str| columns.iter().position(|c| c == name).and_then(|i| words.get(i));
        if get("validation").is_some_and(|v| !v.eq_ignore_ascii_case("pass")) {
            return Err(format!("validation failed at size {size}"));
        }
        let value = words.get(time_col).and_then(|w| number(w)).filter(|v| *v > 0.0).ok_or_else(|| {
            format!(
                "{} {:?} is not a positive number",
                columns.get(time_col).map(String::as_str).unwrap_or(""),
                words.get(time_col)
            )
        })?;
        let time_us = match kind {
            Kind::Latency | Kind::Collective(_) => value,
            // MB/s = 10⁶ B/s = 1 B/µs.
            Kind::Bandwidth => size as f64 / value,
            Kind::BiBandwidth => 2.0 * size as f64 / value,
            Kind::MultiBandwidth => pairs as f64 * size as f64 / value,
        };
        let bytes = match collective {
            Collective::AllGather | Collective::AllToAll => {
                size.checked_mul(ranks as u64).ok_or("size × ranks overflows")?
            }
            _ => size,
        };
        let mut attributes = base.clone();
        for (col, attr) in [
            ("minlatency(us)", "min_latency_us"),
            ("maxlatency(us)", "max_latency_us"),
            ("iterations", "iterations"),
            ("p50taillat(us)", "p50_us"),
            ("p90taillat(us)", "p90_us"),
            ("p99taillat(us)", "p99_us"),
            ("messages/s", "messages_per_s"),
        ] {
            if let Some(v) = get(col) {
                attributes.insert(attr.into(), v.clone());
            }
        }
        Ok(CommSample {
            nodes: ctx.nodes,
            gpus_per_node: ctx.gpus_per_node,
            dtype: self.dtype.clone(),
            attributes,
            ..CommSample::timed(collective, bytes, ranks, time_us)
        })
    }
}

/// Splits a column header into known names (multi-word names joined), unknown words standing alone.
fn columns(h: &str) -> Vec<String> {
    let words: Vec<&str> = h.split_whitespace().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < words.len() {
        let mut taken = None;
        for k in (1..=4).rev() {
            if i + k > words.len() {
                continue;
            }
            let joined = words[i..i + k].concat().to_ascii_lowercase();
            if COLUMNS.contains(&joined.as_str()) {
                taken = Some((joined, k));
                break;
            }
        }
        let (name, k) = taken.unwrap_or_else(|| (words[i].to_ascii_lowercase(), 1));
        out.push(name);
        i += k;
    }
    out
}

/// The benchmark kind from its name (`Allreduce Latency`, `Bi-Directional Bandwidth`, …).
fn kind_of(name: &str) -> Result<Kind, String> {
    let n = name.to_ascii_lowercase().replace(['_', '-'], " ");
    let has = |w: &str| n.contains(w);
    let unsupported = |what: &str| Err(format!("{what} has no perfcast collective"));
    if has("allgatherv") || has("alltoallv") || has("gatherv") || has("scatterv") {
        return unsupported("a collective with per-rank sizes");
    }
    if has("put") || has("get ") || n.ends_with(" get") || has("accumulate") || has("atomics") {
        return unsupported("one-sided communication");
    }
    Ok(Kind::Collective(if has("allreduce") {
        Collective::AllReduce
    } else if has("allgather") {
        Collective::AllGather
    } else if has("reduce scatter") || has("reducescatter") {
        Collective::ReduceScatter
    } else if has("all to all") || has("alltoall") {
        Collective::AllToAll
    } else if has("broadcast") || has("bcast") {
        Collective::Broadcast
    } else if has("reduce") {
        Collective::Reduce
    } else if has("gather") || has("scatter") || has("barrier") || has("scan") {
        return unsupported(name);
    } else if has("multiple bandwidth") || has("message rate") {
        return Ok(Kind::MultiBandwidth);
    } else if has("bi directional bandwidth") || has("bidirectional bandwidth") {
        return Ok(Kind::BiBandwidth);
    } else if has("bandwidth") {
        return Ok(Kind::Bandwidth);
    } else if has("latency") {
        return Ok(Kind::Latency);
    } else {
        return Err(format!("unknown OSU benchmark {name:?}"));
    }))
}

#[cfg(test)]
mod tests;
