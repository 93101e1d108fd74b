//! Per-pipeline demand (S2, SynPerf; MODELS.md §2.3) **[rec]**: how many cycles each instruction pipe and memory
//! level of the busiest SM needs for a kernel, the kernel's ceiling, its efficiency, and the feature vector the
//! learned model reads.
//!
//! The kernel's CTAs are spread over the SMs: the busiest SM runs ⌈blocks / SMs⌉ of them (in
//! waves = ⌈blocks / (SMs · resident blocks per SM)⌉), so it carries the share ⌈blocks / SMs⌉ / blocks of every
//! SM-local demand. For an SM-local pipe, cycles = demand · share / throughput per SM per cycle; for L2 and DRAM,
//! which all SMs share, cycles = bytes / (device bandwidth per cycle). The ceiling is the largest of these, and
//! efficiency = ceiling / measured. The ceiling ignores latency and dependencies: it is what the hardware could do
//! at best, and how far a kernel stays from it is what the learned model explains.
//!
//! Throughput per SM per cycle, from the GPU's datasheet peaks and the per-SM tables of NVIDIA's architecture
//! whitepapers and the CUDA C++ Programming Guide ("Arithmetic Instructions"), see [`super::machine`]:
//!
//! | pipe | demand | throughput per SM per cycle |
//! |---|---|---|
//! | tensor | tensor FLOPs | matrix peak(precision) / (SMs · clock) — A100 fp16: 312e12 / (108 · 1.41e9) = 2049 |
//! | fma | FP32 FLOPs + FP16 vector FLOPs | fp32 peak / (SMs · clock) = 2 · FP32 lanes (A100 128); FP16 at its vector rate |
//! | fp64 | FP64 FLOPs | fp64 peak / (SMs · clock) (A100 63.7) |
//! | alu | warp instructions | ALU lanes / warp size (NVIDIA Volta+: 64/32 = 2) |
//! | xu | warp instructions | XU lanes / warp size (NVIDIA: 16/32 = 0.5) |
//! | lsu | warp instructions | 1 ([`machine::LSU_WARP_INSTS_PER_CYCLE`]) |
//! | l1 | bytes | L1 bandwidth / (SMs · clock) (default 128 B) |
//! | l2 | bytes | device L2 bandwidth / clock (per device) |
//! | dram | bytes | device DRAM bandwidth / clock (per device) |
//!
//! FP32 FLOPs are counted as Nsight does (fadd + fmul + 2·ffma), so a kernel of FADDs and FMULs needs up to twice
//! the FMA cycles shown: the ceiling stays a lower bound.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::machine::{self, Occupancy};
use super::{non_negative, positive, KernelModelError};
use crate::hw::{GpuSpec, Precision};

mod features;
mod input;

pub use features::PipeFeatures;
pub use input::PipeWork;

/// An instruction pipe or memory level.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum Pipe {
    Tensor,
    Fma,
    Fp64,
    Alu,
    Xu,
    Lsu,
    L1,
    L2,
    Dram,
}

impl Pipe {
    /// Every pipe, in the order of [`PipeEstimate::pipes`].
    pub const ALL: [Pipe; 9] =
        [Pipe::Tensor, Pipe::Fma, Pipe::Fp64, Pipe::Alu, Pipe::Xu, Pipe::Lsu, Pipe::L1, Pipe::L2, Pipe::Dram];

    /// True for memory levels (L1, L2, DRAM).
    pub fn is_memory(self) -> bool {
        matches!(self, Pipe::L1 | Pipe::L2 | Pipe::Dram)
    }

    /// Name in verdicts: `tensor`, `FMA`, `FP64`, `ALU`, `XU`, `LSU`, `L1`, `L2`, `DRAM`.
    pub fn label(self) -> &'static str {
        match self {
            Pipe::Tensor => "tensor",
            Pipe::Fma => "FMA",
            Pipe::Fp64 => "FP64",
            Pipe::Alu => "ALU",
            Pipe::Xu => "XU",
            Pipe::Lsu => "LSU",
            Pipe::L1 => "L1",
            Pipe::L2 => "L2",
            Pipe::Dram => "DRAM",
        }
    }
}

