//! Hong & Kim's MWP/CWP model ("An Analytical Model for a GPU Architecture with Memory-level and Thread-level
//! Parallelism Awareness", ISCA 2009) — S0's kernel model — with S0's two-level cache extension
//! (MODELS.md §2.2).
//!
//! Per-thread dynamic instruction counts, the launch configuration and the machine's latency, departure delays,
//! issue cost and bandwidth give the kernel's cycles:
//! ```text
//! Mem_L_Uncoal   = Mem_LD + (#Uncoal_per_mw − 1)·Departure_del_uncoal          Mem_L_Coal = Mem_LD
//! Mem_L          = Mem_L_Uncoal·W_uncoal + Mem_L_Coal·W_coal       (W = share of #Mem_insts)
//! Departure_delay = Departure_del_uncoal·#Uncoal_per_mw·W_uncoal + Departure_del_coal·W_coal
//! MWP_Without_BW = min(Mem_L / Departure_delay, N)
//! BW_per_warp    = Freq·Load_bytes_per_warp / Mem_L                     [GB/s]
//! MWP_peak_BW    = Mem_Bandwidth / (BW_per_warp·#Active_SMs)
//! MWP            = min(MWP_Without_BW, MWP_peak_BW, N)
//! Comp_cycles    = Issue_cycles·(#Comp_insts + #Mem_insts)
//! Mem_cycles     = Mem_L_Uncoal·#Uncoal + Mem_L_Coal·#Coal
//! CWP            = min((Mem_cycles + Comp_cycles)/Comp_cycles, N)
//! #Rep           = #Blocks / (#Active_blocks_per_SM·#Active_SMs)
//! Case 1 (MWP = N = CWP):           Exec = (Mem_cycles + Comp_cycles + Comp_cycles/#Mem_insts·(MWP−1))·#Rep
//! Case 2 (CWP ≥ MWP or Comp > Mem): Exec = (Mem_cycles·N/MWP + Comp_cycles/#Mem_insts·(MWP−1))·#Rep
//! Case 3 (otherwise, MWP > CWP):    Exec = (Mem_L + Comp_cycles·N)·#Rep
//! Synch_cost     = Departure_delay·(MWP−1)·#Synch_insts·#Active_blocks_per_SM·#Rep
//! cycles         = Exec + Synch_cost;   time = cycles / Freq
//! ```
//! N = warps per block × active blocks per SM; #Active_SMs = min(#Blocks, #SMs). Guards: with #Mem_insts = 0,
//! Exec = Comp_cycles·N·#Rep and there is no synchronisation cost (nothing departs); MWP = N and CWP = N are
//! compared with a relative tolerance of 1e-9; the active blocks per SM are capped at ⌈#Blocks / #Active_SMs⌉
//! (a grid smaller than the GPU cannot fill an SM with more blocks than it has — without the cap #Rep would fall
//! below 1 for such grids).
//!
//! **Cache extension** (S0 "filters cache hits"; **[rec]**): with hit rates h1 (L1) and h2 (L2, of L1 misses),
//! Mem_LD is replaced by AMAT = h1·lat_L1 + (1−h1)·(h2·lat_L2 + (1−h2)·lat_DRAM), and MWP is also limited by
//! MWP_peak_BW_L2 = BW_L2 / (Freq·(1−h1)·Load_bytes_per_warp/Mem_L · #Active_SMs), while the DRAM term uses the
//! bytes that reach DRAM, (1−h1)(1−h2)·Load_bytes_per_warp. Without hit rates the model is the paper's exactly.
//!
//! Machine parameters can be given one by one, or taken from a [`GpuSpec`] ([`HongKimMachine::from_gpu`]) with
//! any of them overridden ([`HongKimMachineInput`]).

mod input;

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::{fraction, non_negative, positive, KernelModelError};
use crate::hw::GpuSpec;

pub use input::{HongKimKernel, HongKimMachine, HongKimMachineInput, HongKimRequest};

/// Relative tolerance of the MWP = N and CWP = N comparisons (case 1).
pub const CASE1_TOLERANCE: f64 = 1e-9;

