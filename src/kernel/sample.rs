//! From a profiled kernel ([`KernelSample`]: Nsight Compute, rocprof) to every kernel model its metrics allow,
//! set beside the measured duration.
//!
//! What each model needs, and where it comes from (metric names are [`crate::samples::kernel_metrics`] plus the
//! extra names of [`metrics`]):
//! - **roofline** — any of `flops_fp64`, `flops_fp32`, `flops_fp16`, `flops_tensor`, `l1_bytes`, `l2_bytes`,
//!   `dram_bytes`. The tensor precision is the sample's `dtype` / `precision` attribute, else fp16 (Nsight's
//!   tensor-pipe counters do not say).
//! - **pipes** — additionally `grid` and `block`; optional `registers_per_thread`, `shared_mem_bytes` (occupancy)
//!   and the warp-level pipe counts `inst_executed_pipe_alu` / `_xu` / `_lsu`.
//! - **Hong–Kim** — per-thread instruction counts, which Nsight does not report directly. Either the sample carries
//!   them under the request's names (`comp_insts`, `coal_mem_insts`, `uncoal_mem_insts`, `synch_insts`,
//!   `uncoal_per_mw`, `load_bytes_per_warp` — e.g. from a PTX/SASS instruction counter), or they are derived from
//!   warp-level totals: with W = blocks · ⌈threads per block / warp size⌉ warps,
//!   #Mem = `inst_executed_global_mem` / W, #Synch = `inst_executed_barrier` / W (0 if absent),
//!   #Comp = `inst_executed` / W − #Mem − #Synch; with s = `global_sectors_per_request` (32-B sectors per warp
//!   request; 4 if absent, i.e. fully coalesced), accesses are coalesced when s ≤ 4 (one 128-B line) and
//!   uncoalesced with #Uncoal_per_mw = s otherwise, and Load_bytes_per_warp = 32·s. Hit rates `l1_hit_rate` and
//!   `l2_hit_rate` switch on the cache extension (Nsight's L2 hit rate is over all L2 requests, used as h2).
//!   #Active_blocks_per_SM comes from the occupancy calculator ([`super::machine::occupancy`]) and the machine from
//!   [`HongKimMachine::from_gpu`]. **[rec]**
//!
//! A model whose inputs are missing or invalid is listed in [`SampleEstimates::skipped`] with the reason; the
//! others still run.

use serde::Serialize;
use utoipa::ToSchema;

use super::hong_kim::{self, HongKimEstimate, HongKimKernel, HongKimMachine};
use super::machine;
use super::pipes::{self, PipeEstimate, PipeWork};
use super::roofline::{self, RooflineEstimate, RooflineWork};
use super::KernelModelError;
use crate::hw::{GpuSpec, Precision};
use crate::samples::{kernel_metrics as km, KernelSample};

/// Metric names the kernel models read beyond [`crate::samples::kernel_metrics`] (parsers may add them; the
/// Nsight Compute metric that gives each is named).
pub mod metrics {
    /// Computation instructions per thread (Hong–Kim #Comp_insts).
    pub const COMP_INSTS: &str = "comp_insts";
    /// Coalesced global-memory instructions per thread.
    pub const COAL_MEM_INSTS: &str = "coal_mem_insts";
    /// Uncoalesced global-memory instructions per thread.
    pub const UNCOAL_MEM_INSTS: &str = "uncoal_mem_insts";
    /// Barrier instructions per thread.
    pub const SYNCH_INSTS: &str = "synch_insts";
    /// Transactions per uncoalesced warp access.
    pub const UNCOAL_PER_MW: &str = "uncoal_per_mw";
    /// Bytes per warp memory instruction.
    pub const LOAD_BYTES_PER_WARP: &str = "load_bytes_per_warp";
    /// Warp instructions executed, whole kernel (`smsp__inst_executed.sum`).
    pub const INST_EXECUTED: &str = "inst_executed";
    /// Global load + store warp instructions (`smsp__inst_executed_op_global_ld.sum` + `_st.sum`).
    pub const INST_EXECUTED_GLOBAL_MEM: &str = "inst_executed_global_mem";
    /// Barrier (`BAR`) warp instructions.
    pub const INST_EXECUTED_BARRIER: &str = "inst_executed_barrier";
    /// 32-B sectors per global load request (`l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum` /
    /// `l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum`).
    pub const GLOBAL_SECTORS_PER_REQUEST: &str = "global_sectors_per_request";
    /// ALU-pipe warp instructions (`sm__inst_executed_pipe_alu.sum`).
    pub const INST_PIPE_ALU: &str = "inst_executed_pipe_alu";
    /// XU-pipe warp instructions (`sm__inst_executed_pipe_xu.sum`).
    pub const INST_PIPE_XU: &str = "inst_executed_pipe_xu";
    /// LSU-pipe warp instructions (`sm__inst_executed_pipe_lsu.sum`).
    pub const INST_PIPE_LSU: &str = "inst_executed_pipe_lsu";
}

