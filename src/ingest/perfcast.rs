//! perfcast's own sample format, in JSON lines or CSV: what the `collect/` micro-benchmark tool writes and what
//! any CI pipeline can produce without a profiler.
//!
//! **JSON lines** — one object per line (blank lines and lines starting with `#` are skipped):
//! ```text
//! {"op": "linear", "phase": "fwd", "dtype": "bf16", "gpu": "NVIDIA H100 80GB HBM3",
//!  "dims": {"B": 1, "M": 4096, "N": 4096, "K": 4096}, "time_us": 191.3, "attributes": {"torch": "2.4.0"}}
//! {"kind": "comm", "collective": "all_reduce", "bytes": 1048576, "ranks": 8, "nodes": 1, "gpus_per_node": 8,
//!  "time_us": 41.2, "dtype": "bf16", "attributes": {"nccl": "2.21.5"}}
//! ```
//! `kind` is `op` (default) or `comm`. Operator fields: `op` (class or S1 name, see [`super::op_class`]), `phase`
//! (`fwd`/`bwd`, default `fwd`), `dtype`, `gpu` (optional when the upload gives `gpu` or `system`), `dims` (names
//! per class, see [`crate::op`]), `time_us` (or `time_ms`), `attributes` (string → string|number|bool).
//!
//! **CSV** — a header row, then one sample per row. Columns by name: `op`, `phase`, `dtype`, `gpu`, `time_us` (or
//! `time_ms`), and one column per dim (`B`, `M`, `N`, `K`, `H`, `I`, `L`, `A`, `D`, `T`, `V`, `P`, `G`, `C`, `F`, `E`;
//! empty when unused).
//! Every other column becomes an attribute.
//!
//! A syntactically broken line makes the whole upload fail (422 naming line and column): a truncated file is not
//! silently half-accepted. Well-formed rows that cannot be used (unknown operator, missing dim, non-positive time,
//! no GPU) are rejected one by one with their line and reason.

use std::collections::BTreeMap;

use serde::Deserialize;

use super::{op_class, phase, utf8, Context, ParseError, Parsed};

use crate::hw::Precision;
use crate::op::Collective;
use crate::op::{place_dims, Phase};
use crate::samples::{Attributes, CommSample, OpSample, Rejected, Sample};