/// Which of the paper's execution-time cases applies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum HongKimCase {
    /// MWP = N = CWP: enough warps to hide both memory and computation.
    Case1,
    /// CWP ≥ MWP (or Comp_cycles > Mem_cycles): memory warp parallelism limits.
    Case2,
    /// MWP > CWP: computation dominates.
    Case3,
    /// No memory instructions (guard).
    NoMemory,
}

/// The model's answer with every intermediate quantity (the learned model's features).
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct HongKimEstimate {
    /// Exec_cycles + Synch_cost.
    pub cycles: f64,
    /// cycles / Freq, µs.
    pub time_us: f64,
    pub case: HongKimCase,
    /// Plain-language reading of the case.
    pub verdict: String,
    /// What bounds MWP: `departure_delay`, `dram_bandwidth`, `l2_bandwidth` or `warps` (N).
    pub mwp_limit: &'static str,
    /// Exec_cycles.
    pub exec_cycles: f64,
    /// Synch_cost, cycles.
    pub synch_cost_cycles: f64,
    /// N: active warps per SM.
    pub n_warps: f64,
    pub mwp: f64,
    pub mwp_without_bw: f64,
    /// MWP_peak_BW (DRAM); `null` when no bytes reach DRAM.
    pub mwp_peak_bw: Option<f64>,
    /// MWP_peak_BW_L2 (cache extension); `null` without hit rates or L2 bandwidth.
    pub mwp_peak_bw_l2: Option<f64>,
    pub cwp: f64,
    /// Mem_L, cycles.
    pub mem_l_cycles: f64,
    pub mem_l_coal_cycles: f64,
    pub mem_l_uncoal_cycles: f64,
    /// Mem_LD used: the DRAM latency, or AMAT with the cache extension, cycles.
    pub mem_ld_cycles: f64,
    /// AMAT, cycles (cache extension only).
    pub amat_cycles: Option<f64>,
    /// Departure_delay, cycles.
    pub departure_delay_cycles: f64,
    /// BW_per_warp, GB/s (all Load_bytes_per_warp).
    pub bw_per_warp_gbs: f64,
    pub comp_cycles: f64,
    pub mem_cycles: f64,
    /// #Rep.
    pub rep: f64,
    /// #Active_SMs.
    pub active_sms: u64,
    /// #Active_blocks_per_SM used (after the grid-size cap).
    pub active_blocks_per_sm: u32,
    pub warps_per_block: u32,
    /// The machine parameters used.
    pub machine: HongKimMachine,
    /// Machine numbers that were not given, with their origin.
    pub defaults_used: Vec<String>,
}

/// Resolves the request's machine against `base` (the spec of `gpu.name`, resolved by the caller from the
/// catalog or a stored system) and runs [`estimate`].
///
/// Errors: `gpu.name` given but `base` is `None` (unknown GPU), a missing machine number without a base, and every
/// error of [`estimate`].
pub fn estimate_request(req: &HongKimRequest, base: Option<&GpuSpec>) -> Result<HongKimEstimate, KernelModelError> {
    if let (Some(n), None) = (&req.gpu.name, base) {
        return Err(KernelModelError::new("gpu.name", format!("unknown GPU {n:?}")));
    }
    let (m, notes) = req.gpu.resolve(base)?;
    let mut e = estimate(&m, &req.kernel)?;
    e.defaults_used = notes;
    Ok(e)
}

