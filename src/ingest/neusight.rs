//! NeuSight operator CSVs (Lee et al., ASPLOS 2025; DATA.md): `OPName, Latency, Device, …, B, M, N, K` for GEMMs
//! and `…, B, H[, large]` for vector ops. Latency is in **ms**.
//!
//! Mapping: `linear` → linear [B, M, N, K]; `bmm` → bmm [B, M, N, K]; `ln` → layernorm [B, H]; `softmax` →
//! softmax [B, H]; `gelu` → gelu [B, H]; `add`, `mul`, `div`, `pow` → elementwise [B, H, I = 2]; `addu`, `mulu`,
//! `divu`, `powu`, `relu`, `tanh` (one tensor operand) → elementwise [B, H, I = 1]. The element-wise op's name is
//! kept as the attribute `elementwise_op`. NeuSight measured forward passes in FP32 with TF32 disabled, so samples
//! are `fwd` and `fp32` unless the upload says otherwise. The other columns (library versions, kernel name, launch
//! configuration) become attributes.

use super::perfcast::csv_error;
use super::{utf8, Context, ParseError, Parsed};
use crate::hw::Precision;
use crate::op::{OpClass, Phase};
use crate::samples::{Attributes, OpSample, Rejected, Sample};

/// Columns that are not attributes.
const CORE: [&str; 8] = ["OPName", "Latency", "Device", "B", "M", "N", "K", "H"];

fn class_of(op: &str) -> Option<(OpClass, u64)> {
    Some(match op {
        "linear" => (OpClass::Linear, 0),
        "bmm" => (OpClass::Bmm, 0),
        "ln" | "layernorm" => (OpClass::LayerNorm, 0),
        "softmax" => (OpClass::Softmax, 0),
        "gelu" => (OpClass::Gelu, 0),
        "add" | "mul" | "div" | "pow" | "sub" => (OpClass::Elementwise, 2),
        "addu" | "mulu" | "divu" | "powu" | "subu" | "relu" | "tanh" | "sigmoid" | "exp" => (OpClass::Elementwise, 1),
        _ => return None,
    })
}

/// Parses one NeuSight CSV (see the module doc).
pub fn parse(bytes: &[u8], ctx: &Context) -> Result<Parsed, ParseError> {
    let text = utf8(bytes)?;
    let mut reader = csv::ReaderBuilder::new().trim(csv::Trim::All).from_reader(text.as_bytes());
    let headers = reader.headers().map_err(|e| csv_error(&e))?.clone();
    let col = |name: &str| headers.iter().position(|h| h == name);
    let (Some(op_i), Some(lat_i)) = (col("OPName"), col("Latency")) else {
        return Err(ParseError::at(1, "not a NeuSight CSV: the header needs OPName and Latency"));
    };
    let dev_i = col("Device");
    let dims_i: Vec<Option<usize>> = ["B", "M", "N", "K", "H"].iter().map(|n| col(n)).collect();
    let dtype = ctx.dtype.unwrap_or(Precision::Fp32);
    let mut out = Parsed::default();
    for record in reader.records() {
        let record = record.map_err(|e| csv_error(&e))?;
        let line = record.position().map(|p| p.line()).unwrap_or(0);
        let field = |i: Option<usize>| i.and_then(|i| record.get(i)).unwrap_or("");
        let reject = |out: &mut Parsed, reason: String| out.rejected.push(Rejected { line, reason });
        let op = field(Some(op_i));
        let Some((class, inputs)) = class_of(op) else {
            reject(&mut out, format!("unknown NeuSight operator {op:?}"));
            continue;
        };
        let latency_ms = match field(Some(lat_i)).parse::<f64>() {
            Ok(v) if v.is_finite() && v > 0.0 => v,
            _ => {
                reject(&mut out, format!("Latency {:?} is not a positive number of ms", field(Some(lat_i))));
                continue;
            }
        };
        let dim = |k: usize| field(dims_i[k]).parse::<u64>().ok();
        let dims = match class {
            OpClass::Linear | OpClass::Bmm => match (dim(0), dim(1), dim(2), dim(3)) {
                (Some(b), Some(m), Some(n), Some(k)) if m > 0 && n > 0 && k > 0 => [b.max(1), m, n, k],
                _ => {
                    reject(&mut out, "B, M, N, K must be positive whole numbers".into());
                    continue;
                }
            },
            _ => match (dim(0), dim(4)) {
                (Some(b), Some(h)) if b > 0 && h > 0 => [b, h, inputs, 0],
                _ => {
                    reject(&mut out, "B and H must be positive whole numbers".into());
                    continue;
                }
            },
        };
        let gpu = Some(field(dev_i).to_string()).filter(|g| !g.is_empty()).or_else(|| ctx.gpu.clone());
        let Some(gpu) = gpu else {
            reject(&mut out, "no Device column value and no gpu/system parameter".into());
            continue;
        };
        let mut attributes: Attributes = headers
            .iter()
            .zip(record.iter())
            .filter(|(h, v)| !CORE.contains(h) && !v.is_empty())
            .map(|(h, v)| (h.to_string(), v.to_string()))
            .collect();
        if class == OpClass::Elementwise {
            attributes.insert("elementwise_op".into(), op.to_string());
        }
        attributes.insert("source_format".into(), "neusight".into());
        out.samples.push(Sample::Op(OpSample {
            op: class,
            phase: Phase::Fwd,
            dtype,
            gpu,
            dims: crate::op::dims_from(&dims),
            time_us: latency_ms * 1e3,
            attributes,
        }));
    }
    if out.samples.is_empty() && out.rejected.is_empty() {
        return Err(ParseError::whole("no samples: the file has a header but no rows"));
    }
    Ok(out)
}

