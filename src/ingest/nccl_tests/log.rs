//! The text log of nccl-tests: tests split at their start lines, each test's `#` header (version, ranks,
//! hosts, table columns) and its result rows, turned into samples; see the parent module doc for the format.

use std::collections::BTreeSet;

use super::{collective_of_test, nccl_version, sample, Perf, Row, Shape};
use crate::ingest::text::{number, whole};
use crate::ingest::{utf8, Context, ParseError, Parsed};
use crate::op::Collective;
use crate::samples::{Attributes, Rejected, Sample};

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
