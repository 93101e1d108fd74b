//! One GPU's description: the hardware numbers every analytic model reads.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// Numeric precision of a computation. Decides which peak (tensor cores or not) and how many bytes per element.
///
/// `tf32` is fp32 storage computed on tensor cores (Ampere and later); `fp8` is E4M3/E5M2 on Hopper/Ada tensor
/// cores, stored as 1 byte, with one scale per tensor. `fp8_block` is FP8 E4M3 with DeepSeek-style block scales
/// (128×128 weight blocks, 1×128 activation groups, fp32 scales) on the same FP8 tensor cores. `nvfp4` is NVIDIA's
/// 4-bit E2M1 format with one FP8 (E4M3) scale per 16 elements (W4A4), on Blackwell's FP4 tensor cores.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum Precision {
    Fp64,
    Fp32,
    Tf32,
    Fp16,
    Bf16,
    Fp8,
    #[serde(rename = "fp8_block")]
    Fp8Block,
    /// NVFP4 (E2M1 elements, one FP8 scale per 16); `fp4` is accepted for it.
    #[serde(alias = "fp4")]
    Nvfp4,
}

impl Precision {
    /// Every precision (the first six in the order of [`PeakTflops`]'s fields; `fp8_block` runs at the `fp8`
    /// peak, `nvfp4` at the `fp4` peak).
    pub const ALL: [Precision; 8] = [
        Precision::Fp64,
        Precision::Fp32,
        Precision::Tf32,
        Precision::Fp16,
        Precision::Bf16,
        Precision::Fp8,
        Precision::Fp8Block,
        Precision::Nvfp4,
    ];

    /// Bytes per stored element (tf32 is stored as fp32).
    ///
    /// `fp8_block` counts 1: its fp32 scales add 4 B per 128×128 weight block (0.02 %) and 4 B per 128
    /// activations (3 %), left to the learned correction. `nvfp4` counts its scales: 0.5 B of data plus one 1-byte
    /// scale per 16 elements = 0.5625 B.
    pub fn bytes(self) -> f64 {
        match self {
            Precision::Fp64 => 8.0,
            Precision::Fp32 | Precision::Tf32 => 4.0,
            Precision::Fp16 | Precision::Bf16 => 2.0,
            Precision::Fp8 | Precision::Fp8Block => 1.0,
            Precision::Nvfp4 => 0.5 + 1.0 / 16.0,
        }
    }

    /// The [`PeakTflops`] field whose peak this precision runs at (`fp8_block` → `fp8`, `nvfp4` → `fp4`).
    pub fn peak_field(self) -> &'static str {
        match self {
            Precision::Fp8Block => "fp8",
            Precision::Nvfp4 => "fp4",
            other => other.as_str(),
        }
    }

    /// Lower-case name as used in the API (`"fp16"`).
    pub fn as_str(self) -> &'static str {
        match self {
            Precision::Fp64 => "fp64",
            Precision::Fp32 => "fp32",
            Precision::Tf32 => "tf32",
            Precision::Fp16 => "fp16",
            Precision::Bf16 => "bf16",
            Precision::Fp8 => "fp8",
            Precision::Fp8Block => "fp8_block",
            Precision::Nvfp4 => "nvfp4",
        }
    }

    /// Parses the API name (case-insensitive; also accepts `float16`, `half`, `bfloat16`, `float32`, `float`,
    /// `double`, `float64`, `fp8-block`, `fp4`). `None` for anything else.
    pub fn parse(s: &str) -> Option<Precision> {
        match s.trim().to_ascii_lowercase().as_str() {
            "fp64" | "float64" | "double" | "f64" => Some(Precision::Fp64),
            "fp32" | "float32" | "float" | "f32" => Some(Precision::Fp32),
            "tf32" => Some(Precision::Tf32),
            "fp16" | "float16" | "half" | "f16" => Some(Precision::Fp16),
            "bf16" | "bfloat16" => Some(Precision::Bf16),
            "fp8" | "float8" | "e4m3" | "e5m2" | "f8" => Some(Precision::Fp8),
            "fp8_block" | "fp8-block" | "fp8block" => Some(Precision::Fp8Block),
            "nvfp4" | "fp4" | "nv_fp4" => Some(Precision::Nvfp4),
            _ => None,
        }
    }
}

