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

use std::collections::BTreeSet;

use serde::Deserialize;
use serde_json::Value;

use super::text::{number, whole};
use super::{utf8, Context, ParseError, Parsed};
use crate::op::Collective;
use crate::samples::{Attributes, CommSample, Rejected, Sample};

/// Parses a nccl-tests text log (see the module doc).
///
/// Errors: no result table; a test whose collective cannot be determined (naming its line).
pub fn parse_text(bytes: &[u8], ctx: &Context) -> Result<Parsed, ParseError> {
    let text = utf8(bytes)?;
    let mut out = Parsed::default();
    let mut block = Block::default();
    let mut blocks = 0usize;
    for (i, raw) in text.lines().enumerate() {
        let line = i as u64 + 1;
        let t = raw.trim();
        if let Some(h) = t.strip_prefix('#') {
            let h = h.trim();
            let starts_test = h.starts_with("nccl-tests version")
                || h.starts_with("Collective test starting")
                || h.starts_with("nThread");
            if starts_test && block.has_table() {
                blocks += block.finish(ctx, &mut out)?;
                block = Block::default();
            }
            if block.first_line == 0 {
                block.first_line = line;
            }
            block.header_line(h, line);
        } else if !t.is_empty() {
            block.data_line(t, line);
        }
    }
    blocks += block.finish(ctx, &mut out)?;
    if blocks == 0 {
        return Err(ParseError::whole("no nccl-tests result table (a '#  size count type …' header and rows)"));
    }
    Ok(out)
}

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

/// One test of a text log.
#[derive(Default)]
struct Block {
    first_line: u64,
    collective: Option<(Collective, u64)>,
    /// `# Collective test starting:` named a test perfcast does not model.
    unsupported: Option<(String, u64)>,
    tests_version: Option<String>,
    nccl_version: Option<String>,
    ranks: u32,
    hosts: BTreeSet<String>,
    gpu: Option<String>,
    columns: Option<(Vec<String>, u64)>,
    rows: Vec<(u64, Vec<String>)>,
}

impl Block {
    fn has_table(&self) -> bool {
        self.columns.is_some() || !self.rows.is_empty()
    }

    fn header_line(&mut self, h: &str, line: u64) {
        if let Some(v) = h.strip_prefix("nccl-tests version") {
            let mut words = v.split_whitespace();
            self.tests_version = words.next().map(str::to_string);
            for w in words {
                if let Some(code) = w.strip_prefix("nccl-library=") {
                    self.nccl_version = code.parse().ok().map(nccl_version);
                }
            }
        } else if let Some(name) = h.strip_prefix("Collective test starting:") {
            let name = name.trim();
            match collective_of_test(name) {
                Some(c) => self.collective = Some((c, line)),
                None => self.unsupported = Some((name.to_string(), line)),
            }
        } else if let Some(rest) = h.strip_prefix("Rank") {
            let words: Vec<&str> = rest.split_whitespace().collect();
            if words.first().is_some_and(|w| w.parse::<u32>().is_ok()) {
                self.ranks = self.ranks.saturating_add(1);
                if let Some(host) = words.iter().position(|w| *w == "on").and_then(|i| words.get(i + 1)) {
                    self.hosts.insert(host.to_string());
                }
                if self.gpu.is_none() {
                    if let Some(p) = rest.find(']') {
                        let name = rest[p + 1..].trim();
                        if !name.is_empty() {
                            self.gpu = Some(name.to_string());
                        }
                    }
                }
            }
        } else {
            let words: Vec<&str> = h.split_whitespace().collect();
            let has = |w: &str| words.contains(&w);
            if has("size") && has("count") && has("type") && (has("time") || has("cputime")) {
                self.columns = Some((words.iter().map(|w| w.to_string()).collect(), line));
            }
        }
    }

    fn data_line(&mut self, t: &str, line: u64) {
        let words: Vec<String> = t.split_whitespace().map(str::to_string).collect();
        if self.columns.is_some() && words.first().is_some_and(|w| w.bytes().all(|b| b.is_ascii_digit())) {
            self.rows.push((line, words));
        }
    }

