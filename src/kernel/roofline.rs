//! Hierarchical roofline (Williams, Waterman & Patterson 2009; Yang, Kurth & Williams 2019/2020; MODELS.md §2.1).
//!
//! T ≥ max(W_pipe / P_pipe for every pipe, Q_L1 / B_L1, Q_L2 / B_L2, Q_DRAM / B_DRAM), with W the FLOPs on a
//! pipe, P its peak, Q the bytes moved at a level and B that level's bandwidth. Arithmetic intensity at a level
//! is AI = W_total / Q_level (FLOP/B). The pipes are independent functional units that run concurrently, so the
//! bound is the max over pipes, not their sum (Yang et al. draw one ceiling per pipe).
//!
//! Peaks: `fp64` and `fp32` are the datasheet vector rates, `fp16` the vector (non-tensor) FP16 rate of
//! [`machine::vector_fp16_tflops`], `tensor` the matrix-core rate of `tensor_precision` (default fp16; fp32
//! uses AMD's fp32 matrix rate where there is one). Bandwidths: DRAM the datasheet `memory_bandwidth_gbs`; L2 and
//! L1 the measured hierarchy when the spec has one, else the defaults of [`machine::l2_bandwidth_gbs`]
//! (2 × DRAM, **[rec]**) and [`machine::l1_bandwidth_gbs`] (128 B/cycle/SM × SMs × clock on NVIDIA, **[rec]**).
//!
//! Nsight Compute gives every input: W_SP = fadd + 2·ffma + fmul (`sm__sass_thread_inst_executed_op_*_pred_on`),
//! Q_L1 = `l1tex__t_bytes.sum`, Q_L2 = `lts__t_bytes.sum`, Q_DRAM = `dram__bytes.sum`. No launch overhead is added:
//! this is the kernel body's bound.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::machine::{self, ParamSource, Sourced};
use super::{non_negative, KernelModelError};
use crate::hw::{GpuSpec, Precision};

/// A kernel's work: FLOPs per pipe and bytes per memory level (all counts over the whole kernel, ≥ 0; a level
/// or pipe left at 0 does not bound).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"flops_tensor": 1.374e11, "tensor_precision": "bf16", "dram_bytes": 1.0066e8,
    "l2_bytes": 4.0e8}))]
pub struct RooflineWork {
    /// FP64 FLOPs on the vector pipe.
    #[serde(default)]
    pub flops_fp64: f64,
    /// FP32 FLOPs on the FMA pipe (fadd + fmul + 2·ffma).
    #[serde(default)]
    pub flops_fp32: f64,
    /// FP16 FLOPs on the vector pipe (half2 on CUDA cores, not tensor cores).
    #[serde(default)]
    pub flops_fp16: f64,
    /// FLOPs on tensor (matrix) cores.
    #[serde(default)]
    pub flops_tensor: f64,
    /// Precision of the tensor-core work; `null` = fp16.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tensor_precision: Option<Precision>,
    /// Bytes through L1/TEX.
    #[serde(default)]
    pub l1_bytes: f64,
    /// Bytes through L2.
    #[serde(default)]
    pub l2_bytes: f64,
    /// Bytes read and written in DRAM (HBM/GDDR).
    #[serde(default)]
    pub dram_bytes: f64,
}

/// A compute pipe or a memory level.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum Resource {
    Tensor,
    Fp64,
    Fp32,
    Fp16,
    L1,
    L2,
    Dram,
}

impl Resource {
    /// True for memory levels.
    pub fn is_memory(self) -> bool {
        matches!(self, Resource::L1 | Resource::L2 | Resource::Dram)
    }

    /// The name used in verdicts: `tensor`, `fp32`, …, `L1`, `L2`, `DRAM`.
    pub fn label(self) -> &'static str {
        match self {
            Resource::Tensor => "tensor",
            Resource::Fp64 => "fp64",
            Resource::Fp32 => "fp32",
            Resource::Fp16 => "fp16",
            Resource::L1 => "L1",
            Resource::L2 => "L2",
            Resource::Dram => "DRAM",
        }
    }
}

/// One ceiling of the roofline.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct RooflineTerm {
    pub resource: Resource,
    /// FLOPs (compute pipes) or bytes (memory levels).
    pub amount: f64,
    /// Peak FLOP/s (compute) or bandwidth B/s (memory).
    pub peak_per_s: f64,
    /// Where the peak comes from.
    pub peak_source: ParamSource,
    /// amount / peak, µs: this ceiling's lower bound on the kernel's time.
    pub time_us: f64,
    /// Memory levels: total FLOPs / bytes at this level, FLOP/B (`null` for compute pipes).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub arithmetic_intensity: Option<f64>,
}

