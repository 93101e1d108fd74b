//! Machine parameters the kernel models derive from a [`GpuSpec`]: per-SM pipe widths, cache bandwidths and
//! latencies, occupancy limits.
//!
//! Every number comes, in this order of preference, from the spec's measured `hierarchy` (MT4G import, Nsight
//! numbers) — [`ParamSource::Hierarchy`]; from the datasheet numbers of the spec (peaks, SM count, clock) —
//! [`ParamSource::Datasheet`]; or from a documented default — [`ParamSource::Default`], tagged **[rec]** where it is
//! a reconstruction rather than a published number. The learned correction (MODELS.md §4) absorbs what the
//! defaults get wrong on a given GPU.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::KernelModelError;
use crate::hw::{GpuSpec, MemoryLevel, Vendor};

/// L2 bandwidth as a multiple of the DRAM datasheet bandwidth when the hierarchy gives none. **[rec]**
///
/// Measured L2/DRAM read-bandwidth ratios: A100-PCIE-40GB 2,374 GiB/s ÷ 1,555 GB/s ≈ 1.64, H100 SXM 4,529 GiB/s ÷
/// 3,350 GB/s ≈ 1.45, MI210 4,014 GiB/s ÷ 1,638 GB/s ≈ 2.63 (MT4G fixtures in `shared/fixtures/mt4g`);
/// V100 ≈ 3.6 (Yang et al., "Hierarchical Roofline Analysis for GPUs", 2020, ERT: 2,996.8 vs 828.8 GB/s).
/// 2.0 sits inside that range.
pub const L2_OVER_DRAM_BANDWIDTH: f64 = 2.0;

/// L1 (L1/TEX) load bandwidth per SM per cycle on NVIDIA Volta and later, bytes. **[rec]** 128 B/clk/SM is the
/// design rate (Jia et al., "Dissecting the NVIDIA Volta GPU Architecture via Microbenchmarking", 2018, measure
/// ≈ 108 B/clk/SM on V100; Yang et al. 2020's 14 TB/s on V100 is 114 B/clk/SM).
pub const NVIDIA_L1_BYTES_PER_CYCLE: f64 = 128.0;

/// L1 load bandwidth per SM per cycle on NVIDIA before Volta (compute capability < 7), bytes. **[rec]**
pub const NVIDIA_PRE_VOLTA_L1_BYTES_PER_CYCLE: f64 = 64.0;

/// Vector L1 bandwidth per CU per cycle on AMD CDNA 1/2, bytes (AMD CDNA / CDNA 2 architecture whitepapers:
/// 64 B/clk/CU). **[rec]** for other AMD generations.
pub const AMD_L1_BYTES_PER_CYCLE: f64 = 64.0;

/// DRAM load latency when the hierarchy gives none, ns. **[rec]** MT4G measures 640 cycles at 1.41 GHz on A100
/// (454 ns), 834 cycles at 1.98 GHz on H100 (421 ns), 741 cycles at 1.7 GHz on MI210 (436 ns): ≈ 450 ns on all
/// three, so the default is 450 ns × `clock_ghz` cycles.
pub const DRAM_LATENCY_NS: f64 = 450.0;

/// L2 hit latency when the hierarchy gives none, cycles: NVIDIA 220 (MT4G: A100 221, H100 219), AMD 300 (MT4G:
/// MI210 302). **[rec]**
pub const NVIDIA_L2_LATENCY_CYCLES: f64 = 220.0;
/// See [`NVIDIA_L2_LATENCY_CYCLES`].
pub const AMD_L2_LATENCY_CYCLES: f64 = 300.0;

/// L1 hit latency when the hierarchy gives none, cycles: NVIDIA 40 (MT4G: H100 38, A100 68; Jia et al. 2018:
/// V100 28), AMD 120 (MT4G: MI210 124). **[rec]**
pub const NVIDIA_L1_LATENCY_CYCLES: f64 = 40.0;
/// See [`NVIDIA_L1_LATENCY_CYCLES`].
pub const AMD_L1_LATENCY_CYCLES: f64 = 120.0;