    /// Emits the samples of this test; returns 1 when it had a table.
    fn finish(self, ctx: &Context, out: &mut Parsed) -> Result<usize, ParseError> {
        let Some((columns, header_line)) = &self.columns else { return Ok(0) };
        if let Some((name, line)) = &self.unsupported {
            out.rejected.push(Rejected {
                line: *line,
                reason: format!(
                    "{name}: perfcast has no collective for this test; its {} rows are skipped",
                    self.rows.len()
                ),
            });
            return Ok(1);
        }
        let cols = Cols::new(columns);
        let Some(size_i) = cols.size else {
            return Err(ParseError::at(*header_line, "the result table has no size column"));
        };
        let ranks = if self.ranks > 0 { Some(self.ranks) } else { ctx.ranks };
        let collective = match (self.collective, ctx.collective) {
            (Some((c, _)), _) => c,
            (None, Some(c)) => c,
            (None, None) => infer_collective(&cols, &self.rows, ranks).map_err(|why| {
                ParseError::at(self.first_line.max(1), format!("{why}: give the collective (e.g. all_gather)"))
            })?,
        };
        let Some(ranks) = ranks else {
            out.rejected.push(Rejected {
                line: *header_line,
                reason: "no '#  Rank' lines: the rank count is unknown; give ranks".into(),
            });
            return Ok(1);
        };
        let nodes = (!self.hosts.is_empty()).then_some(self.hosts.len() as u32).or(ctx.nodes);
        let gpus_per_node = match nodes {
            Some(n) if n > 0 && ranks % n == 0 && !self.hosts.is_empty() => Some(ranks / n),
            _ => ctx.gpus_per_node,
        };
        let mut base = Attributes::new();
        base.insert("source_format".into(), "nccl_tests".into());
        if let Some(v) = &self.nccl_version {
            base.insert("nccl_version".into(), v.clone());
        }
        if let Some(v) = &self.tests_version {
            base.insert("nccl_tests_version".into(), v.clone());
        }
        if let Some(g) = self.gpu.clone().or_else(|| ctx.gpu.clone()) {
            base.insert("gpu".into(), g);
        }
        for (line, words) in &self.rows {
            let get = |i: Option<usize>| i.and_then(|i| words.get(i)).map(String::as_str);
            let Some(size) = get(Some(size_i)).and_then(whole) else {
                out.rejected.push(Rejected { line: *line, reason: "size is not a whole number of bytes".into() });
                continue;
            };
            let row = Row {
                size,
                count: get(cols.count),
                dtype: get(cols.dtype),
                redop: get(cols.redop),
                root: get(cols.root),
            };
            for (in_place, group) in [(false, cols.groups.first()), (true, cols.groups.get(1))] {
                let Some(g) = group else { continue };
                let perf = Perf {
                    time: get(Some(g.time)).and_then(number),
                    algbw: get(g.algbw).and_then(number),
                    busbw: get(g.busbw).and_then(number),
                    wrong: get(g.wrong).and_then(number),
                };
                if get(Some(g.time)).is_none() {
                    out.rejected.push(Rejected {
                        line: *line,
                        reason: format!("expected {} fields like the header, found {}", columns.len(), words.len()),
                    });
                    break;
                }
                let shape = Shape { collective, ranks, nodes, gpus_per_node };
                match sample(shape, &row, &perf, in_place, &base) {
                    Ok(s) => out.samples.push(Sample::Comm(s)),
                    Err(reason) => out.rejected.push(Rejected { line: *line, reason }),
                }
            }
        }
        Ok(1)
    }
}

/// Column positions of a result table.
struct Cols {
    size: Option<usize>,
    count: Option<usize>,
    dtype: Option<usize>,
    redop: Option<usize>,
    root: Option<usize>,
    groups: Vec<Group>,
}

struct Group {
    time: usize,
    algbw: Option<usize>,
    busbw: Option<usize>,
    wrong: Option<usize>,
}

impl Cols {
    fn new(columns: &[String]) -> Cols {
        let pos = |n: &str| columns.iter().position(|c| c == n);
        let mut groups: Vec<Group> = Vec::new();
        for (i, c) in columns.iter().enumerate() {
            match c.as_str() {
                "time" | "cputime" => groups.push(Group { time: i, algbw: None, busbw: None, wrong: None }),
                "algbw" => {
                    if let Some(g) = groups.last_mut() {
                        g.algbw = Some(i)
                    }
                }
                "busbw" => {
                    if let Some(g) = groups.last_mut() {
                        g.busbw = Some(i)
                    }
                }
                "#wrong" | "error" | "wrong" => {
                    if let Some(g) = groups.last_mut() {
                        g.wrong = Some(i)
                    }
                }
                _ => {}
            }
        }
        Cols {
            size: pos("size"),
            count: pos("count"),
            dtype: pos("type"),
            redop: pos("redop"),
            root: pos("root"),
            groups,
        }
    }
}

