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
mod tests {
    use super::*;

    fn comms(p: &Parsed) -> Vec<&CommSample> {
        p.samples.iter().filter_map(|s| if let Sample::Comm(c) = s { Some(c) } else { None }).collect()
    }

    const LATENCY_73: &str = "\
# OSU MPI-CUDA Latency Test v7.3
# Send Buffer on DEVICE (D) and Receive Buffer on DEVICE (D)
# Datatype: MPI_CHAR.
# Size       Avg Latency(us)   P50 Tail Lat(us)   P90 Tail Lat(us)   P99 Tail Lat(us)
1                       2.07               2.05               2.10               2.55
2                       2.06               2.05               2.09               2.40
[1699999999.123456] [node1:1234 :0]       ucp_context.c:1050 UCX  WARN  transport 'cuda_ipc' is not available

4194304               330.15             329.90             331.00             335.10
";

    #[test]
    fn latency_with_tail_columns_and_warnings() {
        let p = parse(LATENCY_73.as_bytes(), &Context { gpu: Some("H100".into()), ..Default::default() }).unwrap();
        let c = comms(&p);
        assert_eq!(c.len(), 3);
        assert_eq!((c[0].collective, c[0].bytes, c[0].ranks, c[0].time_us), (Collective::SendRecv, 1, 2, 2.07));
        assert_eq!((c[2].bytes, c[2].time_us), (4194304, 330.15));
        // algbw = 4194304 B / 330.15 µs = 12.70 GB/s; send/recv busbw = algbw.
        let algbw = 4194304.0 / 330.15e3;
        assert!((c[2].algbw_gbs.unwrap() - algbw).abs() < 1e-12);
        assert_eq!(c[2].busbw_gbs, c[2].algbw_gbs);
        assert_eq!(c[0].attributes["p99_us"], "2.55");
        assert_eq!(c[0].attributes["omb_version"], "7.3");
        assert_eq!(c[0].attributes["send_buffer"], "device");
        assert_eq!((c[0].attributes["gpu"].as_str(), c[0].dtype.as_deref()), ("H100", Some("char")));
        assert_eq!(c[0].attributes["benchmark"], "Latency");
        assert!(p.rejected.is_empty());
    }

    #[test]
    fn bandwidth_tests_become_times_per_message() {
        let input = "\
# OSU MPI Bandwidth Test v5.9
# Size      Bandwidth (MB/s)
1                       3.21
1048576             24000.00
# OSU MPI Bi-Directional Bandwidth Test v5.9
# Size      Bandwidth (MB/s)
1048576             48000.00
# OSU MPI Multiple Bandwidth / Message Rate Test v5.9
# [ pairs: 4 ] [ window size: 64 ]
# Size                  MB/s        Messages/s
1048576             96000.00             91.55
";
        let p = parse(input.as_bytes(), &Context::default()).unwrap();
        let c = comms(&p);
        assert_eq!(c.len(), 4);
        // 1 B at 3.21 MB/s (= 3.21 B/µs) → 1/3.21 µs.
        assert!((c[0].time_us - 1.0 / 3.21).abs() < 1e-12);
        // 1 MiB at 24000 MB/s → 43.69 µs; algbw = 24 GB/s.
        assert!((c[1].time_us - 1048576.0 / 24000.0).abs() < 1e-9);
        assert!((c[1].algbw_gbs.unwrap() - 24.0).abs() < 1e-9);
        // Bidirectional 48000 MB/s counts both directions: 24 GB/s each way.
        assert!((c[2].time_us - 2.0 * 1048576.0 / 48000.0).abs() < 1e-9);
        // Four pairs share 96000 MB/s: 24 GB/s per pair.
        assert!((c[3].time_us - 4.0 * 1048576.0 / 96000.0).abs() < 1e-9);
        assert_eq!((c[3].attributes["pairs"].as_str(), c[3].attributes["messages_per_s"].as_str()), ("4", "91.55"));
        assert_eq!(c[1].attributes["time_from"], "bandwidth");
    }