/// A model that could not be evaluated for a sample, and why.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct SkippedModel {
    /// `roofline`, `pipes` or `hong_kim`.
    pub model: &'static str,
    pub reason: String,
}

/// One model's time beside the measurement.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct ModelTime {
    /// `roofline`, `pipes` (the ceiling) or `hong_kim`.
    pub model: &'static str,
    /// The model's time, µs.
    pub estimate_us: f64,
    /// measured / estimate (> 1: the kernel is slower than the model; ln of it is the learned model's target).
    pub measured_over_estimate: f64,
}

/// Every model a sample's metrics allow, and the measured duration.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct SampleEstimates {
    /// Kernel name.
    pub kernel: String,
    /// GPU the models ran for.
    pub gpu: String,
    /// Measured duration, µs.
    pub measured_us: f64,
    pub roofline: Option<RooflineEstimate>,
    pub pipes: Option<PipeEstimate>,
    pub hong_kim: Option<HongKimEstimate>,
    /// Each evaluated model's time against the measurement.
    pub times: Vec<ModelTime>,
    /// Models not evaluated, with the reason.
    pub skipped: Vec<SkippedModel>,
    /// Assumptions made while deriving inputs.
    pub notes: Vec<String>,
}

fn metric(s: &KernelSample, name: &str) -> Option<f64> {
    s.metrics.get(name).copied()
}

fn m0(s: &KernelSample, name: &str) -> f64 {
    metric(s, name).unwrap_or(0.0)
}

/// Blocks in the grid and threads per block, when the sample has both.
fn launch(s: &KernelSample) -> Result<(u64, u32), String> {
    let (Some(g), Some(b)) = (s.grid, s.block) else {
        return Err("needs the launch's grid and block sizes".into());
    };
    let blocks = g.iter().try_fold(1u64, |a, x| a.checked_mul(*x)).ok_or("grid size overflows")?;
    let threads = b.iter().try_fold(1u64, |a, x| a.checked_mul(*x)).ok_or("block size overflows")?;
    if blocks == 0 || threads == 0 {
        return Err(format!("empty launch: grid {g:?}, block {b:?}"));
    }
    let threads = u32::try_from(threads).map_err(|_| format!("block of {threads} threads"))?;
    Ok((blocks, threads))
}

fn tensor_precision(s: &KernelSample, notes: &mut Vec<String>) -> Option<Precision> {
    let p = ["tensor_precision", "precision", "dtype"]
        .iter()
        .find_map(|k| s.attributes.get(*k).and_then(|v| Precision::parse(v)));
    if p.is_none() && m0(s, km::FLOPS_TENSOR) > 0.0 {
        notes.push("tensor precision not stated: fp16 assumed".into());
    }
    p
}

