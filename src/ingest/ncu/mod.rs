//! Nsight Compute CSV exports (`ncu --csv`), both pages:
//!
//! - `--page details` (the default): long format, one row per (launch, metric) with `"ID", …, "Kernel Name", …,
//!   "Section Name", "Metric Name", "Metric Unit", "Metric Value"`. Recent versions add `Block Size`, `Grid Size`,
//!   `Device`, `CC` and rule columns (rule rows have no metric and are skipped); ncu 2020 has `Kernel Time` (a
//!   wall-clock string) and no launch columns. Section rows use readable names (`Duration`, `Registers Per
//!   Thread`, `Achieved Occupancy`); `--metrics` rows use metric names (`dram__bytes.sum`).
//! - `--page raw`: wide format, a header of identity columns then one column per metric, a second row of units,
//!   then one row per launch.
//!
//! Captured stdout is accepted: everything before the header line starting with `"ID",` (`==PROF==` lines,
//! program output) is skipped, and later rows whose `ID` is not a launch number are ignored. Values may carry
//! thousands separators (`"1,553,918.10"`) or be `n/a`; every value is scaled by its unit (ncu's prefixes are SI:
//! `Kbyte` = 1000 bytes; `nsecond`/`usecond`/`msecond`/`ns`; `Khz`, `Mhz`, `Ghz`; `cycle/second`, …). Instanced
//! values (`"32.00; 32.00; …"`) are skipped.
//!
//! One [`KernelSample`](crate::samples::KernelSample) per launch: how a launch's columns become its sample is
//! [`launch`]'s; how a unit scales a value, [`units`]'s. This module reads the CSV: the header, its columns, both
//! layouts and the rows that are launches.

mod launch;
#[cfg(test)]
mod tests;
mod units;

use std::collections::HashMap;

use super::text::{Lines, Tally};
use super::{utf8, Context, ParseError, Parsed};
use crate::samples::Sample;
use launch::Launch;

/// Identity columns: everything else in the raw page is a metric.
const IDENTITY: [&str; 15] = [
    "ID",
    "Process ID",
    "Process Name",
    "Host Name",
    "Kernel Name",
    "Kernel Time",
    "Context",
    "Stream",
    "Block Size",
    "Grid Size",
    "Device",
    "CC",
    "Section Name",
    "Metric Name",
    "Metric Unit",
];