/// The header starts with NeuSight's `OPName,Latency`.
pub fn looks_like(head: &[u8]) -> bool {
    head.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(head).starts_with(b"OPName,Latency")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn linear_and_vector_rows_from_the_real_files() {
        // First rows of neusight/test/linear.csv.gz and test/ln.csv.gz (checked by eye).
        let linear = "OPName,Latency,Device,Torch Version,CUDNN Version,Kernel Name,Warps per SM,Blocks per SM,Grid x,Grid y,Grid z,Block x,Block y,Block z,CUDA Version,Kernels,B,M,N,K\n\
linear,1.1338346401850383,NVIDIA L4,p2.1.0,8902,ampere_sgemm_128x64_tn,66.206894,16.551723,20,16,3,128,1,1,cu121,;ampere_sgemm_128x64_tn,1,1024,2560,2560\n";
        let p = parse(linear.as_bytes(), &Context::default()).unwrap();
        let Sample::Op(s) = &p.samples[0] else { panic!() };
        assert_eq!((s.op, s.dtype, s.gpu.as_str()), (OpClass::Linear, Precision::Fp32, "NVIDIA L4"));
        assert_eq!(s.dims, [1, 1024, 2560, 2560, 0]);
        assert!((s.time_us - 1133.8346401850383).abs() < 1e-9);
        assert_eq!(s.attributes["Kernel Name"], "ampere_sgemm_128x64_tn");

        let ln = "OPName,Latency,Device,Torch Version,CUDNN Version,Kernel Name,Warps per SM,Blocks per SM,Grid x,Grid y,Grid z,Block x,Block y,Block z,CUDA Version,B,H,large\n\
ln,0.8186048150062561,Tesla V100-PCIE-32GB,p2.1.0,8902,\"void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<float, float>(int, float, float const*, float const*, float const*, float*, float*, float*)\",1638.4,409.6,32768,1,1,32,4,1,cu121,32768,1600,True\n\
addu,0.1,Tesla V100-PCIE-32GB,p2.1.0,8902,k,1,1,1,1,1,1,1,1,cu121,64,64,False\n\
conv,0.1,Tesla V100-PCIE-32GB,p2.1.0,8902,k,1,1,1,1,1,1,1,1,cu121,64,64,False\n";
        let p = parse(ln.as_bytes(), &Context::default()).unwrap();
        let Sample::Op(s) = &p.samples[0] else { panic!() };
        assert_eq!((s.op, s.dims), (OpClass::LayerNorm, [32768, 1600, 0, 0, 0]));
        let Sample::Op(u) = &p.samples[1] else { panic!() };
        assert_eq!(
            (u.op, u.dims, u.attributes["elementwise_op"].as_str()),
            (OpClass::Elementwise, [64, 64, 1, 0, 0], "addu")
        );
        assert_eq!(p.rejected, vec![Rejected { line: 4, reason: "unknown NeuSight operator \"conv\"".into() }]);
    }

    #[test]
    fn wrong_header_is_an_error_at_line_1() {
        assert_eq!(parse(b"a,b\n1,2\n", &Context::default()).unwrap_err().line, Some(1));
        assert!(looks_like(b"OPName,Latency,Device"));
    }
}
