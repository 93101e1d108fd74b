//! The `-J` JSON report of nccl-tests: the same samples as the text log, read from `results[]`; see the parent
//! module doc for the keys read.

use std::collections::BTreeSet;

use serde::Deserialize;
use serde_json::Value;

use super::{collective_of_test, nccl_version, sample, Perf, Row, Shape};
use crate::ingest::text::number;
use crate::ingest::{Context, ParseError, Parsed};
use crate::samples::{Attributes, Rejected, Sample};

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