/// Per-thread Hong–Kim counts from the sample (module doc), or why they cannot be had.
fn hong_kim_kernel(
    s: &KernelSample,
    gpu: &GpuSpec,
    blocks: u64,
    threads: u32,
    notes: &mut Vec<String>,
) -> Result<HongKimKernel, String> {
    let occ = machine::occupancy(gpu, threads, metric(s, km::REGISTERS_PER_THREAD), metric(s, km::SHARED_MEM_BYTES))
        .map_err(|e| e.to_string())?;
    let mut k = HongKimKernel {
        comp_insts: 0.0,
        coal_mem_insts: 0.0,
        uncoal_mem_insts: 0.0,
        synch_insts: m0(s, metrics::SYNCH_INSTS),
        threads_per_block: threads,
        blocks,
        active_blocks_per_sm: occ.blocks_per_sm,
        uncoal_per_mw: metric(s, metrics::UNCOAL_PER_MW),
        load_bytes_per_warp: metric(s, metrics::LOAD_BYTES_PER_WARP),
        l1_hit_rate: metric(s, km::L1_HIT_RATE),
        l2_hit_rate: metric(s, km::L2_HIT_RATE),
    };
    if let Some(comp) = metric(s, metrics::COMP_INSTS) {
        k.comp_insts = comp;
        k.coal_mem_insts = m0(s, metrics::COAL_MEM_INSTS);
        k.uncoal_mem_insts = m0(s, metrics::UNCOAL_MEM_INSTS);
        if k.uncoal_mem_insts > 0.0 && k.uncoal_per_mw.is_none() {
            k.uncoal_per_mw = metric(s, metrics::GLOBAL_SECTORS_PER_REQUEST);
        }
        return Ok(k);
    }
    let (Some(total), Some(mem)) = (metric(s, metrics::INST_EXECUTED), metric(s, metrics::INST_EXECUTED_GLOBAL_MEM))
    else {
        return Err(format!(
            "needs per-thread instruction counts ({}, …) or the warp totals {} and {}",
            metrics::COMP_INSTS,
            metrics::INST_EXECUTED,
            metrics::INST_EXECUTED_GLOBAL_MEM
        ));
    };
    let warps = blocks as f64 * threads.div_ceil(machine::warp_size(gpu)) as f64;
    let mem = mem / warps;
    let synch = m0(s, metrics::INST_EXECUTED_BARRIER) / warps;
    k.synch_insts = synch;
    k.comp_insts = (total / warps - mem - synch).max(0.0);
    let sectors = match metric(s, metrics::GLOBAL_SECTORS_PER_REQUEST) {
        Some(x) => x,
        None => {
            notes.push("global_sectors_per_request absent: accesses taken as coalesced (4 sectors)".into());
            4.0
        }
    };
    if sectors <= 4.0 + 1e-9 {
        k.coal_mem_insts = mem;
    } else {
        k.uncoal_mem_insts = mem;
        k.uncoal_per_mw = Some(sectors);
    }
    if k.load_bytes_per_warp.is_none() && sectors > 0.0 {
        k.load_bytes_per_warp = Some(machine::SECTOR_BYTES * sectors);
    }
    notes.push(format!(
        "Hong–Kim counts derived from warp totals over {warps} warps: comp {:.3}, mem {:.3}, synch {:.3} per thread",
        k.comp_insts, mem, synch
    ));
    Ok(k)
}