/// The hierarchical-roofline answer.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct RooflineEstimate {
    /// Lower bound on the kernel's time: the largest ceiling, µs (0 when the work is empty).
    pub time_us: f64,
    /// The binding ceiling; `null` when there is no work.
    pub binding: Option<Resource>,
    /// `"compute-bound: tensor"`, `"memory-bound: DRAM"`, or `"no work"`.
    pub verdict: String,
    /// Σ FLOPs over pipes.
    pub total_flops: f64,
    /// Total FLOPs / time_us: the attainable rate at the bound, TFLOP/s (0 without work).
    pub attainable_tflops: f64,
    /// One term per pipe with work.
    pub compute: Vec<RooflineTerm>,
    /// One term per memory level with bytes.
    pub memory: Vec<RooflineTerm>,
}

impl RooflineEstimate {
    /// The term of `r`, if it has work.
    pub fn term(&self, r: Resource) -> Option<&RooflineTerm> {
        self.compute.iter().chain(&self.memory).find(|t| t.resource == r)
    }
}

/// Evaluates the hierarchical roofline of `work` on `gpu`.
///
/// Errors: a negative or non-finite count (field named as in [`RooflineWork`]); tensor FLOPs in a precision the
/// GPU has no matrix path for (`tensor_precision`).
pub fn estimate(work: &RooflineWork, gpu: &GpuSpec) -> Result<RooflineEstimate, KernelModelError> {
    let flops = [
        (Resource::Tensor, non_negative("flops_tensor", work.flops_tensor)?),
        (Resource::Fp64, non_negative("flops_fp64", work.flops_fp64)?),
        (Resource::Fp32, non_negative("flops_fp32", work.flops_fp32)?),
        (Resource::Fp16, non_negative("flops_fp16", work.flops_fp16)?),
    ];
    let bytes = [
        (Resource::L1, non_negative("l1_bytes", work.l1_bytes)?),
        (Resource::L2, non_negative("l2_bytes", work.l2_bytes)?),
        (Resource::Dram, non_negative("dram_bytes", work.dram_bytes)?),
    ];
    let total_flops: f64 = flops.iter().map(|f| f.1).sum();
    let mut compute = Vec::new();
    for (r, w) in flops.into_iter().filter(|f| f.1 > 0.0) {
        let peak_tflops = match r {
            Resource::Tensor => {
                let p = work.tensor_precision.unwrap_or(Precision::Fp16);
                gpu.peak_tflops.matmul(p).ok_or_else(|| {
                    KernelModelError::new(
                        "tensor_precision",
                        format!("{} has no {p} tensor/matrix path (its peak_tflops.{p} is null)", gpu.name),
                    )
                })?
            }
            Resource::Fp64 => gpu.peak_tflops.fp64,
            Resource::Fp32 => gpu.peak_tflops.fp32,
            _ => machine::vector_fp16_tflops(gpu),
        };
        let peak = peak_tflops * 1e12;
        if !(peak.is_finite() && peak > 0.0) {
            return Err(KernelModelError::new(
                format!("flops_{}", r.label()),
                format!("{} has no {} peak", gpu.name, r.label()),
            ));
        }
        compute.push(RooflineTerm {
            resource: r,
            amount: w,
            peak_per_s: peak,
            peak_source: ParamSource::Datasheet,
            time_us: w / peak * 1e6,
            arithmetic_intensity: None,
        });
    }
    let mut memory = Vec::new();
    for (r, q) in bytes.into_iter().filter(|b| b.1 > 0.0) {
        let bw: Sourced = match r {
            Resource::L1 => machine::l1_bandwidth_gbs(gpu),
            Resource::L2 => machine::l2_bandwidth_gbs(gpu),
            _ => machine::dram_bandwidth_gbs(gpu),
        };
        let peak = bw.value * 1e9;
        memory.push(RooflineTerm {
            resource: r,
            amount: q,
            peak_per_s: peak,
            peak_source: bw.source,
            time_us: q / peak * 1e6,
            arithmetic_intensity: Some(total_flops / q),
        });
    }
    let binding = compute.iter().chain(&memory).max_by(|a, b| a.time_us.total_cmp(&b.time_us));
    let (time_us, binding, verdict) = match binding {
        None => (0.0, None, "no work".to_string()),
        Some(t) => {
            let kind = if t.resource.is_memory() { "memory-bound" } else { "compute-bound" };
            (t.time_us, Some(t.resource), format!("{kind}: {}", t.resource.label()))
        }
    };
    let attainable_tflops = if time_us > 0.0 { total_flops / (time_us * 1e-6) / 1e12 } else { 0.0 };
    Ok(RooflineEstimate { time_us, binding, verdict, total_flops, attainable_tflops, compute, memory })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hw::{lookup, MemoryHierarchy, MemoryLevel};

    fn a100() -> GpuSpec {
        lookup("A100-SXM4-40GB").unwrap().spec.clone()
    }

    #[test]
    fn gemm_is_compute_bound_on_tensor_cores() {
        // 4096³ bf16 GEMM: W = 2·4096³ = 137,438,953,472 FLOP at 312e12 → 440.51 µs;
        // DRAM 3·4096²·2 B = 100,663,296 B at 1555e9 → 64.73 µs; AI_DRAM = 1365.33 FLOP/B.
        let w = RooflineWork {
            flops_tensor: 137_438_953_472.0,
            tensor_precision: Some(Precision::Bf16),
            dram_bytes: 100_663_296.0,
            ..Default::default()
        };
        let r = estimate(&w, &a100()).unwrap();
        assert_eq!(r.binding, Some(Resource::Tensor));
        assert_eq!(r.verdict, "compute-bound: tensor");
        assert!((r.time_us - 440.509).abs() < 1e-3, "{}", r.time_us);
        let dram = r.term(Resource::Dram).unwrap();
        assert!((dram.time_us - 64.735).abs() < 1e-3, "{}", dram.time_us);
        assert!((dram.arithmetic_intensity.unwrap() - 1365.333).abs() < 1e-3);
        // Attainable = the tensor peak when tensor-bound.
        assert!((r.attainable_tflops - 312.0).abs() < 1e-9);
        assert!(r.term(Resource::L2).is_none());
    }

    #[test]
    fn streaming_kernel_is_memory_bound_at_the_right_level() {
        // fp32 axpy over 2^26 elements: 2 FLOP/elem = 134,217,728 FLOP at 19.5e12 → 6.883 µs;
        // DRAM 12 B/elem = 805,306,368 B at 1555e9 → 517.88 µs; L2 same bytes at 2 × 1555 → 258.94 µs;
        // L1 same bytes at 19,491.84e9 → 41.32 µs. AI_DRAM = 1/6.
        let w = RooflineWork {
            flops_fp32: 134_217_728.0,
            l1_bytes: 805_306_368.0,
            l2_bytes: 805_306_368.0,
            dram_bytes: 805_306_368.0,
            ..Default::default()
        };
        let r = estimate(&w, &a100()).unwrap();
        assert_eq!(r.verdict, "memory-bound: DRAM");
        assert!((r.time_us - 517.882).abs() < 1e-3);
        assert!((r.term(Resource::L2).unwrap().time_us - 258.941).abs() < 1e-3);
        assert_eq!(r.term(Resource::L2).unwrap().peak_source, ParamSource::Default);
        assert!((r.term(Resource::L1).unwrap().time_us - 41.315).abs() < 1e-3);
        assert!((r.term(Resource::Fp32).unwrap().time_us - 6.883).abs() < 1e-3);
        assert!((r.term(Resource::Dram).unwrap().arithmetic_intensity.unwrap() - 1.0 / 6.0).abs() < 1e-12);
    }

    #[test]
    fn cache_resident_kernel_binds_at_l2_with_measured_bandwidth() {
        // Measured L2 of 2500 GB/s: 1e9 L2 bytes → 400 µs; 1e8 DRAM bytes → 64.31 µs; verdict L2.
        let mut g = a100();
        g.hierarchy = Some(MemoryHierarchy {
            l2: Some(MemoryLevel { read_bandwidth_gbs: Some(2500.0), ..Default::default() }),
            ..Default::default()
        });
        let w = RooflineWork { l2_bytes: 1e9, dram_bytes: 1e8, flops_fp16: 1e9, ..Default::default() };
        let r = estimate(&w, &g).unwrap();
        assert_eq!(r.verdict, "memory-bound: L2");
        assert!((r.time_us - 400.0).abs() < 1e-9);
        assert_eq!(r.term(Resource::L2).unwrap().peak_source, ParamSource::Hierarchy);
        // FP16 vector on GA100: 1e9 / 78e12 = 12.82 µs.
        assert!((r.term(Resource::Fp16).unwrap().time_us - 12.8205).abs() < 1e-3);
    }

    #[test]
    fn empty_and_invalid_work() {
        let r = estimate(&RooflineWork::default(), &a100()).unwrap();
        assert_eq!((r.time_us, r.binding, r.verdict.as_str()), (0.0, None, "no work"));
        let e = estimate(&RooflineWork { dram_bytes: -1.0, ..Default::default() }, &a100()).unwrap_err();
        assert_eq!(e.field, "dram_bytes");
        let v100 = lookup("V100-SXM2").unwrap().spec.clone();
        let w = RooflineWork { flops_tensor: 1.0, tensor_precision: Some(Precision::Bf16), ..Default::default() };
        assert_eq!(estimate(&w, &v100).unwrap_err().field, "tensor_precision");
    }

    #[test]
    fn request_json_round_trips() {
        let w: RooflineWork =
            serde_json::from_str(r#"{"flops_tensor": 2e9, "tensor_precision": "fp8", "dram_bytes": 1e7}"#).unwrap();
        assert_eq!(w.tensor_precision, Some(Precision::Fp8));
        assert!(serde_json::from_str::<RooflineWork>(r#"{"flops": 1}"#).is_err());
        // H100 fp8: 2e9 / 1979e12 = 1.0106 µs; DRAM 1e7 / 3350e9 = 2.985 µs → DRAM binds.
        let r = estimate(&w, &lookup("H100").unwrap().spec).unwrap();
        assert_eq!(r.binding, Some(Resource::Dram));
        let json = serde_json::to_value(&r).unwrap();
        assert_eq!(json["binding"], "dram");
        assert_eq!(json["memory"][0]["peak_source"], "datasheet");
    }
}