/// Resident threads per SM when the spec gives none: 2048 (CUDA C++ Programming Guide, "Technical
/// Specifications per Compute Capability", for 6.0–8.0 and 9.0; MT4G reports 2048 for MI210 too).
pub const DEFAULT_MAX_THREADS_PER_SM: u32 = 2048;

/// Resident blocks per SM: 32 (CUDA C++ Programming Guide, compute capability 5.0–9.0 except 7.5/8.6/8.9).
pub const MAX_BLOCKS_PER_SM: u32 = 32;

/// 32-bit registers per SM: 65,536 (CUDA C++ Programming Guide, every compute capability ≥ 5.0). Register
/// allocation granularity is ignored.
pub const REGISTERS_PER_SM: f64 = 65_536.0;

/// Integer/logic (ALU) lanes per SM on NVIDIA Volta and later: 64 (CUDA C++ Programming Guide, "Arithmetic
/// Instructions": 64 results per clock per SM for 32-bit integer add/compare/logic at compute capability 7.x–9.0;
/// V100/A100/H100 whitepapers: 16 INT32 units per SM partition × 4).
pub const NVIDIA_ALU_LANES: f64 = 64.0;

/// Special-function (XU/SFU: rcp, rsqrt, sin, cos, lg2, ex2) lanes per SM on NVIDIA: 16 at compute capability
/// 6.0 and 7.0–9.0, 32 at 5.x/6.1/6.2 (CUDA C++ Programming Guide, "Arithmetic Instructions").
pub const NVIDIA_XU_LANES: f64 = 16.0;

/// DRAM sector, bytes: the granularity of an uncoalesced transaction (NVIDIA L2 sectors since Maxwell; AMD
/// 32/64-B requests). Used for the default uncoalesced departure delay.
pub const SECTOR_BYTES: f64 = 32.0;

/// Bytes of a coalesced warp transaction when the hierarchy gives no line size: one 128-B line (32 threads ×
/// 4 B). Used for the default coalesced departure delay.
pub const LINE_BYTES: f64 = 128.0;

/// Where a machine parameter comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum ParamSource {
    /// Given in the request.
    Given,
    /// Datasheet numbers of the GPU spec (peaks, SMs, clock, DRAM bandwidth) or a rule on them.
    Datasheet,
    /// The spec's measured memory hierarchy (MT4G).
    Hierarchy,
    /// A documented default constant of this module.
    Default,
}

/// A number and where it comes from.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, ToSchema)]
pub struct Sourced {
    pub value: f64,
    pub source: ParamSource,
}

impl Sourced {
    fn new(value: f64, source: ParamSource) -> Sourced {
        Sourced { value, source }
    }
}

/// (major, minor) of an NVIDIA compute capability such as `"8.0"`; `None` for AMD gfx targets or when absent.
pub fn compute_capability(gpu: &GpuSpec) -> Option<(u32, u32)> {
    let cc = gpu.compute_capability.as_deref()?;
    let (major, minor) = cc.trim().split_once('.')?;
    Some((major.parse().ok()?, minor.parse().ok()?))
}

/// Threads per warp (wavefront): the spec's `warp_size`, else 64 on AMD and 32 elsewhere.
pub fn warp_size(gpu: &GpuSpec) -> u32 {
    gpu.warp_size.filter(|w| *w > 0).unwrap_or(if gpu.vendor == Vendor::Amd { 64 } else { 32 })
}

/// SMs × clock, cycles per second summed over the device.
fn sm_hz(gpu: &GpuSpec) -> f64 {
    gpu.sm_count.max(1) as f64 * gpu.clock_ghz * 1e9
}