/// The dim columns the CSV variant recognizes (every name of [`OpClass::dim_names`]).
pub const DIM_COLUMNS: [&str; 16] = ["B", "M", "N", "K", "H", "I", "L", "A", "D", "T", "V", "P", "G", "C", "F", "E"];

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct OpLine {
    #[serde(default)]
    kind: Option<String>,
    op: String,
    #[serde(default)]
    phase: Option<String>,
    dtype: String,
    #[serde(default)]
    gpu: Option<String>,
    dims: BTreeMap<String, u64>,
    #[serde(default)]
    time_us: Option<f64>,
    #[serde(default)]
    time_ms: Option<f64>,
    #[serde(default)]
    attributes: BTreeMap<String, serde_json::Value>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CommLine {
    #[allow(dead_code)]
    kind: String,
    collective: Collective,
    bytes: u64,
    ranks: u32,
    #[serde(default)]
    nodes: Option<u32>,
    #[serde(default)]
    gpus_per_node: Option<u32>,
    time_us: f64,
    #[serde(default)]
    dtype: Option<String>,
    #[serde(default)]
    gpu: Option<String>,
    #[serde(default)]
    attributes: BTreeMap<String, serde_json::Value>,
}

fn attr_string(v: &serde_json::Value) -> String {
    match v {
        serde_json::Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

fn time_us(time_us: Option<f64>, time_ms: Option<f64>) -> Result<f64, String> {
    let t = match (time_us, time_ms) {
        (Some(us), None) => us,
        (None, Some(ms)) => ms * 1e3,
        (Some(_), Some(_)) => return Err("give time_us or time_ms, not both".into()),
        (None, None) => return Err("time_us is missing".into()),
    };
    if t.is_finite() && t > 0.0 {
        Ok(t)
    } else {
        Err(format!("time must be a positive number of µs, got {t}"))
    }
}

fn op_sample(
    op: &str,
    phase_name: Option<&str>,
    dtype: &str,
    gpu: Option<String>,
    dims: &BTreeMap<String, u64>,
    t: Result<f64, String>,
    attributes: Attributes,
    ctx: &Context,
) -> Result<OpSample, String> {
    let class = op_class(op).ok_or_else(|| format!("unknown operator {op:?}"))?;
    let phase = match phase_name {
        None => Phase::Fwd,
        Some(p) => phase(p).ok_or_else(|| format!("unknown phase {p:?} (fwd or bwd)"))?,
    };
    if class.is_serving() && phase == Phase::Bwd {
        return Err(format!("{class} is forward only (a serving operator)"));
    }
    let dtype = Precision::parse(dtype).ok_or_else(|| format!("unknown dtype {dtype:?}"))?;
    let gpu = gpu
        .filter(|g| !g.trim().is_empty())
        .or_else(|| ctx.gpu.clone())
        .ok_or("no gpu: give it in the row or as the upload's gpu/system parameter")?;
    let dims = place_dims(class, dims)?;
    Ok(OpSample { op: class, phase, dtype, gpu, dims, time_us: t?, attributes })
}

/// A line's `kind`, read without building the line's tree (other fields skipped).
#[derive(Deserialize)]
struct KindOnly<'a> {
    #[serde(default, borrow)]
    kind: Option<&'a str>,
}

fn json_line(line: &str, ctx: &Context) -> Result<Result<Sample, String>, serde_json::Error> {
    // Fast path (a well-formed row): the line straight into its row type, no `Value` tree in between — twice as
    // fast on the bundled measurements' 231,468 lines. Anything else (a syntax error, a row refused, a `kind` that
    // is not a plain string) takes the general path below, so its error and rejection reason stay the same.
    match serde_json::from_str::<KindOnly>(line) {
        Ok(k) if k.kind.is_none_or(|k| k == "op") => {
            let row = serde_json::from_str::<OpLine>(line).map(|l| {
                let attributes = l.attributes.iter().map(|(k, v)| (k.clone(), attr_string(v))).collect();
                let t = time_us(l.time_us, l.time_ms);
                op_sample(&l.op, l.phase.as_deref(), &l.dtype, l.gpu, &l.dims, t, attributes, ctx)
            });
            if let Ok(Ok(s)) = row {
                return Ok(Ok(Sample::Op(s)));
            }
        }
        Ok(k) if k.kind == Some("comm") => {
            if let Ok(Ok(s)) = serde_json::from_str::<CommLine>(line).map(|l| comm_sample(l, ctx)) {
                return Ok(Ok(Sample::Comm(s)));
            }
        }
        _ => {}
    }
    json_line_general(line, ctx)
}

/// The general path of [`json_line`]: the line as a `Value`, then its row type by `kind`.
fn json_line_general(line: &str, ctx: &Context) -> Result<Result<Sample, String>, serde_json::Error> {
    let value: serde_json::Value = serde_json::from_str(line)?;
    let kind = value.get("kind").and_then(|k| k.as_str()).unwrap_or("op").to_string();
    Ok(match kind.as_str() {
        "op" => match serde_json::from_value::<OpLine>(value) {
            Err(e) => Err(e.to_string()),
            Ok(l) => {
                let _ = l.kind;
                let attributes = l.attributes.iter().map(|(k, v)| (k.clone(), attr_string(v))).collect();
                op_sample(
                    &l.op,
                    l.phase.as_deref(),
                    &l.dtype,
                    l.gpu,
                    &l.dims,
                    time_us(l.time_us, l.time_ms),
                    attributes,
                    ctx,
                )
                .map(Sample::Op)
            }
        },
        "comm" => match serde_json::from_value::<CommLine>(value) {
            Err(e) => Err(e.to_string()),
            Ok(l) => comm_sample(l, ctx).map(Sample::Comm),
        },
        other => Err(format!("unknown kind {other:?} (op or comm)")),
    })
}

fn comm_sample(l: CommLine, ctx: &Context) -> Result<CommSample, String> {
    if !(l.time_us.is_finite() && l.time_us > 0.0) {
        return Err(format!("time_us must be positive, got {}", l.time_us));
    }
    if l.ranks == 0 {
        return Err("ranks must be at least 1".into());
    }
    let mut attributes: Attributes = l.attributes.iter().map(|(k, v)| (k.clone(), attr_string(v))).collect();
    if let Some(g) = l.gpu.or_else(|| ctx.gpu.clone()) {
        attributes.entry("gpu".into()).or_insert(g);
    }
    let algbw = l.bytes as f64 / (l.time_us * 1e3);
    Ok(CommSample {
        collective: l.collective,
        bytes: l.bytes,
        ranks: l.ranks,
        nodes: l.nodes,
        gpus_per_node: l.gpus_per_node,
        time_us: l.time_us,
        algbw_gbs: Some(algbw),
        busbw_gbs: Some(algbw * l.collective.busbw_factor(l.ranks)),
        dtype: l.dtype,
        attributes,
    })
}

/// Parses the JSON-lines variant (see the module doc).
pub fn parse_jsonl(bytes: &[u8], ctx: &Context) -> Result<Parsed, ParseError> {
    let text = utf8(bytes)?;
    let mut out = Parsed::default();
    for (i, line) in text.lines().enumerate() {
        let n = i as u64 + 1;
        let trimmed = line.trim();
        if trimmed.is_empty() || trimmed.starts_with('#') {
            continue;
        }
        match json_line(trimmed, ctx) {
            Err(e) => {
                return Err(ParseError { line: Some(n), column: Some(e.column() as u64), message: e.to_string() })
            }
            Ok(Ok(sample)) => out.samples.push(sample),
            Ok(Err(reason)) => out.rejected.push(Rejected { line: n, reason }),
        }
    }
    if out.samples.is_empty() && out.rejected.is_empty() {
        return Err(ParseError::whole("no samples: the file has no data lines"));
    }
    Ok(out)
}

/// Parses the CSV variant (see the module doc).
pub fn parse_csv(bytes: &[u8], ctx: &Context) -> Result<Parsed, ParseError> {
    let text = utf8(bytes)?;
    let mut reader = csv::ReaderBuilder::new().flexible(false).trim(csv::Trim::All).from_reader(text.as_bytes());
    let headers = reader.headers().map_err(|e| csv_error(&e))?.clone();
    let col = |name: &str| headers.iter().position(|h| h.eq_ignore_ascii_case(name));
    let (op_i, dtype_i) = match (col("op"), col("dtype")) {
        (Some(o), Some(d)) => (o, d),
        _ => return Err(ParseError::at(1, "the header needs the columns op and dtype (and time_us or time_ms)")),
    };
    let (phase_i, gpu_i, us_i, ms_i) = (col("phase"), col("gpu"), col("time_us"), col("time_ms"));
    if us_i.is_none() && ms_i.is_none() {
        return Err(ParseError::at(1, "the header needs a time_us or time_ms column"));
    }
    let dim_cols: Vec<(usize, &str)> = headers
        .iter()
        .enumerate()
        .filter_map(|(i, h)| DIM_COLUMNS.iter().find(|d| **d == h).map(|d| (i, *d)))
        .collect();
    let known: Vec<usize> = [Some(op_i), Some(dtype_i), phase_i, gpu_i, us_i, ms_i]
        .into_iter()
        .flatten()
        .chain(dim_cols.iter().map(|c| c.0))
        .collect();
    let mut out = Parsed::default();
    for record in reader.records() {
        let record = record.map_err(|e| csv_error(&e))?;
        let n = record.position().map(|p| p.line()).unwrap_or(0);
        let get = |i: Option<usize>| i.and_then(|i| record.get(i)).filter(|s| !s.is_empty());
        let mut dims = BTreeMap::new();
        let mut bad_dim = None;
        for (i, name) in &dim_cols {
            if let Some(v) = record.get(*i).filter(|s| !s.is_empty()) {
                match v.parse::<u64>() {
                    Ok(x) => {
                        dims.insert(name.to_string(), x);
                    }
                    Err(_) => bad_dim = Some(format!("dim {name} = {v:?} is not a whole number")),
                }
            }
        }
        let num = |s: Option<&str>| s.map(|v| v.parse::<f64>().map_err(|_| format!("time {v:?} is not a number")));
        let t = match (num(get(us_i)), num(get(ms_i))) {
            (Some(Err(e)), _) | (_, Some(Err(e))) => Err(e),
            (us, ms) => time_us(us.map(|r| r.unwrap_or(0.0)), ms.map(|r| r.unwrap_or(0.0))),
        };
        let attributes: Attributes = headers
            .iter()
            .enumerate()
            .filter(|(i, _)| !known.contains(i))
            .filter_map(|(i, h)| record.get(i).filter(|v| !v.is_empty()).map(|v| (h.to_string(), v.to_string())))
            .collect();
        let result = match bad_dim {
            Some(e) => Err(e),
            None => op_sample(
                get(Some(op_i)).unwrap_or(""),
                get(phase_i),
                get(Some(dtype_i)).unwrap_or(""),
                get(gpu_i).map(str::to_string),
                &dims,
                t,
                attributes,
                ctx,
            ),
        };
        match result {
            Ok(s) => out.samples.push(Sample::Op(s)),
            Err(reason) => out.rejected.push(Rejected { line: n, reason }),
        }
    }
    if out.samples.is_empty() && out.rejected.is_empty() {
        return Err(ParseError::whole("no samples: the file has a header but no rows"));
    }
    Ok(out)
}

/// A csv crate error as a [`ParseError`] with its line.
pub fn csv_error(e: &csv::Error) -> ParseError {
    let line = e.position().map(|p| p.line());
    let message = match e.kind() {
        csv::ErrorKind::UnequalLengths { expected_len, len, .. } => {
            format!("expected {expected_len} fields like the header, found {len}")
        }
        _ => e.to_string(),
    };
    ParseError { line, column: None, message }
}

/// First non-blank, non-comment line is a JSON object with an `op` or `kind` key.
pub fn looks_like_jsonl(head: &[u8]) -> bool {
    let text = String::from_utf8_lossy(head);
    text.lines().map(str::trim).find(|l| !l.is_empty() && !l.starts_with('#')).is_some_and(|l| {
        l.starts_with('{') && (l.contains("\"op\"") || l.contains("\"kind\"")) && !l.contains("\"traceEvents\"")
    })
}

/// The first line is a CSV header with `op`, `dtype` and a time column.
pub fn looks_like_csv(head: &[u8]) -> bool {
    let text = String::from_utf8_lossy(head);
    let Some(first) = text.lines().next() else { return false };
    let cols: Vec<String> = first.split(',').map(|c| c.trim().trim_matches('"').to_ascii_lowercase()).collect();
    let has = |c: &str| cols.iter().any(|x| x == c);
    has("op") && has("dtype") && (has("time_us") || has("time_ms"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::op::OpClass;

    fn ctx() -> Context {
        Context { gpu: Some("H100".into()), ..Default::default() }
    }

    /// The serving classes with their five named dims; they are forward only.
    #[test]
    fn serving_classes_take_five_named_dims() {
        let text = concat!(
            r#"{"op": "moe", "dtype": "fp8_block", "gpu": "H100", "dims": {"T": 16, "H": 7168, "F": 512, "E": 256, "K": 8}, "time_us": 90}"#,
            "\n",
            r#"{"op": "attention_decode", "phase": "bwd", "dtype": "bf16", "gpu": "H100", "dims": {"B": 1, "C": 2, "A": 8, "G": 1, "D": 64}, "time_us": 9}"#,
            "\n"
        );
        let p = parse_jsonl(text.as_bytes(), &Context::default()).unwrap();
        let Sample::Op(m) = &p.samples[0] else { panic!("{:?}", p.samples) };
        assert_eq!((m.op, m.dtype, m.dims), (OpClass::Moe, Precision::Fp8Block, [16, 7168, 512, 256, 8]));
        assert_eq!((p.rejected[0].line, p.rejected[0].reason.contains("forward only")), (2, true));
        let csv = "op,dtype,gpu,time_us,B,L,A,G,D\nattention_prefill,bf16,H100,50,2,1024,8,1,128\n";
        let p = parse_csv(csv.as_bytes(), &Context::default()).unwrap();
        let Sample::Op(a) = &p.samples[0] else { panic!("{:?}", p.rejected) };
        assert_eq!(a.dims, [2, 1024, 8, 1, 128]);
    }

    #[test]
    fn jsonl_ops_and_comm_with_rejections() {
        let input = br#"# perfcast samples
{"op": "linear", "phase": "fwd", "dtype": "bf16", "gpu": "NVIDIA H100 80GB HBM3", "dims": {"M": 4096, "N": 4096, "K": 4096}, "time_us": 191.3, "attributes": {"torch": "2.4.0", "warm": 10}}
{"op": "QK^T", "phase": "bwd", "dtype": "fp16", "dims": {"B": 64, "M": 2048, "N": 2048, "K": 128}, "time_ms": 0.5}

{"op": "conv2d", "dtype": "fp16", "dims": {"B": 1}, "time_us": 1}
{"op": "layernorm", "dtype": "fp16", "dims": {"B": 8}, "time_us": 1}
{"kind": "comm", "collective": "all_reduce", "bytes": 1000000, "ranks": 8, "nodes": 1, "gpus_per_node": 8, "time_us": 10, "dtype": "bf16"}
"#;
        let p = parse_jsonl(input, &ctx()).unwrap();
        assert_eq!(p.samples.len(), 3);
        let Sample::Op(a) = &p.samples[0] else { panic!() };
        assert_eq!((a.op, a.dims, a.time_us), (OpClass::Linear, [1, 4096, 4096, 4096, 0], 191.3));
        assert_eq!(a.attributes["warm"], "10");
        let Sample::Op(b) = &p.samples[1] else { panic!() };
        assert_eq!((b.op, b.phase, b.gpu.as_str(), b.time_us), (OpClass::Bmm, Phase::Bwd, "H100", 500.0));
        let Sample::Comm(c) = &p.samples[2] else { panic!() };
        // algbw = 1e6 B / 10 µs = 100 GB/s; busbw = 2·7/8 · 100 = 175 GB/s.
        assert_eq!((c.algbw_gbs, c.busbw_gbs), (Some(100.0), Some(175.0)));
        assert_eq!(p.rejected.len(), 2);
        assert_eq!(p.rejected[0].line, 5);
        assert!(p.rejected[0].reason.contains("conv2d"));
        assert_eq!(p.rejected[1].line, 6);
        assert!(p.rejected[1].reason.contains("dim H"), "{}", p.rejected[1].reason);
    }

    #[test]
    fn broken_json_fails_the_upload_at_its_line() {
        let e = parse_jsonl(
            b"{\"op\": \"linear\", \"dtype\": \"fp16\", \"dims\": {}, \"time_us\": 1}\n{\"op\": \"lin",
            &ctx(),
        )
        .unwrap_err();
        assert_eq!(e.line, Some(2));
        assert!(e.column.is_some());
    }

    #[test]
    fn csv_maps_columns_by_name() {
        let input = b"time_us,gpu,op,dtype,M,N,K,B,kernel\n12.5,L4,linear,fp32,128,256,64,,sgemm\n7,L4,gelu,fp16,,,,4,\n-1,L4,linear,fp32,1,1,1,,x\n";
        let p = parse_csv(input, &Context::default()).unwrap();
        assert_eq!(p.samples.len(), 1);
        let Sample::Op(s) = &p.samples[0] else { panic!() };
        assert_eq!((s.dims, s.time_us, s.attributes["kernel"].as_str()), ([1, 128, 256, 64, 0], 12.5, "sgemm"));
        assert_eq!(p.rejected.iter().map(|r| r.line).collect::<Vec<_>>(), vec![3, 4]);
        assert!(p.rejected[0].reason.contains("dim H"));
        assert!(p.rejected[1].reason.contains("positive"));
        assert_eq!(parse_csv(b"a,b\n1,2\n", &Context::default()).unwrap_err().line, Some(1));
        assert_eq!(parse_csv(b"op,dtype,time_us\nlinear,fp32\n", &Context::default()).unwrap_err().line, Some(2));
    }

    #[test]
    fn detection() {
        assert!(looks_like_jsonl(b"\n# c\n{\"op\": \"linear\"}"));
        assert!(!looks_like_jsonl(b"{\"traceEvents\": []}"));
        assert!(looks_like_csv(b"op,phase,dtype,gpu,time_us\n"));
        assert!(!looks_like_csv(b"OPName,Latency,Device\n"));
    }
}