/// One pipe's demand and cycles.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct PipeDemand {
    pub pipe: Pipe,
    /// Demand over the whole kernel, in `unit`.
    pub demand: f64,
    /// `flop`, `warp_inst` or `byte`.
    pub unit: &'static str,
    /// `sm` (per SM, busiest SM's share) or `device` (L2, DRAM: shared by all SMs).
    pub scope: &'static str,
    /// Throughput per cycle (per SM for `sm` scope, per device for `device`), `unit`/cycle.
    pub throughput_per_cycle: f64,
    /// Cycles this pipe needs.
    pub cycles: f64,
}

/// The pipeline-demand answer.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct PipeEstimate {
    /// Every pipe (order of [`Pipe::ALL`]), with or without demand.
    pub pipes: Vec<PipeDemand>,
    /// The pipe with the most cycles; `null` when there is no demand at all.
    pub bottleneck: Option<Pipe>,
    /// `"compute-bound: tensor pipe"`, `"memory-bound: DRAM"`, or `"no demand"`, with the efficiency when measured.
    pub verdict: String,
    /// Max over pipes, cycles.
    pub ceiling_cycles: f64,
    /// The ceiling as time: ceiling cycles / clock, µs.
    pub ceiling_us: f64,
    /// Measured duration given with the work, µs.
    pub measured_us: Option<f64>,
    /// ceiling / measured (≤ 1 for a kernel that respects the ceiling).
    pub efficiency: Option<f64>,
    /// ⌈blocks / (SMs · blocks per SM)⌉.
    pub waves: u64,
    /// CTAs on the busiest SM: ⌈blocks / SMs⌉.
    pub ctas_per_sm: u64,
    /// Occupancy used (given blocks per SM, or the calculator's).
    pub occupancy: Occupancy,
    pub features: PipeFeatures,
}

impl PipeEstimate {
    /// The demand of `p`.
    pub fn pipe(&self, p: Pipe) -> &PipeDemand {
        &self.pipes[Pipe::ALL.iter().position(|x| *x == p).unwrap_or(0)]
    }
}