/// FP32 FMA lanes per SM: fp32 peak / (2 FLOP per FMA · SMs · clock) (A100: 19.5e12 / (2 · 108 · 1.41e9) = 64,
/// the whitepaper's 64 FP32 cores per SM; H100 SXM: 128).
pub fn fp32_lanes_per_sm(gpu: &GpuSpec) -> f64 {
    gpu.peak_tflops.fp32 * 1e12 / (2.0 * sm_hz(gpu))
}

/// Peak FLOP/s of a per-SM-uniform rate, per SM per cycle: `peak_tflops` · 10¹² / (SMs · clock).
pub fn flops_per_sm_cycle(gpu: &GpuSpec, peak_tflops: f64) -> f64 {
    peak_tflops * 1e12 / sm_hz(gpu)
}

/// Non-tensor (vector, packed half2) FP16 peak, TFLOP/s. `peak_tflops.fp16` is the tensor-core rate where the GPU
/// has tensor/matrix cores, so: NVIDIA before Volta (compute capability < 7, no tensor cores) → `fp16` itself;
/// compute capability 8.0 (GA100) → 4 × fp32 (A100 whitepaper: 78 TFLOPS FP16 non-tensor); otherwise 2 × fp32
/// (half2 on the FMA lanes: V100 31.4 = 2 × 15.7, H100 SXM 133.8 = 2 × 66.9; AMD CDNA packed FP16 = 2 × FP32).
/// Without a compute capability, `fp16` when it is at most 2 × fp32 (no matrix path), else 2 × fp32. **[rec]** for
/// GPUs outside these whitepapers.
pub fn vector_fp16_tflops(gpu: &GpuSpec) -> f64 {
    let p = &gpu.peak_tflops;
    match (gpu.vendor, compute_capability(gpu)) {
        (Vendor::Nvidia, Some((major, _))) if major < 7 => p.fp16,
        (Vendor::Nvidia, Some((8, 0))) => 4.0 * p.fp32,
        (_, None) if p.fp16 <= 2.0 * p.fp32 => p.fp16,
        _ => 2.0 * p.fp32,
    }
}

/// Integer/logic lanes per SM: NVIDIA compute capability ≥ 7 (separate INT32 units) min(FP32 lanes,
/// [`NVIDIA_ALU_LANES`]); NVIDIA before Volta and AMD (integer and FP32 share the SIMD lanes) the FP32 lanes.
pub fn alu_lanes_per_sm(gpu: &GpuSpec) -> f64 {
    let lanes = fp32_lanes_per_sm(gpu);
    match (gpu.vendor, compute_capability(gpu)) {
        (Vendor::Nvidia, Some((major, _))) if major < 7 => lanes,
        (Vendor::Nvidia, _) => lanes.min(NVIDIA_ALU_LANES),
        _ => lanes,
    }
}

/// Special-function (XU) lanes per SM: NVIDIA [`NVIDIA_XU_LANES`] (32 at compute capability 5.x, 6.1, 6.2);
/// AMD transcendentals run at quarter rate: FP32 lanes / 4 (= 16 on CDNA). **[rec]** for AMD.
pub fn xu_lanes_per_sm(gpu: &GpuSpec) -> f64 {
    match (gpu.vendor, compute_capability(gpu)) {
        (Vendor::Nvidia, Some((5, _))) | (Vendor::Nvidia, Some((6, 1..=2))) => 32.0,
        (Vendor::Nvidia, _) => NVIDIA_XU_LANES,
        _ => fp32_lanes_per_sm(gpu) / 4.0,
    }
}

/// Load/store (LSU/MIO) warp instructions issued per SM per cycle: 1 — 32 LD/ST units per SM on NVIDIA Volta to
/// Hopper (8 per SM partition, V100/A100/H100 whitepapers), one wavefront per cycle per CU on AMD. **[rec]**
pub const LSU_WARP_INSTS_PER_CYCLE: f64 = 1.0;