struct Row<'a> {
    size: u64,
    count: Option<&'a str>,
    dtype: Option<&'a str>,
    redop: Option<&'a str>,
    root: Option<&'a str>,
}

struct Perf {
    time: Option<f64>,
    algbw: Option<f64>,
    busbw: Option<f64>,
    wrong: Option<f64>,
}

#[derive(Clone, Copy)]
struct Shape {
    collective: Collective,
    ranks: u32,
    nodes: Option<u32>,
    gpus_per_node: Option<u32>,
}

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

/// The collective of an old table that does not name it (see the module doc).
fn infer_collective(cols: &Cols, rows: &[(u64, Vec<String>)], ranks: Option<u32>) -> Result<Collective, String> {
    if cols.root.is_some() {
        return Ok(if cols.redop.is_some() { Collective::Reduce } else { Collective::Broadcast });
    }
    if cols.redop.is_none() {
        return Err("the log does not name its collective and its columns fit both all_gather and alltoall".into());
    }
    let n = ranks.filter(|n| *n > 2).ok_or("the log does not name its collective and has too few ranks to tell")?;
    let group = cols.groups.first().ok_or("no time column")?;
    let ratio = rows
        .iter()
        .filter_map(|(_, w)| {
            let a = group.algbw.and_then(|i| w.get(i)).and_then(|v| number(v))?;
            let b = group.busbw.and_then(|i| w.get(i)).and_then(|v| number(v))?;
            (a >= 1.0).then_some((a, b / a))
        })
        .max_by(|x, y| x.0.total_cmp(&y.0))
        .map(|(_, r)| r)
        .ok_or("the log does not name its collective and has no row with a usable bandwidth")?;
    let near = |c: Collective| (ratio - c.busbw_factor(n)).abs() < 0.03 * c.busbw_factor(n);
    if near(Collective::AllReduce) {
        Ok(Collective::AllReduce)
    } else if near(Collective::ReduceScatter) {
        Ok(Collective::ReduceScatter)
    } else {
        Err(format!("the log does not name its collective and its busbw/algbw ratio {ratio:.3} fits none"))
    }
}

/// `22902` → `2.29.2` (NCCL ≥ 2.9: major·10000 + minor·100 + patch; before: major·1000 + minor·100 + patch).
fn nccl_version(code: u32) -> String {
    if code >= 10000 {
        format!("{}.{}.{}", code / 10000, (code % 10000) / 100, code % 100)
    } else {
        format!("{}.{}.{}", code / 1000, (code % 1000) / 100, code % 100)
    }
}

#[derive(Deserialize)]
struct JsonReport {
    #[serde(default)]
    args: Vec<Value>,
    #[serde(default)]
    nccl_version: Option<Value>,
    #[serde(default)]
    config: Option<JsonConfig>,
    #[serde(default)]
    devices: Option<Vec<JsonDevice>>,
    #[serde(default)]
    results: Option<Vec<JsonResult>>,
}

#[derive(Deserialize)]
struct JsonConfig {
    #[serde(default)]
    devices: Option<Vec<JsonDevice>>,
}

#[derive(Deserialize)]
struct JsonDevice {
    #[serde(default)]
    hostname: Option<String>,
    #[serde(default)]
    device_info: Option<String>,
}

#[derive(Deserialize)]
struct JsonResult {
    #[serde(default)]
    size: Option<Value>,
    #[serde(default)]
    count: Option<Value>,
    #[serde(rename = "type", default)]
    dtype: Option<String>,
    #[serde(default)]
    redop: Option<String>,
    #[serde(default)]
    root: Option<Value>,
    #[serde(default)]
    out_of_place: Option<JsonPerf>,
    #[serde(default)]
    in_place: Option<JsonPerf>,
}