/// Runs every model `sample`'s metrics allow on `gpu` (module doc).
///
/// Errors: a duration that is not a positive number (`duration_us`). Models that cannot run are reported in
/// [`SampleEstimates::skipped`], not as errors.
pub fn estimate_sample(sample: &KernelSample, gpu: &GpuSpec) -> Result<SampleEstimates, KernelModelError> {
    let measured = super::positive("duration_us", sample.duration_us)?;
    let mut notes = Vec::new();
    let mut skipped = Vec::new();
    let precision = tensor_precision(sample, &mut notes);

    let rw = RooflineWork {
        flops_fp64: m0(sample, km::FLOPS_FP64),
        flops_fp32: m0(sample, km::FLOPS_FP32),
        flops_fp16: m0(sample, km::FLOPS_FP16),
        flops_tensor: m0(sample, km::FLOPS_TENSOR),
        tensor_precision: precision,
        l1_bytes: m0(sample, km::L1_BYTES),
        l2_bytes: m0(sample, km::L2_BYTES),
        dram_bytes: m0(sample, km::DRAM_BYTES),
    };
    let roofline = match roofline::estimate(&rw, gpu) {
        Ok(r) if r.binding.is_some() => Some(r),
        Ok(_) => {
            skipped.push(SkippedModel { model: "roofline", reason: "no FLOP or byte metrics".into() });
            None
        }
        Err(e) => {
            skipped.push(SkippedModel { model: "roofline", reason: e.to_string() });
            None
        }
    };

    let (pipes, hong_kim) = match launch(sample) {
        Err(reason) => {
            skipped.push(SkippedModel { model: "pipes", reason: reason.clone() });
            skipped.push(SkippedModel { model: "hong_kim", reason });
            (None, None)
        }
        Ok((blocks, threads)) => {
            let pw = PipeWork {
                blocks_per_sm: None,
                registers_per_thread: metric(sample, km::REGISTERS_PER_THREAD),
                shared_mem_bytes_per_block: metric(sample, km::SHARED_MEM_BYTES),
                flops_tensor: rw.flops_tensor,
                tensor_precision: precision,
                flops_fp32: rw.flops_fp32,
                flops_fp16: rw.flops_fp16,
                flops_fp64: rw.flops_fp64,
                alu_warp_insts: m0(sample, metrics::INST_PIPE_ALU),
                xu_warp_insts: m0(sample, metrics::INST_PIPE_XU),
                lsu_warp_insts: m0(sample, metrics::INST_PIPE_LSU),
                l1_bytes: rw.l1_bytes,
                l2_bytes: rw.l2_bytes,
                dram_bytes: rw.dram_bytes,
                measured_us: Some(measured),
                ..PipeWork::launch(blocks, threads)
            };
            let pipes = match pipes::estimate(&pw, gpu) {
                Ok(p) if p.bottleneck.is_some() => Some(p),
                Ok(_) => {
                    skipped
                        .push(SkippedModel { model: "pipes", reason: "no FLOP, instruction or byte metrics".into() });
                    None
                }
                Err(e) => {
                    skipped.push(SkippedModel { model: "pipes", reason: e.to_string() });
                    None
                }
            };
            let hk = hong_kim_kernel(sample, gpu, blocks, threads, &mut notes)
                .and_then(|k| hong_kim::estimate(&HongKimMachine::from_gpu(gpu), &k).map_err(|e| e.to_string()));
            let hk = match hk {
                Ok(e) => Some(e),
                Err(reason) => {
                    skipped.push(SkippedModel { model: "hong_kim", reason });
                    None
                }
            };
            (pipes, hk)
        }
    };

    let mut times = Vec::new();
    let mut push = |model: &'static str, t: Option<f64>| {
        if let Some(t) = t.filter(|t| *t > 0.0) {
            times.push(ModelTime { model, estimate_us: t, measured_over_estimate: measured / t });
        }
    };
    push("roofline", roofline.as_ref().map(|r| r.time_us));
    push("pipes", pipes.as_ref().map(|p| p.ceiling_us));
    push("hong_kim", hong_kim.as_ref().map(|h| h.time_us));
    Ok(SampleEstimates {
        kernel: sample.name.clone(),
        gpu: gpu.name.clone(),
        measured_us: measured,
        roofline,
        pipes,
        hong_kim,
        times,
        skipped,
        notes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hw::lookup;
    use std::collections::BTreeMap;

    fn a100() -> GpuSpec {
        lookup("A100-SXM4-40GB").unwrap().spec.clone()
    }

    fn sample(metrics: &[(&str, f64)], grid: Option<[u64; 3]>, block: Option<[u64; 3]>) -> KernelSample {
        KernelSample {
            name: "k".into(),
            gpu: None,
            duration_us: 100.0,
            grid,
            block,
            metrics: metrics.iter().map(|(k, v)| (k.to_string(), *v)).collect::<BTreeMap<_, _>>(),
            attributes: Default::default(),
        }
    }

    #[test]
    fn roofline_only_without_a_launch() {
        // DRAM 1.555e8 B at 1555 GB/s = 100 µs = the measured duration → ratio 1.
        let s = sample(&[(km::DRAM_BYTES, 1.555e8), (km::FLOPS_FP32, 1e6)], None, None);
        let e = estimate_sample(&s, &a100()).unwrap();
        let r = e.roofline.as_ref().unwrap();
        assert_eq!(r.verdict, "memory-bound: DRAM");
        assert!((r.time_us - 100.0).abs() < 1e-9);
        assert_eq!(e.times.len(), 1);
        assert!((e.times[0].measured_over_estimate - 1.0).abs() < 1e-12);
        let skipped: Vec<_> = e.skipped.iter().map(|s| s.model).collect();
        assert_eq!(skipped, vec!["pipes", "hong_kim"]);
        assert!(e.skipped[0].reason.contains("grid"));
    }

    #[test]
    fn pipes_and_hong_kim_from_warp_totals() {
        // Grid 216 × block 128 on A100: 4 warps per block, W = 864 warps. Warp totals: 34,560 instructions,
        // 3,456 global memory, 864 barriers → per thread mem 4, synch 1, comp 40 − 4 − 1 = 35.
        // 8 sectors per request > 4 → uncoalesced, #Uncoal_per_mw = 8, Load_bytes_per_warp = 256.
        // Occupancy: 128 threads, 40 registers → threads 16, blocks 32, registers ⌊65536/5120⌋ = 12 → 12 blocks;
        // capped at ⌈216/108⌉ = 2 per SM by Hong–Kim → N = 8, #Rep = 216/(2·108) = 1.
        let s = sample(
            &[
                (km::DRAM_BYTES, 1e7),
                (km::FLOPS_FP32, 1e8),
                (km::REGISTERS_PER_THREAD, 40.0),
                (metrics::INST_EXECUTED, 34_560.0),
                (metrics::INST_EXECUTED_GLOBAL_MEM, 3_456.0),
                (metrics::INST_EXECUTED_BARRIER, 864.0),
                (metrics::GLOBAL_SECTORS_PER_REQUEST, 8.0),
                (metrics::INST_PIPE_LSU, 3_456.0),
            ],
            Some([216, 1, 1]),
            Some([128, 1, 1]),
        );
        let e = estimate_sample(&s, &a100()).unwrap();
        assert!(e.skipped.is_empty(), "{:?}", e.skipped);
        let p = e.pipes.as_ref().unwrap();
        assert_eq!((p.ctas_per_sm, p.occupancy.blocks_per_sm, p.occupancy.limit), (2, 12, "registers"));
        // Pipe efficiency = ceiling / 100 µs.
        assert!((p.efficiency.unwrap() - p.ceiling_us / 100.0).abs() < 1e-12);
        let h = e.hong_kim.as_ref().unwrap();
        assert_eq!((h.n_warps, h.rep, h.active_blocks_per_sm), (8.0, 1.0, 2));
        assert!((h.comp_cycles - h.machine.issue_cycles * (35.0 + 4.0)).abs() < 1e-9);
        // Mem_L_Uncoal = Mem_LD + 7 · departure_uncoal.
        let m = &h.machine;
        assert!((h.mem_l_uncoal_cycles - (m.dram_latency_cycles + 7.0 * m.departure_delay_uncoal_cycles)).abs() < 1e-9);
        assert_eq!(e.times.len(), 3);
        assert!(e.notes.iter().any(|n| n.contains("864 warps")));
    }

    #[test]
    fn direct_counts_and_bad_samples() {
        let mut s = sample(
            &[
                (metrics::COMP_INSTS, 27.0),
                (metrics::UNCOAL_MEM_INSTS, 6.0),
                (metrics::UNCOAL_PER_MW, 32.0),
                (km::FLOPS_TENSOR, 1e9),
            ],
            Some([80, 1, 1]),
            Some([128, 1, 1]),
        );
        s.attributes.insert("dtype".into(), "bf16".into());
        let e = estimate_sample(&s, &a100()).unwrap();
        // Mem_L_Uncoal = 450 ns · 1.41 GHz + 31 · (32 B · 108 · 1.41 / 1555) = 634.5 + 31 · 3.133736 = 731.6458.
        assert!((e.hong_kim.as_ref().unwrap().mem_l_uncoal_cycles - 731.6458).abs() < 1e-3);
        assert!(e.notes.is_empty());
        // A V100 has no bf16 tensor path: roofline and pipes are skipped with the reason, Hong–Kim still runs.
        let v100 = lookup("V100-SXM2").unwrap().spec.clone();
        let e = estimate_sample(&s, &v100).unwrap();
        assert_eq!(e.skipped.iter().map(|s| s.model).collect::<Vec<_>>(), vec!["roofline", "pipes"]);
        assert!(e.hong_kim.is_some());
        // No instruction metrics: Hong–Kim is skipped.
        let s2 = sample(&[(km::DRAM_BYTES, 1.0)], Some([1, 1, 1]), Some([32, 1, 1]));
        let e = estimate_sample(&s2, &a100()).unwrap();
        assert!(e.skipped.iter().any(|s| s.model == "hong_kim" && s.reason.contains("inst_executed")));
        // A non-positive duration is an error.
        let mut bad = s2.clone();
        bad.duration_us = 0.0;
        assert_eq!(estimate_sample(&bad, &a100()).unwrap_err().field, "duration_us");
    }
}