fn level<'a>(
    gpu: &'a GpuSpec,
    pick: fn(&crate::hw::MemoryHierarchy) -> Option<&MemoryLevel>,
) -> Option<&'a MemoryLevel> {
    gpu.hierarchy.as_ref().and_then(pick)
}

fn measured(v: Option<f64>) -> Option<f64> {
    v.filter(|x| x.is_finite() && *x > 0.0)
}

/// Device L1 bandwidth, GB/s: the hierarchy's `l1.read_bandwidth_gbs`, else per-SM L1 bytes/cycle × SMs × clock
/// ([`NVIDIA_L1_BYTES_PER_CYCLE`], [`NVIDIA_PRE_VOLTA_L1_BYTES_PER_CYCLE`], [`AMD_L1_BYTES_PER_CYCLE`]).
/// A100-SXM4: 128 × 108 × 1.41 = 19,491.84 GB/s.
pub fn l1_bandwidth_gbs(gpu: &GpuSpec) -> Sourced {
    if let Some(v) = measured(level(gpu, |h| h.l1.as_ref()).and_then(|l| l.read_bandwidth_gbs)) {
        return Sourced::new(v, ParamSource::Hierarchy);
    }
    let per_cycle = match (gpu.vendor, compute_capability(gpu)) {
        (Vendor::Amd, _) => AMD_L1_BYTES_PER_CYCLE,
        (Vendor::Nvidia, Some((major, _))) if major < 7 => NVIDIA_PRE_VOLTA_L1_BYTES_PER_CYCLE,
        _ => NVIDIA_L1_BYTES_PER_CYCLE,
    };
    Sourced::new(per_cycle * gpu.sm_count.max(1) as f64 * gpu.clock_ghz, ParamSource::Default)
}

/// Device L2 bandwidth, GB/s: the hierarchy's `l2.read_bandwidth_gbs`, else [`L2_OVER_DRAM_BANDWIDTH`] × the DRAM
/// datasheet bandwidth.
pub fn l2_bandwidth_gbs(gpu: &GpuSpec) -> Sourced {
    match measured(level(gpu, |h| h.l2.as_ref()).and_then(|l| l.read_bandwidth_gbs)) {
        Some(v) => Sourced::new(v, ParamSource::Hierarchy),
        None => Sourced::new(L2_OVER_DRAM_BANDWIDTH * gpu.memory_bandwidth_gbs, ParamSource::Default),
    }
}

/// DRAM bandwidth, GB/s: always the datasheet `memory_bandwidth_gbs` (the roofline's B_HBM; MT4G's measured DRAM
/// bandwidth stays in the hierarchy for the learned model).
pub fn dram_bandwidth_gbs(gpu: &GpuSpec) -> Sourced {
    Sourced::new(gpu.memory_bandwidth_gbs, ParamSource::Datasheet)
}

/// DRAM load latency, cycles: the hierarchy's `dram.latency_cycles`, else [`DRAM_LATENCY_NS`] × `clock_ghz`.
pub fn dram_latency_cycles(gpu: &GpuSpec) -> Sourced {
    match measured(level(gpu, |h| h.dram.as_ref()).and_then(|l| l.latency_cycles)) {
        Some(v) => Sourced::new(v, ParamSource::Hierarchy),
        None => Sourced::new(DRAM_LATENCY_NS * gpu.clock_ghz, ParamSource::Default),
    }
}

/// L2 hit latency, cycles: the hierarchy's `l2.latency_cycles`, else [`NVIDIA_L2_LATENCY_CYCLES`] /
/// [`AMD_L2_LATENCY_CYCLES`].
pub fn l2_latency_cycles(gpu: &GpuSpec) -> Sourced {
    match measured(level(gpu, |h| h.l2.as_ref()).and_then(|l| l.latency_cycles)) {
        Some(v) => Sourced::new(v, ParamSource::Hierarchy),
        None if gpu.vendor == Vendor::Amd => Sourced::new(AMD_L2_LATENCY_CYCLES, ParamSource::Default),
        None => Sourced::new(NVIDIA_L2_LATENCY_CYCLES, ParamSource::Default),
    }
}