impl std::fmt::Display for Precision {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Dense peak throughput per precision in TFLOP/s (10¹² FLOP/s), without structured sparsity.
///
/// `fp64`/`fp32` are the highest non-sparse rates the datasheet gives for general matrix work (FP64 tensor core
/// rate where it exists is **not** used for fp64: it needs DGEMM-shaped work; we keep the vector rate). `tf32`,
/// `fp16`, `bf16`, `fp8`, `fp4` are tensor-core (matrix-core) rates; `null` where the GPU has no such path (then a
/// computation in that precision is refused rather than guessed).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PeakTflops {
    /// FP64 vector peak, TFLOP/s.
    pub fp64: f64,
    /// FP32 (CUDA cores / vector ALUs) peak, TFLOP/s.
    pub fp32: f64,
    /// TF32 tensor-core peak, TFLOP/s; `null` before Ampere.
    #[serde(default)]
    pub tf32: Option<f64>,
    /// FP16 peak (tensor cores where present), TFLOP/s.
    pub fp16: f64,
    /// BF16 tensor-core peak, TFLOP/s; `null` where unsupported (before Ampere / CDNA1 vector only).
    #[serde(default)]
    pub bf16: Option<f64>,
    /// FP8 tensor-core peak, TFLOP/s; `null` before Hopper/Ada.
    #[serde(default)]
    pub fp8: Option<f64>,
    /// Dense FP4 (NVFP4/MXFP4: E2M1 elements with block scales) tensor-core peak, TFLOP/s; `null`/absent before
    /// Blackwell (sm_100, sm_103, sm_120). The peak of `nvfp4` operators.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fp4: Option<f64>,
    /// FP32 on matrix cores (AMD CDNA MFMA), TFLOP/s: what fp32 GEMMs reach there. `null` on NVIDIA, whose fp32
    /// GEMMs run on CUDA cores at `fp32`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fp32_matrix: Option<f64>,
}

impl PeakTflops {
    /// Peak for `p` in TFLOP/s on the general (vector) path, or `None` where the GPU has no such path.
    pub fn get(&self, p: Precision) -> Option<f64> {
        match p {
            Precision::Fp64 => Some(self.fp64),
            Precision::Fp32 => Some(self.fp32),
            Precision::Tf32 => self.tf32,
            Precision::Fp16 => Some(self.fp16),
            Precision::Bf16 => self.bf16,
            Precision::Fp8 | Precision::Fp8Block => self.fp8,
            Precision::Nvfp4 => self.fp4,
        }
    }

    /// Peak for matrix multiplication in `p`, TFLOP/s: like [`PeakTflops::get`] but fp32 GEMMs use the matrix
    /// cores where the GPU has them for fp32 (`fp32_matrix`, AMD CDNA).
    pub fn matmul(&self, p: Precision) -> Option<f64> {
        match p {
            Precision::Fp32 => Some(self.fp32_matrix.unwrap_or(self.fp32)),
            _ => self.get(p),
        }
    }
}

/// GPU vendor, used to pick vendor conventions (warp 32 vs wavefront 64, NCCL vs RCCL).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema, Default)]
#[serde(rename_all = "lowercase")]
pub enum Vendor {
    #[default]
    Nvidia,
    Amd,
    Other,
}