/// Evaluates the per-pipe demand of `work` on `gpu` (module doc).
///
/// Errors: zero blocks or threads per block, a negative or non-finite demand, a non-positive measured time,
/// tensor FLOPs in a precision the GPU has no matrix path for (`tensor_precision`).
pub fn estimate(work: &PipeWork, gpu: &GpuSpec) -> Result<PipeEstimate, KernelModelError> {
    if work.blocks == 0 {
        return Err(KernelModelError::new("blocks", "must be at least 1"));
    }
    let mut occ =
        machine::occupancy(gpu, work.threads_per_block, work.registers_per_thread, work.shared_mem_bytes_per_block)?;
    if let Some(b) = work.blocks_per_sm {
        if b == 0 {
            return Err(KernelModelError::new("blocks_per_sm", "must be at least 1"));
        }
        let max_warps = (machine::max_threads_per_sm(gpu) / machine::warp_size(gpu)).max(1);
        occ = Occupancy {
            blocks_per_sm: b,
            warps_per_block: occ.warps_per_block,
            occupancy: ((b * occ.warps_per_block) as f64 / max_warps as f64).min(1.0),
            limit: "given",
        };
    }
    if let Some(t) = work.measured_us {
        positive("measured_us", t)?;
    }
    let sms = gpu.sm_count.max(1) as u64;
    let clock = gpu.clock_ghz;
    let ctas_per_sm = work.blocks.div_ceil(sms);
    let waves = work.blocks.div_ceil(sms * occ.blocks_per_sm as u64);
    let share = ctas_per_sm as f64 / work.blocks as f64;
    let warp = machine::warp_size(gpu) as f64;

    let precision = work.tensor_precision.unwrap_or(Precision::Fp16);
    let tensor_tflops = gpu.peak_tflops.matmul(precision).unwrap_or(0.0);
    let flops_tensor = non_negative("flops_tensor", work.flops_tensor)?;
    if flops_tensor > 0.0 && tensor_tflops <= 0.0 {
        return Err(KernelModelError::new(
            "tensor_precision",
            format!("{} has no {precision} tensor/matrix path (its peak_tflops.{precision} is null)", gpu.name),
        ));
    }
    let fp32 = non_negative("flops_fp32", work.flops_fp32)?;
    let fp16 = non_negative("flops_fp16", work.flops_fp16)?;
    let fp32_rate = machine::flops_per_sm_cycle(gpu, gpu.peak_tflops.fp32);
    let fp16_rate = machine::flops_per_sm_cycle(gpu, machine::vector_fp16_tflops(gpu));
    let l1 = machine::l1_bandwidth_gbs(gpu).value;
    let l2 = machine::l2_bandwidth_gbs(gpu).value;
    let dram = gpu.memory_bandwidth_gbs;

    // (pipe, demand, unit, scope, throughput per cycle, cycles)
    let sm_pipe = |pipe, demand: f64, unit, thr: f64| {
        let cycles = if demand > 0.0 { demand * share / thr } else { 0.0 };
        PipeDemand { pipe, demand, unit, scope: "sm", throughput_per_cycle: thr, cycles }
    };
    let device_pipe = |pipe, demand: f64, gbs: f64| {
        let thr = gbs / clock; // GB/s ÷ Gcycles/s = B/cycle
        let cycles = if demand > 0.0 { demand / thr } else { 0.0 };
        PipeDemand { pipe, demand, unit: "byte", scope: "device", throughput_per_cycle: thr, cycles }
    };
    // FP32 and vector FP16 share the FMA lanes: cycles add up; the throughput shown is FP32's.
    let mut fma = sm_pipe(Pipe::Fma, fp32 + fp16, "flop", fp32_rate);
    fma.cycles =
        (if fp32 > 0.0 { fp32 / fp32_rate } else { 0.0 } + if fp16 > 0.0 { fp16 / fp16_rate } else { 0.0 }) * share;
    let pipes = vec![
        sm_pipe(Pipe::Tensor, flops_tensor, "flop", machine::flops_per_sm_cycle(gpu, tensor_tflops)),
        fma,
        sm_pipe(
            Pipe::Fp64,
            non_negative("flops_fp64", work.flops_fp64)?,
            "flop",
            machine::flops_per_sm_cycle(gpu, gpu.peak_tflops.fp64),
        ),
        sm_pipe(
            Pipe::Alu,
            non_negative("alu_warp_insts", work.alu_warp_insts)?,
            "warp_inst",
            machine::alu_lanes_per_sm(gpu) / warp,
        ),
        sm_pipe(
            Pipe::Xu,
            non_negative("xu_warp_insts", work.xu_warp_insts)?,
            "warp_inst",
            machine::xu_lanes_per_sm(gpu) / warp,
        ),
        sm_pipe(
            Pipe::Lsu,
            non_negative("lsu_warp_insts", work.lsu_warp_insts)?,
            "warp_inst",
            machine::LSU_WARP_INSTS_PER_CYCLE,
        ),
        sm_pipe(Pipe::L1, non_negative("l1_bytes", work.l1_bytes)?, "byte", l1 / (sms as f64 * clock)),
        device_pipe(Pipe::L2, non_negative("l2_bytes", work.l2_bytes)?, l2),
        device_pipe(Pipe::Dram, non_negative("dram_bytes", work.dram_bytes)?, dram),
    ];
    let max_of =
        |memory: bool| pipes.iter().filter(|p| p.pipe.is_memory() == memory).map(|p| p.cycles).fold(0.0_f64, f64::max);
    let (max_compute, max_memory) = (max_of(false), max_of(true));
    let top = pipes.iter().filter(|p| p.cycles > 0.0).max_by(|a, b| a.cycles.total_cmp(&b.cycles));
    let ceiling_cycles = top.map_or(0.0, |p| p.cycles);
    let ceiling_us = ceiling_cycles / (clock * 1e3);
    let efficiency = work.measured_us.filter(|_| ceiling_us > 0.0).map(|m| ceiling_us / m);
    let bottleneck = top.map(|p| p.pipe);
    let mut verdict = match bottleneck {
        None => "no demand".to_string(),
        Some(p) if p.is_memory() => format!("memory-bound: {}", p.label()),
        Some(p) => format!("compute-bound: {} pipe", p.label()),
    };
    if let Some(e) = efficiency {
        verdict.push_str(&format!(", at {:.0} % of the ceiling", e * 100.0));
    }
    let cycles_of = |p: Pipe| pipes[Pipe::ALL.iter().position(|x| *x == p).unwrap_or(0)].cycles;
    let features = PipeFeatures {
        tensor_cycles: cycles_of(Pipe::Tensor),
        fma_cycles: cycles_of(Pipe::Fma),
        fp64_cycles: cycles_of(Pipe::Fp64),
        alu_cycles: cycles_of(Pipe::Alu),
        xu_cycles: cycles_of(Pipe::Xu),
        lsu_cycles: cycles_of(Pipe::Lsu),
        l1_cycles: cycles_of(Pipe::L1),
        l2_cycles: cycles_of(Pipe::L2),
        dram_cycles: cycles_of(Pipe::Dram),
        max_compute_cycles: max_compute,
        max_memory_cycles: max_memory,
        ceiling_cycles,
        waves: waves as f64,
        ctas_per_sm: ctas_per_sm as f64,
        blocks_per_sm: occ.blocks_per_sm as f64,
        occupancy: occ.occupancy,
        sm_count: sms as f64,
        clock_ghz: clock,
        fp32_tflops: gpu.peak_tflops.fp32,
        tensor_tflops,
        dram_gbs: dram,
        l2_gbs: l2,
        l1_gbs: l1,
        l2_mib: gpu.l2_mib,
    };
    Ok(PipeEstimate {
        pipes,
        bottleneck,
        verdict,
        ceiling_cycles,
        ceiling_us,
        measured_us: work.measured_us,
        efficiency,
        waves,
        ctas_per_sm,
        occupancy: occ,
        features,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hw::lookup;

    fn a100() -> GpuSpec {
        lookup("A100-SXM4-40GB").unwrap().spec.clone()
    }

    #[test]
    fn gemm_tile_grid_on_a100() {
        // 216 CTAs × 256 threads on 108 SMs → 2 CTAs on the busiest SM, share 2/216.
        // Tensor: 2·4096·4096·4096 = 137,438,953,472 FLOP; per SM per cycle 312e12/(108·1.41e9) = 2048.857;
        // cycles = 137,438,953,472 · (2/216) / 2048.857 = 621,118.3 → 440.51 µs at 1.41 GHz (= the roofline's
        // tensor bound, since 216 CTAs divide evenly).
        // DRAM: 1e8 B at 1555/1.41 = 1102.84 B/cycle = 90,675.3 cycles.
        let mut w = PipeWork::launch(216, 256);
        w.flops_tensor = 137_438_953_472.0;
        w.dram_bytes = 1e8;
        w.measured_us = Some(550.0);
        let e = estimate(&w, &a100()).unwrap();
        assert_eq!((e.ctas_per_sm, e.waves), (2, 1));
        let tensor = e.pipe(Pipe::Tensor);
        assert!((tensor.throughput_per_cycle - 2048.857).abs() < 0.001);
        assert!((tensor.cycles - 621_118.3).abs() < 0.1, "{}", tensor.cycles);
        assert!((e.ceiling_us - 440.509).abs() < 1e-3);
        assert!((e.pipe(Pipe::Dram).cycles - 90_675.3).abs() < 0.1);
        assert_eq!(e.bottleneck, Some(Pipe::Tensor));
        // efficiency = 440.509 / 550 = 0.801.
        assert!((e.efficiency.unwrap() - 0.8009).abs() < 1e-4);
        assert_eq!(e.verdict, "compute-bound: tensor pipe, at 80 % of the ceiling");
        // 256 threads, no register info: 2048/256 = 8 blocks/SM, 64 of 64 warps.
        assert_eq!((e.occupancy.blocks_per_sm, e.occupancy.occupancy), (8, 1.0));
        assert_eq!(e.features.values().len(), PipeFeatures::NAMES.len());
        assert_eq!(e.features.tensor_cycles, tensor.cycles);
    }

    #[test]
    fn tail_wave_raises_the_busiest_share() {
        // 109 CTAs on 108 SMs: the busiest SM runs 2 CTAs (share 2/109), 2 waves with 1 resident block.
        // ALU: 109,000 warp instructions · 2/109 = 2000 on 2 per cycle = 1000 cycles;
        // XU: 10,900 · 2/109 = 200 on 16/32 = 0.5 per cycle = 400 cycles; LSU: 54,500 · 2/109 = 1000 cycles.
        let mut w = PipeWork::launch(109, 1024);
        w.blocks_per_sm = Some(1);
        w.alu_warp_insts = 109_000.0;
        w.xu_warp_insts = 10_900.0;
        w.lsu_warp_insts = 54_500.0;
        let e = estimate(&w, &a100()).unwrap();
        assert_eq!((e.ctas_per_sm, e.waves), (2, 2));
        assert!((e.pipe(Pipe::Alu).cycles - 1000.0).abs() < 1e-9);
        assert!((e.pipe(Pipe::Xu).cycles - 400.0).abs() < 1e-9);
        assert!((e.pipe(Pipe::Lsu).cycles - 1000.0).abs() < 1e-9);
        // ALU and LSU tie at 1000 cycles: the ceiling is 1000 / 1.41 GHz = 0.7092 µs.
        assert!((e.ceiling_us - 0.709_22).abs() < 1e-5);
        assert_eq!(e.occupancy.limit, "given");
        assert_eq!(e.occupancy.occupancy, 0.5);
        assert!(e.verdict.starts_with("compute-bound"));
    }

    #[test]
    fn fp32_and_fp16_share_the_fma_pipe_and_memory_binds() {
        // 108 CTAs → share 1/108. FP32: 1.3824e9 FLOP / 108 = 12.8e6 on 19.5e12/(108·1.41e9) = 128.054 FLOP/cycle
        // = 99,958.2 cycles; FP16 vector (GA100: 78 TFLOP/s → 512.214 FLOP/cycle): 5.5296e9 / 108 = 51.2e6 →
        // 99,958.2 cycles; FMA = 199,916.3 cycles. DRAM: 4e8 B / (1555/1.41 = 1102.84 B/cycle) = 362,701 cycles
        // → memory-bound: DRAM.
        let mut w = PipeWork::launch(108, 128);
        w.flops_fp32 = 1.3824e9;
        w.flops_fp16 = 5.5296e9;
        w.dram_bytes = 4e8;
        w.l2_bytes = 4e8;
        let e = estimate(&w, &a100()).unwrap();
        assert!((e.pipe(Pipe::Fma).cycles - 199_916.3).abs() < 0.1, "{}", e.pipe(Pipe::Fma).cycles);
        assert!((e.pipe(Pipe::Dram).cycles - 362_701.0).abs() < 1.0);
        // L2 default 3110 GB/s → half the DRAM cycles.
        assert!((e.pipe(Pipe::L2).cycles - 181_350.5).abs() < 1.0);
        assert_eq!(e.verdict, "memory-bound: DRAM");
        assert_eq!(e.features.max_memory_cycles, e.pipe(Pipe::Dram).cycles);
        assert_eq!(e.features.max_compute_cycles, e.pipe(Pipe::Fma).cycles);
        assert_eq!(e.efficiency, None);
    }

    #[test]
    fn invalid_work_is_refused() {
        let w = PipeWork::launch(0, 128);
        assert_eq!(estimate(&w, &a100()).unwrap_err().field, "blocks");
        let mut w = PipeWork::launch(10, 128);
        w.dram_bytes = f64::NAN;
        assert_eq!(estimate(&w, &a100()).unwrap_err().field, "dram_bytes");
        let mut w = PipeWork::launch(10, 128);
        w.measured_us = Some(0.0);
        assert_eq!(estimate(&w, &a100()).unwrap_err().field, "measured_us");
        let mut w = PipeWork::launch(10, 128);
        w.flops_tensor = 1.0;
        w.tensor_precision = Some(Precision::Fp8);
        assert_eq!(estimate(&w, &a100()).unwrap_err().field, "tensor_precision");
        let e = estimate(&PipeWork::launch(10, 128), &a100()).unwrap();
        assert_eq!((e.bottleneck, e.verdict.as_str(), e.ceiling_us), (None, "no demand", 0.0));
    }
}