/// Parses an Nsight Compute CSV export (see the module doc).
///
/// Errors: no line starting with `"ID",`; a header without `Kernel Name`; broken CSV quoting (with its line).
pub fn parse(bytes: &[u8], ctx: &Context) -> Result<Parsed, ParseError> {
    let text = utf8(bytes)?;
    let (offset, header_line) = header_start(text).ok_or_else(|| {
        ParseError::whole("not an Nsight Compute CSV: no header line starting with \"ID\", (run ncu with --csv)")
    })?;
    let body = text.as_bytes().get(offset..).unwrap_or(&[]);
    let mut lines = Lines::new(body);
    let mut reader = csv::ReaderBuilder::new().flexible(true).has_headers(true).from_reader(body);
    let headers = reader.headers().map_err(|e| shifted(lines.error(&e), header_line))?.clone();
    let col = |name: &str| headers.iter().position(|h| h.trim() == name);
    let Some(id_i) = col("ID") else { return Err(ParseError::at(header_line, "the header has no ID column")) };
    let Some(name_i) = col("Kernel Name") else {
        return Err(ParseError::at(header_line, "the header has no \"Kernel Name\" column"));
    };
    let cols = Columns {
        id: id_i,
        name: name_i,
        identity: IDENTITY.iter().filter_map(|n| col(n).map(|i| (*n, i))).collect(),
        metric_name: col("Metric Name"),
        metric_unit: col("Metric Unit"),
        metric_value: col("Metric Value"),
    };
    let mut launches: Vec<Launch> = Vec::new();
    if let (Some(mn), Some(mv)) = (cols.metric_name, cols.metric_value) {
        // Long (details) layout: rows grouped by ID.
        let mut index: HashMap<String, usize> = HashMap::new();
        for record in reader.records() {
            let record = record.map_err(|e| shifted(lines.error(&e), header_line))?;
            let line = lines.of(&record).saturating_add(header_line - 1);
            let Some(id) = launch_id(&record, cols.id) else { continue };
            let slot = match index.get(id) {
                Some(&i) => i,
                None => {
                    index.insert(id.to_string(), launches.len());
                    launches.push(Launch::new(&record, &cols, line));
                    launches.len() - 1
                }
            };
            let name = record.get(mn).unwrap_or("").trim();
            if name.is_empty() {
                continue; // a rule row (SpeedOfLight, LaunchStats, …): no metric
            }
            let unit = cols.metric_unit.and_then(|i| record.get(i)).unwrap_or("");
            let value = record.get(mv).unwrap_or("");
            launches[slot].add(name, unit, value);
        }
    } else {
        // Wide (raw) layout: a units row, then one row per launch.
        let mut units: Option<csv::StringRecord> = None;
        for record in reader.records() {
            let record = record.map_err(|e| shifted(lines.error(&e), header_line))?;
            let line = lines.of(&record).saturating_add(header_line - 1);
            let Some(_) = launch_id(&record, cols.id) else {
                if units.is_none() && record.get(cols.id).is_some_and(|v| v.trim().is_empty()) {
                    units = Some(record);
                }
                continue;
            };
            let mut launch = Launch::new(&record, &cols, line);
            for (i, name) in headers.iter().enumerate() {
                let name = name.trim();
                if cols.is_identity(i) || name.is_empty() {
                    continue;
                }
                let unit = units.as_ref().and_then(|u| u.get(i)).unwrap_or("");
                launch.add(name, unit, record.get(i).unwrap_or(""));
            }
            launches.push(launch);
        }
    }
    if launches.is_empty() {
        return Err(ParseError::at(header_line, "the Nsight Compute CSV has a header but no kernel launches"));
    }
    let mut out = Parsed::default();
    let mut tally = Tally::default();
    for launch in launches {
        match launch.into_sample(ctx) {
            Ok(s) => out.samples.push(Sample::Kernel(s)),
            Err((line, reason)) => tally.add(line, reason),
        }
    }
    out.rejected = tally.into_rejected();
    Ok(out)
}

/// The capture contains an ncu CSV header (`"ID","Process ID",…`) on a line of its own.
pub fn looks_like(head: &[u8]) -> bool {
    let text = String::from_utf8_lossy(head);
    text.lines().any(|l| l.starts_with("\"ID\",\"Process ID\""))
}

/// Byte offset and 1-based line of the header line.
fn header_start(text: &str) -> Option<(usize, u64)> {
    let mut offset = 0;
    for (i, line) in text.split_inclusive('\n').enumerate() {
        if line.trim_start_matches('\u{feff}').starts_with("\"ID\",") {
            return Some((offset, i as u64 + 1));
        }
        offset += line.len();
    }
    None
}

fn shifted(mut e: ParseError, header_line: u64) -> ParseError {
    e.line = e.line.map(|l| l.saturating_add(header_line - 1));
    e
}

/// The launch ID of a data row; `None` for rows that are not launches (units row, trailing program output).
fn launch_id(record: &csv::StringRecord, id_i: usize) -> Option<&str> {
    let id = record.get(id_i)?.trim();
    (!id.is_empty() && id.bytes().all(|b| b.is_ascii_digit())).then_some(id)
}

struct Columns {
    id: usize,
    name: usize,
    identity: Vec<(&'static str, usize)>,
    metric_name: Option<usize>,
    metric_unit: Option<usize>,
    metric_value: Option<usize>,
}

impl Columns {
    fn is_identity(&self, i: usize) -> bool {
        self.identity.iter().any(|(_, c)| *c == i)
    }
}