/// A GPU's hardware description: what the roofline, wave-quantization and Hong–Kim models need.
///
/// Units are in the field names: GHz, GiB (2³⁰ B) of device memory, GB/s (10⁹ B/s) of DRAM bandwidth, MiB of L2,
/// TFLOP/s per precision. `clock_ghz` is the boost clock the datasheet's peaks are computed at.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({
    "name": "my-gpu", "vendor": "nvidia", "sm_count": 108, "clock_ghz": 1.41, "memory_gib": 40,
    "memory_bandwidth_gbs": 1555, "l2_mib": 40,
    "peak_tflops": {"fp64": 9.7, "fp32": 19.5, "tf32": 156, "fp16": 312, "bf16": 312, "fp8": null}
}))]
pub struct GpuSpec {
    /// Canonical name (catalog key), e.g. `A100-SXM4-40GB`.
    pub name: String,
    #[serde(default)]
    pub vendor: Vendor,
    /// Streaming multiprocessors (NVIDIA) or compute units (AMD).
    pub sm_count: u32,
    /// Boost clock in GHz.
    pub clock_ghz: f64,
    /// Device memory in GiB.
    pub memory_gib: f64,
    /// DRAM (HBM/GDDR) bandwidth in GB/s (10⁹ B/s).
    pub memory_bandwidth_gbs: f64,
    /// Last-level (L2) cache in MiB.
    pub l2_mib: f64,
    /// Dense peaks per precision.
    pub peak_tflops: PeakTflops,
    /// Compute capability (`"8.0"`) or AMD gfx target (`"gfx90a"`), when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compute_capability: Option<String>,
    /// Where the numbers come from (datasheet title and URL).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// Board power limit (TDP), W, from the datasheet. Power-capped boards (T4, L4, P4) sustain far lower
    /// clocks than their boost clock under load, which the learned models read from this.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tdp_watts: Option<f64>,
    /// Threads per warp (NVIDIA 32) or wavefront (AMD CDNA 64); `null` = vendor default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub warp_size: Option<u32>,
    /// Maximum resident threads per SM/CU; `null` = unknown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_threads_per_sm: Option<u32>,
    /// Measured or documented memory hierarchy (MT4G import, Nsight numbers); `null` = not known, models fall
    /// back to their documented defaults.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hierarchy: Option<MemoryHierarchy>,
}

/// One level of the memory hierarchy. Every number is optional: MT4G measures some, datasheets give others.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct MemoryLevel {
    /// Capacity in bytes (per SM for L1 and shared memory, per device for L2/L3/DRAM).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size_bytes: Option<f64>,
    /// Load latency in core clock cycles (mean, or p50 when only that is known).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency_cycles: Option<f64>,
    /// Read bandwidth of the whole device at this level, GB/s (10⁹ B/s).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_bandwidth_gbs: Option<f64>,
    /// Write bandwidth of the whole device at this level, GB/s.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub write_bandwidth_gbs: Option<f64>,
    /// Cache line (or fetch granularity) in bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub line_bytes: Option<u32>,
}

/// The memory hierarchy the cache-aware kernel models read (Hong–Kim with caches, hierarchical roofline).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct MemoryHierarchy {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub l1: Option<MemoryLevel>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shared: Option<MemoryLevel>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub l2: Option<MemoryLevel>,
    /// AMD Infinity Cache / MALL.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub l3: Option<MemoryLevel>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dram: Option<MemoryLevel>,
}

