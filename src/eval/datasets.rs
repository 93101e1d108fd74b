//! Readers for the measured datasets of `../shared/data` that are not profiler formats (DeepBench's GEMM table,
//! XLA's matmul performance table): rows → perfcast operator samples. Which files are train and which are test
//! follows DATA.md; nothing here decides it.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::Path;

use crate::hw::Precision;
use crate::op::{OpClass, Phase};
use crate::samples::{Attributes, OpSample};

/// Reads a file, gunzipping `.gz`.
pub fn read(path: &Path) -> Result<Vec<u8>, String> {
    let bytes = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
    if path.extension().is_some_and(|e| e == "gz") {
        let mut out = Vec::new();
        flate2::read::GzDecoder::new(&bytes[..])
            .read_to_end(&mut out)
            .map_err(|e| format!("{}: {e}", path.display()))?;
        Ok(out)
    } else {
        Ok(bytes)
    }
}

fn csv_rows(text: &str) -> Result<(csv::StringRecord, Vec<csv::StringRecord>), String> {
    let body: String = text.lines().filter(|l| !l.starts_with('#')).collect::<Vec<_>>().join("\n");
    let mut r = csv::ReaderBuilder::new().flexible(true).from_reader(body.as_bytes());
    let headers = r.headers().map_err(|e| e.to_string())?.clone();
    let rows = r.records().collect::<Result<Vec<_>, _>>().map_err(|e| e.to_string())?;
    Ok((headers, rows))
}

/// DeepBench dense GEMM results (DATA.md: training data for older GPUs): `Float` → fp32, `16 bit inputs…` →
/// fp16; int8 inference rows are skipped. Time is in ms. `M, N, K` are DeepBench's (C[M,N] = A[M,K]·B[K,N]).
pub fn deepbench_gemm(path: &Path) -> Result<Vec<OpSample>, String> {
    let bytes = read(path)?;
    let text = String::from_utf8_lossy(&bytes);
    let (h, rows) = csv_rows(&text)?;
    let col = |n: &str| h.iter().position(|c| c == n).ok_or(format!("deepbench: no column {n}"));
    let (dev, prec, sec, m, n, k, t) =
        (col("device")?, col("precision")?, col("section")?, col("M")?, col("N")?, col("K")?, col("Time (msec)")?);
    let mut out = Vec::new();
    for r in rows {
        let get = |i: usize| r.get(i).unwrap_or("").trim();
        if get(sec) != "Dense Matrix Multiplication" {
            continue;
        }
        let dtype = match get(prec) {
            "Float" => Precision::Fp32,
            p if p.starts_with("16 bit inputs") => Precision::Fp16,
            _ => continue,
        };
        let (Ok(m), Ok(n), Ok(k), Ok(ms)) =
            (get(m).parse::<u64>(), get(n).parse::<u64>(), get(k).parse::<u64>(), get(t).parse::<f64>())
        else {
            continue;
        };
        if get(dev).is_empty() || ms <= 0.0 {
            continue;
        }
        out.push(OpSample {
            op: OpClass::Linear,
            phase: Phase::Fwd,
            dtype,
            gpu: get(dev).to_string(),
            dims: [1, m, n, k, 0],
            time_us: ms * 1e3,
            attributes: Attributes::from([("source_format".into(), "deepbench".into())]),
        });
    }
    Ok(out)
}

/// XLA's default matmul performance table (DATA.md): time = 2·b·m·n·k / flops_per_s. Only `sm_90` rows are kept,
/// read as H100-SXM5-80GB (the table does not name the SKU; its bf16 rate, up to 780 TFLOP/s, fits the SXM
/// part). `f32xf32->f32` reaches 403 TFLOP/s, far above the H100's 67 TFLOP/s FP32 peak: XLA runs f32 dots on
/// TF32 tensor cores by default, so those rows are tf32. fp8 rows are fp8; bf16 rows bf16. b > 1 → bmm.
pub fn xla_matmul(path: &Path) -> Result<Vec<OpSample>, String> {
    let bytes = read(path)?;
    let text = String::from_utf8_lossy(&bytes);
    let (h, rows) = csv_rows(&text)?;
    let col = |n: &str| h.iter().position(|c| c == n).ok_or(format!("xla: no column {n}"));
    let (arch, b, m, n, k, dt, f) =
        (col("arch_key")?, col("b")?, col("m")?, col("n")?, col("k")?, col("dtype")?, col("flops_per_s")?);
    let mut out = Vec::new();
    for r in rows {
        let get = |i: usize| r.get(i).unwrap_or("").trim();
        if get(arch) != "sm_90" {
            continue;
        }
        let dtype = match get(dt) {
            "bf16xbf16->bf16" => Precision::Bf16,
            "f32xf32->f32" => Precision::Tf32,
            d if d.starts_with("f8") => Precision::Fp8,
            _ => continue,
        };
        let nums: Vec<f64> = [b, m, n, k, f].iter().filter_map(|&i| get(i).parse::<f64>().ok()).collect();
        let [b, m, n, k, flops] = nums[..] else { continue };
        if flops <= 0.0 {
            continue;
        }
        let time_us = 2.0 * b * m * n * k / flops * 1e6;
        let class = if b > 1.0 { OpClass::Bmm } else { OpClass::Linear };
        out.push(OpSample {
            op: class,
            phase: Phase::Fwd,
            dtype,
            gpu: "H100-SXM5-80GB".into(),
            dims: [b as u64, m as u64, n as u64, k as u64, 0],
            time_us,
            attributes: Attributes::from([("source_format".into(), "xla_matmul_perf_table".into())]),
        });
    }
    Ok(out)
}

/// Serializes operator samples as perfcast JSON lines (what the upload accepts).
pub fn to_jsonl(samples: &[OpSample]) -> Vec<u8> {
    let mut out = Vec::new();
    for s in samples {
        let dims: BTreeMap<&str, u64> =
            s.op.dim_names().iter().zip(s.dims).filter(|(_, v)| *v > 0).map(|(n, v)| (*n, v)).collect();
        let line = serde_json::json!({"op": s.op, "phase": s.phase, "dtype": s.dtype, "gpu": s.gpu, "dims": dims,
            "time_us": s.time_us, "attributes": s.attributes});
        out.extend_from_slice(line.to_string().as_bytes());
        out.push(b'\n');
    }
    out
}