#[derive(Deserialize)]
struct JsonPerf {
    #[serde(default)]
    time: Option<Value>,
    #[serde(default)]
    cpu_time: Option<Value>,
    #[serde(default)]
    alg_bw: Option<Value>,
    #[serde(default)]
    bus_bw: Option<Value>,
    #[serde(default)]
    nwrong: Option<Value>,
}

fn json_number(v: &Option<Value>) -> Option<f64> {
    match v.as_ref()? {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => number(s),
        _ => None,
    }
}

fn json_text(v: &Option<Value>) -> Option<String> {
    match v.as_ref()? {
        Value::String(s) => Some(s.trim().to_string()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

/// Parses a nccl-tests `-J` JSON report (see the module doc).
///
/// Errors: invalid JSON (line and column), no `results`, the collective unknown.
pub fn parse_json(bytes: &[u8], ctx: &Context) -> Result<Parsed, ParseError> {
    let report: JsonReport = serde_json::from_slice(bytes).map_err(|e| ParseError {
        line: Some(e.line() as u64),
        column: Some(e.column() as u64),
        message: format!("invalid nccl-tests JSON: {e}"),
    })?;
    let results = report.results.ok_or_else(|| ParseError::whole("not a nccl-tests report: no results"))?;
    let program = report.args.first().and_then(Value::as_str).unwrap_or("");
    let collective = collective_of_test(program).or(ctx.collective).ok_or_else(|| {
        ParseError::whole(format!("the report's program {program:?} names no known collective: give the collective"))
    })?;
    let devices = report.config.and_then(|c| c.devices).or(report.devices).unwrap_or_default();
    let ranks = u32::try_from(devices.len()).ok().filter(|n| *n > 0).or(ctx.ranks);
    let hosts: BTreeSet<&str> = devices.iter().filter_map(|d| d.hostname.as_deref()).collect();
    let nodes = (!hosts.is_empty()).then_some(hosts.len() as u32).or(ctx.nodes);
    let gpus_per_node = match (ranks, nodes) {
        (Some(r), Some(n)) if !hosts.is_empty() && n > 0 && r % n == 0 => Some(r / n),
        _ => ctx.gpus_per_node,
    };
    let mut base = Attributes::new();
    base.insert("source_format".into(), "nccl_tests_json".into());
    if let Some(code) = json_number(&report.nccl_version).filter(|c| *c >= 0.0 && *c < 1e9) {
        base.insert("nccl_version".into(), nccl_version(code as u32));
    }
    if let Some(g) = devices.iter().find_map(|d| d.device_info.clone()).or_else(|| ctx.gpu.clone()) {
        base.insert("gpu".into(), g);
    }
    let mut out = Parsed::default();
    let Some(ranks) = ranks else {
        return Err(ParseError::whole("the report lists no devices: the rank count is unknown; give ranks"));
    };
    for (i, r) in results.iter().enumerate() {
        let Some(size) = json_number(&r.size).filter(|s| *s >= 0.0 && s.fract() == 0.0 && *s < 1.8e19) else {
            out.rejected.push(Rejected { line: 1, reason: format!("results[{i}]: size is not a whole number") });
            continue;
        };
        let count = json_text(&r.count);
        let root = json_text(&r.root);
        let row = Row {
            size: size as u64,
            count: count.as_deref(),
            dtype: r.dtype.as_deref(),
            redop: r.redop.as_deref(),
            root: root.as_deref(),
        };
        for (in_place, perf) in [(false, &r.out_of_place), (true, &r.in_place)] {
            let Some(p) = perf else { continue };
            let perf = Perf {
                time: json_number(&p.time).or_else(|| json_number(&p.cpu_time)),
                algbw: json_number(&p.alg_bw),
                busbw: json_number(&p.bus_bw),
                wrong: json_number(&p.nwrong),
            };
            let shape = Shape { collective, ranks, nodes, gpus_per_node };
            match sample(shape, &row, &perf, in_place, &base) {
                Ok(s) => out.samples.push(Sample::Comm(s)),
                Err(reason) => out.rejected.push(Rejected { line: 1, reason: format!("results[{i}]: {reason}") }),
            }
        }
    }
    if out.samples.is_empty() && out.rejected.is_empty() {
        return Err(ParseError::whole("the nccl-tests report has no results"));
    }
    Ok(out)
}

#[cfg(test)]
mod tests;