impl GpuSpec {
    /// The GPU generation: `ampere` (compute capability 8.0–8.7: A100, A30, A10, RTX 30), `ada` (8.9: L4, L40S),
    /// `hopper` (9.x) or `other` (earlier and later NVIDIA, AMD); from the name (A100, A10; H100, H200, GH200)
    /// where the compute capability is not given. Compute capabilities per NVIDIA's CUDA C++ Programming Guide
    /// (compute capabilities table); AMD's `gfx…` targets are `other`.
    pub fn generation(&self) -> &'static str {
        let cc = self.compute_capability.as_deref().and_then(|c| {
            let (major, minor) = c.split_once('.')?;
            Some((major.parse::<u32>().ok()?, minor.parse::<u32>().ok()?))
        });
        match cc {
            Some((8, 9)) => "ada",
            Some((8, _)) => "ampere",
            Some((9, _)) => "hopper",
            Some(_) => "other",
            None if self.name.starts_with("A100") || self.name.starts_with("A10") => "ampere",
            None if ["H100", "H200", "GH200"].iter().any(|p| self.name.starts_with(p)) => "hopper",
            None => "other",
        }
    }

    /// The compute capability's major version (8 Ampere and Ada, 9 Hopper, 10 B200 / GB200, 12 RTX Blackwell),
    /// `None` where the catalog gives no compute capability (or not a `major.minor` number, as AMD's `gfx…`).
    pub fn compute_major(&self) -> Option<u32> {
        self.compute_capability.as_deref()?.split('.').next()?.trim().parse().ok()
    }

    /// Hopper or a later NVIDIA generation (compute capability ≥ 9, or [`GpuSpec::generation`] `hopper` where the
    /// capability is not given): the GPUs with TMA and warp-group GEMMs.
    pub fn hopper_or_later(&self) -> bool {
        self.generation() == "hopper" || self.compute_major().is_some_and(|m| m >= 9)
    }

    /// Peak FLOP/s (not TFLOP/s) for `p`, or `None` when the GPU has no path for that precision.
    pub fn peak_flops(&self, p: Precision) -> Option<f64> {
        self.peak_tflops.get(p).map(|t| t * 1e12)
    }

    /// Peak FLOP/s for matrix multiplication in `p` (see [`PeakTflops::matmul`]).
    pub fn peak_matmul_flops(&self, p: Precision) -> Option<f64> {
        self.peak_tflops.matmul(p).map(|t| t * 1e12)
    }

    /// DRAM bandwidth in B/s.
    pub fn memory_bandwidth_bps(&self) -> f64 {
        self.memory_bandwidth_gbs * 1e9
    }

    /// Device memory in bytes.
    pub fn memory_bytes(&self) -> f64 {
        self.memory_gib * (1u64 << 30) as f64
    }

    /// Checks that every number is finite and within a plausible range for a GPU; returns the first offending
    /// field as `(field path relative to the spec, message)`.
    pub fn validate(&self) -> Result<(), (String, String)> {
        // Plausible ranges for any real GPU, wide enough for a decade to come: values outside them are typos or
        // unit mistakes (MHz for GHz, bytes for GB/s), and would make every estimate meaningless or infinite.
        let ranged = [
            ("clock_ghz", self.clock_ghz, 0.01, 20.0),
            ("memory_gib", self.memory_gib, 1e-3, 1e5),
            ("memory_bandwidth_gbs", self.memory_bandwidth_gbs, 0.1, 1e6),
            ("peak_tflops.fp64", self.peak_tflops.fp64, 1e-4, 1e6),
            ("peak_tflops.fp32", self.peak_tflops.fp32, 1e-4, 1e6),
            ("peak_tflops.fp16", self.peak_tflops.fp16, 1e-4, 1e6),
        ];
        if self.name.trim().is_empty() {
            return Err(("name".into(), "must not be empty".into()));
        }
        if !(1..=100_000).contains(&self.sm_count) {
            return Err(("sm_count".into(), format!("must be 1–100000, got {}", self.sm_count)));
        }
        for (field, v, lo, hi) in ranged {
            if !(v.is_finite() && (lo..=hi).contains(&v)) {
                return Err((field.into(), format!("must be a number in {lo}–{hi}, got {v}")));
            }
        }
        if !(self.l2_mib.is_finite() && (0.0..=1e5).contains(&self.l2_mib)) {
            return Err(("l2_mib".into(), format!("must be a number in 0–100000, got {}", self.l2_mib)));
        }
        let optional = [
            ("peak_tflops.tf32", self.peak_tflops.tf32, 1e-4, 1e6),
            ("peak_tflops.bf16", self.peak_tflops.bf16, 1e-4, 1e6),
            ("peak_tflops.fp8", self.peak_tflops.fp8, 1e-4, 1e6),
            ("peak_tflops.fp4", self.peak_tflops.fp4, 1e-4, 1e6),
            ("peak_tflops.fp32_matrix", self.peak_tflops.fp32_matrix, 1e-4, 1e6),
            ("tdp_watts", self.tdp_watts, 1.0, 1e5),
        ];
        if self.max_threads_per_sm == Some(0) {
            return Err(("max_threads_per_sm".into(), "must be at least 1 or null".into()));
        }
        for (field, v, lo, hi) in optional {
            if let Some(v) = v {
                if !(v.is_finite() && (lo..=hi).contains(&v)) {
                    return Err((field.into(), format!("must be a number in {lo}–{hi} or null, got {v}")));
                }
            }
        }
        Ok(())
    }
}