    #[test]
    fn collectives_need_ranks_and_scale_gather_sizes() {
        let input = "\
# OSU MPI Allreduce Latency Test v7.1
# Datatype: MPI_FLOAT.
# Size       Avg Latency(us)   Min Latency(us)   Max Latency(us)  Iterations
4                       5.50              5.10              6.00        1000
65536                  40.00             39.00             41.00         100

# OSU MPI Allgather Latency Test v7.1
# Size       Avg Latency(us)
1024                   12.00
# OSU MPI Gather Latency Test v7.1
# Size       Avg Latency(us)
1024                   12.00
# OSU MPI Broadcast Latency Test v7.1
# Size       Avg Latency(us)
8                        1.0   extra
";
        let p = parse(input.as_bytes(), &Context::default()).unwrap();
        assert!(comms(&p).is_empty());
        assert_eq!(p.rejected.len(), 4);
        assert_eq!(p.rejected[0].line, 1);
        assert!(p.rejected[0].reason.contains("give ranks"), "{}", p.rejected[0].reason);
        assert!(p.rejected[2].reason.contains("Gather"), "{}", p.rejected[2].reason);
        let ctx = Context { ranks: Some(16), nodes: Some(2), gpus_per_node: Some(8), ..Default::default() };
        let p = parse(input.as_bytes(), &ctx).unwrap();
        let c = comms(&p);
        assert_eq!(c.len(), 3);
        assert_eq!((c[0].collective, c[0].bytes, c[0].ranks, c[0].time_us), (Collective::AllReduce, 4, 16, 5.5));
        assert_eq!((c[0].nodes, c[0].gpus_per_node, c[0].dtype.as_deref()), (Some(2), Some(8), Some("float")));
        assert_eq!(
            (c[0].attributes["min_latency_us"].as_str(), c[0].attributes["iterations"].as_str()),
            ("5.10", "1000")
        );
        // busbw of an all-reduce over 16 ranks: algbw × 2·15/16.
        let algbw = 65536.0 / 40.0e3;
        assert!((c[1].busbw_gbs.unwrap() - algbw * 30.0 / 16.0).abs() < 1e-12);
        // Allgather: OSU's 1024 B is one rank's block: nccl-tests bytes = 16 × 1024.
        assert_eq!((c[2].collective, c[2].bytes), (Collective::AllGather, 16 * 1024));
        let last = p.rejected.last().unwrap();
        assert_eq!(last.line, 15);
        assert!(last.reason.contains("expected 2 fields"), "{}", last.reason);
    }

    #[test]
    fn headers_and_errors() {
        assert_eq!(columns("Size  Latency (us)"), vec!["size", "latency(us)"]);
        assert_eq!(columns("Size Bandwidth (MB/s)"), vec!["size", "bandwidth(mb/s)"]);
        assert_eq!(columns("Size Avg Latency (us) Weird"), vec!["size", "avglatency(us)", "weird"]);
        assert_eq!(kind_of("Non-blocking Allreduce Latency"), Ok(Kind::Collective(Collective::AllReduce)));
        assert_eq!(kind_of("All-to-All Personalized Exchange Latency"), Ok(Kind::Collective(Collective::AllToAll)));
        assert_eq!(kind_of("Reduce_scatter Latency"), Ok(Kind::Collective(Collective::ReduceScatter)));
        assert!(kind_of("Allgatherv Latency").is_err());
        assert!(parse(b"nothing here\n", &Context::default()).is_err());
        assert!(looks_like(b"\n# OSU MPI Latency Test v7.3\n"));
        let validated = "# OSU MPI Latency Test v7.3\n# Size Avg Latency(us) Validation\n8 1.5 Pass\n16 1.6 Fail\n";
        let p = parse(validated.as_bytes(), &Context::default()).unwrap();
        assert_eq!((comms(&p).len(), p.rejected[0].line), (1, 4));
    }
}