/// L1 hit latency, cycles: the hierarchy's `l1.latency_cycles`, else [`NVIDIA_L1_LATENCY_CYCLES`] /
/// [`AMD_L1_LATENCY_CYCLES`].
pub fn l1_latency_cycles(gpu: &GpuSpec) -> Sourced {
    match measured(level(gpu, |h| h.l1.as_ref()).and_then(|l| l.latency_cycles)) {
        Some(v) => Sourced::new(v, ParamSource::Hierarchy),
        None if gpu.vendor == Vendor::Amd => Sourced::new(AMD_L1_LATENCY_CYCLES, ParamSource::Default),
        None => Sourced::new(NVIDIA_L1_LATENCY_CYCLES, ParamSource::Default),
    }
}

/// Bytes of a coalesced warp transaction: the hierarchy's L2 (else DRAM) `line_bytes`, else [`LINE_BYTES`].
pub fn line_bytes(gpu: &GpuSpec) -> Sourced {
    let from = |l: Option<&MemoryLevel>| l.and_then(|l| l.line_bytes).filter(|b| *b > 0).map(f64::from);
    match from(level(gpu, |h| h.l2.as_ref())).or_else(|| from(level(gpu, |h| h.dram.as_ref()))) {
        Some(v) => Sourced::new(v, ParamSource::Hierarchy),
        None => Sourced::new(LINE_BYTES, ParamSource::Default),
    }
}

/// Resident threads per SM: the spec's `max_threads_per_sm`, else [`DEFAULT_MAX_THREADS_PER_SM`].
pub fn max_threads_per_sm(gpu: &GpuSpec) -> u32 {
    gpu.max_threads_per_sm.filter(|t| *t > 0).unwrap_or(DEFAULT_MAX_THREADS_PER_SM)
}

/// Shared memory (LDS) per SM, bytes, when the hierarchy gives it (`shared.size_bytes`).
pub fn shared_bytes_per_sm(gpu: &GpuSpec) -> Option<f64> {
    measured(level(gpu, |h| h.shared.as_ref()).and_then(|l| l.size_bytes))
}

/// Resident blocks per SM (theoretical occupancy) and the resource that limits them.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct Occupancy {
    /// Blocks resident on one SM at a time (≥ 1).
    pub blocks_per_sm: u32,
    /// Warps per block: ⌈threads per block / warp size⌉.
    pub warps_per_block: u32,
    /// Active warps per SM / maximum warps per SM, 0–1.
    pub occupancy: f64,
    /// The binding limit: `threads`, `blocks`, `registers` or `shared_memory`.
    pub limit: &'static str,
}