/// Evaluates the model (module doc) for `kernel` on machine `m`.
///
/// Errors (field paths `gpu.*`, `kernel.*`): non-positive clock, bandwidth or issue cycles; zero SMs, warp size,
/// threads per block, blocks or active blocks; negative or non-finite counts; no instructions at all; uncoalesced
/// accesses without `uncoal_per_mw` ≥ 1; a non-positive `load_bytes_per_warp`; hit rates outside [0, 1]; a hit
/// rate > 0 without the latency of that level.
pub fn estimate(m: &HongKimMachine, k: &HongKimKernel) -> Result<HongKimEstimate, KernelModelError> {
    m.validate()?;
    let comp = non_negative("kernel.comp_insts", k.comp_insts)?;
    let coal = non_negative("kernel.coal_mem_insts", k.coal_mem_insts)?;
    let uncoal = non_negative("kernel.uncoal_mem_insts", k.uncoal_mem_insts)?;
    let synch = non_negative("kernel.synch_insts", k.synch_insts)?;
    if k.threads_per_block == 0 {
        return Err(KernelModelError::new("kernel.threads_per_block", "must be at least 1"));
    }
    if k.blocks == 0 {
        return Err(KernelModelError::new("kernel.blocks", "must be at least 1"));
    }
    if k.active_blocks_per_sm == 0 {
        return Err(KernelModelError::new("kernel.active_blocks_per_sm", "must be at least 1"));
    }
    let mem_insts = coal + uncoal;
    if comp + mem_insts == 0.0 {
        return Err(KernelModelError::new("kernel.comp_insts", "the kernel has no instructions"));
    }
    let uncoal_per_mw = match k.uncoal_per_mw {
        Some(u) if !(u.is_finite() && u >= 1.0) => {
            return Err(KernelModelError::new("kernel.uncoal_per_mw", format!("must be ≥ 1, got {u}")))
        }
        Some(u) => u,
        None if uncoal > 0.0 => {
            return Err(KernelModelError::new("kernel.uncoal_per_mw", "required when uncoal_mem_insts > 0"))
        }
        None => 1.0,
    };
    let load_bytes = match k.load_bytes_per_warp {
        Some(b) => positive("kernel.load_bytes_per_warp", b)?,
        None => m.warp_size as f64 * 4.0,
    };
    let h1 = k.l1_hit_rate.map(|h| fraction("kernel.l1_hit_rate", h)).transpose()?;
    let h2 = k.l2_hit_rate.map(|h| fraction("kernel.l2_hit_rate", h)).transpose()?;

    let n_sm = m.sm_count as u64;
    let warps_per_block = k.threads_per_block.div_ceil(m.warp_size);
    let active_sms = k.blocks.min(n_sm);
    let active_blocks = (k.active_blocks_per_sm as u64).min(k.blocks.div_ceil(active_sms)) as u32;
    let n = (warps_per_block * active_blocks) as f64;
    let rep = k.blocks as f64 / (active_blocks as f64 * active_sms as f64);
    let freq = m.clock_ghz;

    // Mem_LD: DRAM latency, or AMAT with the cache extension.
    let cached = h1.is_some() || h2.is_some();
    let (h1, h2) = (h1.unwrap_or(0.0), h2.unwrap_or(0.0));
    let amat = if cached {
        let lat = |v: Option<f64>, field: &str| {
            v.ok_or_else(|| KernelModelError::new(format!("gpu.{field}"), "required when its hit rate is > 0"))
        };
        let l1 = if h1 > 0.0 { lat(m.l1_latency_cycles, "l1_latency_cycles")? } else { 0.0 };
        let l2 = if h2 > 0.0 && h1 < 1.0 { lat(m.l2_latency_cycles, "l2_latency_cycles")? } else { 0.0 };
        Some(h1 * l1 + (1.0 - h1) * (h2 * l2 + (1.0 - h2) * m.dram_latency_cycles))
    } else {
        None
    };
    let mem_ld = amat.unwrap_or(m.dram_latency_cycles);
    let comp_cycles = m.issue_cycles * (comp + mem_insts);
    let mem_l_uncoal = mem_ld + (uncoal_per_mw - 1.0) * m.departure_delay_uncoal_cycles;
    let mem_l_coal = mem_ld;

    let case1 = |x: f64| (x - n).abs() <= CASE1_TOLERANCE * n;
    let mut e = HongKimEstimate {
        cycles: 0.0,
        time_us: 0.0,
        case: HongKimCase::NoMemory,
        verdict: String::new(),
        mwp_limit: "warps",
        exec_cycles: 0.0,
        synch_cost_cycles: 0.0,
        n_warps: n,
        mwp: n,
        mwp_without_bw: n,
        mwp_peak_bw: None,
        mwp_peak_bw_l2: None,
        cwp: 1.0,
        mem_l_cycles: mem_ld,
        mem_l_coal_cycles: mem_l_coal,
        mem_l_uncoal_cycles: mem_l_uncoal,
        mem_ld_cycles: mem_ld,
        amat_cycles: amat,
        departure_delay_cycles: 0.0,
        bw_per_warp_gbs: 0.0,
        comp_cycles,
        mem_cycles: 0.0,
        rep,
        active_sms,
        active_blocks_per_sm: active_blocks,
        warps_per_block,
        machine: m.clone(),
        defaults_used: Vec::new(),
    };
    if mem_insts == 0.0 {
        // Guard: nothing to overlap; the N warps issue their computation back to back.
        e.exec_cycles = comp_cycles * n * rep;
        e.verdict = "compute-bound: no memory instructions".into();
    } else {
        let (w_uncoal, w_coal) = (uncoal / mem_insts, coal / mem_insts);
        let mem_l = mem_l_uncoal * w_uncoal + mem_l_coal * w_coal;
        let departure =
            m.departure_delay_uncoal_cycles * uncoal_per_mw * w_uncoal + m.departure_delay_coal_cycles * w_coal;
        let mwp_without_bw = if departure > 0.0 { (mem_l / departure).min(n) } else { n };
        // Bandwidth one warp demands at each level, GB/s (cycles × GHz = ns, bytes/ns = GB/s).
        let per_warp = |bytes: f64| if mem_l > 0.0 { freq * bytes / mem_l } else { f64::INFINITY };
        let peak = |bw: f64, bytes: f64| {
            let d = per_warp(bytes) * active_sms as f64;
            (bytes > 0.0 && d > 0.0).then(|| bw / d)
        };
        let mwp_peak_bw = peak(m.memory_bandwidth_gbs, (1.0 - h1) * (1.0 - h2) * load_bytes);
        let mwp_peak_bw_l2 =
            if cached { m.l2_bandwidth_gbs.and_then(|bw| peak(bw, (1.0 - h1) * load_bytes)) } else { None };
        let candidates = [
            (mwp_without_bw, if mwp_without_bw < n { "departure_delay" } else { "warps" }),
            (mwp_peak_bw.unwrap_or(f64::INFINITY), "dram_bandwidth"),
            (mwp_peak_bw_l2.unwrap_or(f64::INFINITY), "l2_bandwidth"),
            (n, "warps"),
        ];
        let (mwp, mwp_limit) =
            candidates.into_iter().fold((f64::INFINITY, "warps"), |best, c| if c.0 < best.0 { c } else { best });
        let mem_cycles = mem_l_uncoal * uncoal + mem_l_coal * coal;
        let cwp = ((mem_cycles + comp_cycles) / comp_cycles).min(n);
        let per_mem = comp_cycles / mem_insts;
        let (case, exec) = if case1(mwp) && case1(cwp) {
            (HongKimCase::Case1, (mem_cycles + comp_cycles + per_mem * (mwp - 1.0)) * rep)
        } else if cwp >= mwp || comp_cycles > mem_cycles {
            (HongKimCase::Case2, (mem_cycles * n / mwp + per_mem * (mwp - 1.0)) * rep)
        } else {
            (HongKimCase::Case3, (mem_l + comp_cycles * n) * rep)
        };
        e.case = case;
        e.verdict = match case {
            HongKimCase::Case1 => "balanced: enough warps to hide memory and computation (MWP = CWP = N)".into(),
            HongKimCase::Case2 => format!("memory-bound: memory warp parallelism {mwp:.3} of {n} warps ({mwp_limit})"),
            _ => format!("compute-bound: computation warp parallelism {cwp:.3} < MWP {mwp:.3}"),
        };
        e.mwp_limit = mwp_limit;
        e.exec_cycles = exec;
        e.synch_cost_cycles = departure * (mwp - 1.0) * synch * active_blocks as f64 * rep;
        e.mwp = mwp;
        e.mwp_without_bw = mwp_without_bw;
        e.mwp_peak_bw = mwp_peak_bw;
        e.mwp_peak_bw_l2 = mwp_peak_bw_l2;
        e.cwp = cwp;
        e.mem_l_cycles = mem_l;
        e.departure_delay_cycles = departure;
        e.bw_per_warp_gbs = per_warp(load_bytes);
        e.mem_cycles = mem_cycles;
    }
    e.cycles = e.exec_cycles + e.synch_cost_cycles;
    e.time_us = e.cycles / (freq * 1e3);
    Ok(e)
}

#[cfg(test)]
mod tests;