/// Theoretical occupancy (CUDA occupancy calculator without allocation granularities): blocks per SM =
/// min(⌊max threads per SM / threads per block⌋, [`MAX_BLOCKS_PER_SM`], ⌊[`REGISTERS_PER_SM`] /
/// (registers per thread · threads per block)⌋, ⌊shared memory per SM / shared bytes per block⌋), at least 1
/// (a block that launches runs). The register limit needs `registers_per_thread`, the shared-memory limit both the
/// block's `shared_bytes_per_block` and the hierarchy's `shared.size_bytes`; missing ones are skipped.
///
/// Example: 256 threads, 64 registers, 2048 threads/SM → threads 8, blocks 32, registers 65,536 / 16,384 = 4 →
/// 4 blocks, 32 of 64 warps = 0.5, limited by registers.
///
/// Errors: `threads_per_block` = 0, or a negative / non-finite register or shared-memory count.
pub fn occupancy(
    gpu: &GpuSpec,
    threads_per_block: u32,
    registers_per_thread: Option<f64>,
    shared_bytes_per_block: Option<f64>,
) -> Result<Occupancy, KernelModelError> {
    if threads_per_block == 0 {
        return Err(KernelModelError::new("threads_per_block", "must be at least 1"));
    }
    let warp = warp_size(gpu);
    let warps_per_block = threads_per_block.div_ceil(warp);
    let max_threads = max_threads_per_sm(gpu);
    let max_warps = (max_threads / warp).max(1);
    let mut limits: Vec<(u32, &'static str)> =
        vec![(max_threads / threads_per_block, "threads"), (MAX_BLOCKS_PER_SM, "blocks")];
    if let Some(r) = registers_per_thread {
        let r = super::non_negative("registers_per_thread", r)?;
        if r > 0.0 {
            limits.push(((REGISTERS_PER_SM / (r * threads_per_block as f64)).floor() as u32, "registers"));
        }
    }
    if let (Some(s), Some(per_sm)) = (shared_bytes_per_block, shared_bytes_per_sm(gpu)) {
        let s = super::non_negative("shared_mem_bytes", s)?;
        if s > 0.0 {
            limits.push(((per_sm / s).floor() as u32, "shared_memory"));
        }
    }
    let (blocks, limit) = limits.into_iter().min_by_key(|(b, _)| *b).unwrap_or((1, "threads"));
    let blocks_per_sm = blocks.max(1);
    let occupancy = ((blocks_per_sm * warps_per_block) as f64 / max_warps as f64).min(1.0);
    Ok(Occupancy { blocks_per_sm, warps_per_block, occupancy, limit })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hw::{lookup, MemoryHierarchy};

    fn spec(name: &str) -> GpuSpec {
        lookup(name).unwrap().spec.clone()
    }

    #[test]
    fn lanes_from_datasheet_peaks() {
        // A100: 19.5e12 / (2 · 108 · 1.41e9) = 19.5e12 / 304.56e9 = 64.03 FP32 lanes; ALU capped at 64.
        let a100 = spec("A100-SXM4-40GB");
        assert!((fp32_lanes_per_sm(&a100) - 64.03).abs() < 0.01);
        assert!((alu_lanes_per_sm(&a100) - 64.0).abs() < 1e-12);
        assert_eq!(xu_lanes_per_sm(&a100), 16.0);
        // GA100 vector FP16 = 4 × 19.5 = 78 TFLOP/s (A100 whitepaper).
        assert_eq!(vector_fp16_tflops(&a100), 78.0);
        // H100 SXM: 67e12 / (2 · 132 · 1.98e9) = 67e12 / 522.72e9 = 128.18 lanes; ALU 64; fp16 vector 134.
        let h100 = spec("H100-SXM5-80GB");
        assert!((fp32_lanes_per_sm(&h100) - 128.18).abs() < 0.01);
        assert_eq!(alu_lanes_per_sm(&h100), 64.0);
        assert_eq!(vector_fp16_tflops(&h100), 134.0);
        // P100 (cc 6.0, no tensor cores): fp16 peak 18.7 is the vector rate; ALU = FP32 lanes
        // 9.3e12 / (2 · 56 · 1.303e9) = 63.73.
        let p100 = spec("P100-PCIE-16GB");
        assert_eq!(vector_fp16_tflops(&p100), 18.7);
        assert!((alu_lanes_per_sm(&p100) - 63.73).abs() < 0.01);
        // P4 (cc 6.1): 32 SFUs per SM.
        assert_eq!(xu_lanes_per_sm(&spec("P4")), 32.0);
        // MI210: 22.6e12 / (2 · 104 · 1.7e9) = 63.91 lanes; XU quarter rate 15.98; warp 64.
        let mi210 = spec("MI210");
        assert!((xu_lanes_per_sm(&mi210) - 15.98).abs() < 0.01);
        assert_eq!(warp_size(&mi210), 64);
        assert_eq!(compute_capability(&mi210), None);
        assert_eq!(compute_capability(&a100), Some((8, 0)));
    }

    #[test]
    fn bandwidth_and_latency_defaults() {
        let mut a100 = spec("A100-SXM4-40GB");
        // 128 B × 108 SMs × 1.41 GHz = 19,491.84 GB/s; L2 = 2 × 1555 = 3110 GB/s; DRAM 450 ns × 1.41 = 634.5 cycles.
        let l1 = l1_bandwidth_gbs(&a100);
        assert!((l1.value - 19_491.84).abs() < 1e-6);
        assert_eq!(l1.source, ParamSource::Default);
        assert_eq!(l2_bandwidth_gbs(&a100), Sourced { value: 3110.0, source: ParamSource::Default });
        assert!((dram_latency_cycles(&a100).value - 634.5).abs() < 1e-9);
        assert_eq!(l2_latency_cycles(&a100).value, 220.0);
        assert_eq!(l1_latency_cycles(&a100).value, 40.0);
        assert_eq!(line_bytes(&a100).value, 128.0);
        // A measured hierarchy wins.
        a100.hierarchy = Some(MemoryHierarchy {
            l2: Some(MemoryLevel {
                latency_cycles: Some(221.0),
                read_bandwidth_gbs: Some(2550.0),
                line_bytes: Some(64),
                ..Default::default()
            }),
            dram: Some(MemoryLevel { latency_cycles: Some(640.0), ..Default::default() }),
            ..Default::default()
        });
        assert_eq!(l2_bandwidth_gbs(&a100), Sourced { value: 2550.0, source: ParamSource::Hierarchy });
        assert_eq!(dram_latency_cycles(&a100), Sourced { value: 640.0, source: ParamSource::Hierarchy });
        assert_eq!(l2_latency_cycles(&a100).value, 221.0);
        assert_eq!(line_bytes(&a100), Sourced { value: 64.0, source: ParamSource::Hierarchy });
        // MI210 L1: 64 B × 104 CUs × 1.7 GHz = 11,315.2 GB/s.
        assert!((l1_bandwidth_gbs(&spec("MI210")).value - 11_315.2).abs() < 1e-6);
    }

    #[test]
    fn occupancy_limits() {
        let a100 = spec("A100-SXM4-40GB");
        // 256 threads, 64 regs: threads 2048/256 = 8, registers 65536/(64·256) = 4 → 4 blocks, 32/64 warps.
        let o = occupancy(&a100, 256, Some(64.0), None).unwrap();
        assert_eq!((o.blocks_per_sm, o.warps_per_block, o.limit), (4, 8, "registers"));
        assert_eq!(o.occupancy, 0.5);
        // 32 threads and nothing else: 2048/32 = 64 > 32 blocks → the block limit, 32 warps of 64.
        let o = occupancy(&a100, 32, None, None).unwrap();
        assert_eq!((o.blocks_per_sm, o.limit, o.occupancy), (32, "blocks", 0.5));
        // Shared memory counts only when the hierarchy knows the SM's capacity: 164 KiB / 48 KiB = 3.
        let mut g = a100.clone();
        g.hierarchy = Some(MemoryHierarchy {
            shared: Some(MemoryLevel { size_bytes: Some(167_936.0), ..Default::default() }),
            ..Default::default()
        });
        let o = occupancy(&g, 128, None, Some(49_152.0)).unwrap();
        assert_eq!((o.blocks_per_sm, o.limit), (3, "shared_memory"));
        // A block bigger than the register file still runs one at a time.
        assert_eq!(occupancy(&a100, 1024, Some(255.0), None).unwrap().blocks_per_sm, 1);
        assert_eq!(occupancy(&a100, 0, None, None).unwrap_err().field, "threads_per_block");
        assert!(occupancy(&a100, 64, Some(-1.0), None).is_err());
    }
}
