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

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::machine::{self, ParamSource};
use super::{fraction, non_negative, positive, KernelModelError};
use crate::hw::GpuSpec;

/// Relative tolerance of the MWP = N and CWP = N comparisons (case 1).
pub const CASE1_TOLERANCE: f64 = 1e-9;

/// The machine side of the model, every number resolved.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct HongKimMachine {
    /// #SMs.
    pub sm_count: u32,
    /// Freq, GHz.
    pub clock_ghz: f64,
    /// Mem_Bandwidth, DRAM, GB/s.
    pub memory_bandwidth_gbs: f64,
    /// Mem_LD, DRAM access latency, cycles.
    pub dram_latency_cycles: f64,
    /// Departure_del_coal: cycles between two coalesced memory warps leaving an SM.
    pub departure_delay_coal_cycles: f64,
    /// Departure_del_uncoal: cycles between two transactions of an uncoalesced warp access.
    pub departure_delay_uncoal_cycles: f64,
    /// Issue_cycles: cycles to issue one warp instruction.
    pub issue_cycles: f64,
    /// Threads per warp.
    #[serde(default = "default_warp")]
    pub warp_size: u32,
    /// L1 hit latency, cycles (cache extension; needed when the L1 hit rate is > 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub l1_latency_cycles: Option<f64>,
    /// L2 hit latency, cycles (cache extension; needed when the L2 hit rate is > 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub l2_latency_cycles: Option<f64>,
    /// L2 bandwidth, GB/s (cache extension; without it MWP has no L2 bandwidth limit).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub l2_bandwidth_gbs: Option<f64>,
}

fn default_warp() -> u32 {
    32
}

impl HongKimMachine {
    /// Machine parameters of a catalog (or user) GPU. Rules, each **[rec]** unless the spec's hierarchy gives the
    /// number:
    /// - `dram_latency_cycles`: hierarchy `dram.latency_cycles`, else 450 ns × clock ([`machine::DRAM_LATENCY_NS`]);
    /// - `issue_cycles` = warp size / FP32 lanes per SM (the paper's 4 = 32 threads / 8 SPs; A100 32/64 = 0.5);
    /// - `departure_delay_coal_cycles` = line bytes · #SMs · Freq / BW_DRAM and `departure_delay_uncoal_cycles` =
    ///   32-B sector · #SMs · Freq / BW_DRAM (MODELS.md §2.2: departure delays are not measured by MT4G; start
    ///   from bytes_per_transaction·#SMs·Freq / BW_DRAM — the cycles DRAM needs to serve one transaction from
    ///   every SM — and calibrate);
    /// - L1/L2 latencies and L2 bandwidth: [`machine::l1_latency_cycles`], [`machine::l2_latency_cycles`],
    ///   [`machine::l2_bandwidth_gbs`].
    ///
    /// A100-SXM4-40GB: Mem_LD 634.5, issue 0.4998, departure 12.53 (coal) / 3.13 (uncoal) cycles.
    pub fn from_gpu(gpu: &GpuSpec) -> HongKimMachine {
        let sms = gpu.sm_count.max(1) as f64;
        let per_byte = sms * gpu.clock_ghz / gpu.memory_bandwidth_gbs;
        let warp = machine::warp_size(gpu);
        HongKimMachine {
            sm_count: gpu.sm_count,
            clock_ghz: gpu.clock_ghz,
            memory_bandwidth_gbs: gpu.memory_bandwidth_gbs,
            dram_latency_cycles: machine::dram_latency_cycles(gpu).value,
            departure_delay_coal_cycles: machine::line_bytes(gpu).value * per_byte,
            departure_delay_uncoal_cycles: machine::SECTOR_BYTES * per_byte,
            issue_cycles: warp as f64 / machine::fp32_lanes_per_sm(gpu),
            warp_size: warp,
            l1_latency_cycles: Some(machine::l1_latency_cycles(gpu).value),
            l2_latency_cycles: Some(machine::l2_latency_cycles(gpu).value),
            l2_bandwidth_gbs: Some(machine::l2_bandwidth_gbs(gpu).value),
        }
    }

    fn validate(&self) -> Result<(), KernelModelError> {
        if self.sm_count == 0 {
            return Err(KernelModelError::new("gpu.sm_count", "must be at least 1"));
        }
        if self.warp_size == 0 {
            return Err(KernelModelError::new("gpu.warp_size", "must be at least 1"));
        }
        positive("gpu.clock_ghz", self.clock_ghz)?;
        positive("gpu.memory_bandwidth_gbs", self.memory_bandwidth_gbs)?;
        non_negative("gpu.dram_latency_cycles", self.dram_latency_cycles)?;
        non_negative("gpu.departure_delay_coal_cycles", self.departure_delay_coal_cycles)?;
        non_negative("gpu.departure_delay_uncoal_cycles", self.departure_delay_uncoal_cycles)?;
        positive("gpu.issue_cycles", self.issue_cycles)?;
        if let Some(v) = self.l1_latency_cycles {
            non_negative("gpu.l1_latency_cycles", v)?;
        }
        if let Some(v) = self.l2_latency_cycles {
            non_negative("gpu.l2_latency_cycles", v)?;
        }
        if let Some(v) = self.l2_bandwidth_gbs {
            positive("gpu.l2_bandwidth_gbs", v)?;
        }
        Ok(())
    }
}

/// The machine as a request gives it: a GPU `name` to start from (catalog name or alias, or a system's GPU) and/or
/// explicit numbers that override it. Without a name, `sm_count`, `clock_ghz`, `memory_bandwidth_gbs`,
/// `dram_latency_cycles`, both departure delays and `issue_cycles` are required (`warp_size` defaults to 32).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"sm_count": 16, "clock_ghz": 1.0, "memory_bandwidth_gbs": 80, "dram_latency_cycles": 420,
    "departure_delay_coal_cycles": 4, "departure_delay_uncoal_cycles": 10, "issue_cycles": 4}))]
pub struct HongKimMachineInput {
    /// GPU whose description supplies every number not given here.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sm_count: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clock_ghz: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_bandwidth_gbs: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dram_latency_cycles: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub departure_delay_coal_cycles: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub departure_delay_uncoal_cycles: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub issue_cycles: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub warp_size: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub l1_latency_cycles: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub l2_latency_cycles: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub l2_bandwidth_gbs: Option<f64>,
}

impl HongKimMachineInput {
    /// Resolves to a full machine: given numbers win; the rest come from `base` via
    /// [`HongKimMachine::from_gpu`], computed after `sm_count`, `clock_ghz`, `memory_bandwidth_gbs` and
    /// `warp_size` overrides are applied to it. Returns the machine and, for every number taken from `base`, a
    /// note naming it and its origin (`"dram_latency_cycles: default (450 ns × clock) [rec]"`).
    ///
    /// Errors: without `base`, the first missing required number (`gpu.<field>`).
    pub fn resolve(&self, base: Option<&GpuSpec>) -> Result<(HongKimMachine, Vec<String>), KernelModelError> {
        let Some(gpu) = base else {
            let need = |field: &str, v: Option<f64>| {
                v.ok_or_else(|| KernelModelError::new(format!("gpu.{field}"), "required when the request names no GPU"))
            };
            let sm_count = self
                .sm_count
                .ok_or_else(|| KernelModelError::new("gpu.sm_count", "required when the request names no GPU"))?;
            let m = HongKimMachine {
                sm_count,
                clock_ghz: need("clock_ghz", self.clock_ghz)?,
                memory_bandwidth_gbs: need("memory_bandwidth_gbs", self.memory_bandwidth_gbs)?,
                dram_latency_cycles: need("dram_latency_cycles", self.dram_latency_cycles)?,
                departure_delay_coal_cycles: need("departure_delay_coal_cycles", self.departure_delay_coal_cycles)?,
                departure_delay_uncoal_cycles: need(
                    "departure_delay_uncoal_cycles",
                    self.departure_delay_uncoal_cycles,
                )?,
                issue_cycles: need("issue_cycles", self.issue_cycles)?,
                warp_size: self.warp_size.unwrap_or(32),
                l1_latency_cycles: self.l1_latency_cycles,
                l2_latency_cycles: self.l2_latency_cycles,
                l2_bandwidth_gbs: self.l2_bandwidth_gbs,
            };
            let notes = if self.warp_size.is_none() { vec!["warp_size: default 32".to_string()] } else { vec![] };
            return Ok((m, notes));
        };
        let mut g = gpu.clone();
        if let Some(v) = self.sm_count {
            g.sm_count = v;
        }
        if let Some(v) = self.clock_ghz {
            g.clock_ghz = v;
        }
        if let Some(v) = self.memory_bandwidth_gbs {
            g.memory_bandwidth_gbs = v;
        }
        if let Some(v) = self.warp_size {
            g.warp_size = Some(v);
        }
        let d = HongKimMachine::from_gpu(&g);
        let origin = |s: ParamSource, default_rule: &str| match s {
            ParamSource::Hierarchy => "measured hierarchy".to_string(),
            _ => format!("default ({default_rule}) [rec]"),
        };
        let mut notes = Vec::new();
        let mut pick = |field: &str, given: Option<f64>, derived: f64, how: String| {
            given.unwrap_or_else(|| {
                notes.push(format!("{field}: {how}"));
                derived
            })
        };
        let name = &gpu.name;
        let m = HongKimMachine {
            sm_count: g.sm_count,
            clock_ghz: g.clock_ghz,
            memory_bandwidth_gbs: g.memory_bandwidth_gbs,
            dram_latency_cycles: pick(
                "dram_latency_cycles",
                self.dram_latency_cycles,
                d.dram_latency_cycles,
                origin(machine::dram_latency_cycles(&g).source, "450 ns × clock"),
            ),
            departure_delay_coal_cycles: pick(
                "departure_delay_coal_cycles",
                self.departure_delay_coal_cycles,
                d.departure_delay_coal_cycles,
                "line bytes · SMs · clock / DRAM bandwidth [rec]".into(),
            ),
            departure_delay_uncoal_cycles: pick(
                "departure_delay_uncoal_cycles",
                self.departure_delay_uncoal_cycles,
                d.departure_delay_uncoal_cycles,
                "32-B sector · SMs · clock / DRAM bandwidth [rec]".into(),
            ),
            issue_cycles: pick(
                "issue_cycles",
                self.issue_cycles,
                d.issue_cycles,
                "warp size / FP32 lanes per SM [rec]".into(),
            ),
            warp_size: d.warp_size,
            l1_latency_cycles: Some(pick(
                "l1_latency_cycles",
                self.l1_latency_cycles,
                d.l1_latency_cycles.unwrap_or_default(),
                origin(machine::l1_latency_cycles(&g).source, "vendor constant"),
            )),
            l2_latency_cycles: Some(pick(
                "l2_latency_cycles",
                self.l2_latency_cycles,
                d.l2_latency_cycles.unwrap_or_default(),
                origin(machine::l2_latency_cycles(&g).source, "vendor constant"),
            )),
            l2_bandwidth_gbs: Some(pick(
                "l2_bandwidth_gbs",
                self.l2_bandwidth_gbs,
                d.l2_bandwidth_gbs.unwrap_or_default(),
                origin(machine::l2_bandwidth_gbs(&g).source, "2 × DRAM bandwidth"),
            )),
        };
        for (field, given) in [
            ("sm_count", self.sm_count.is_some()),
            ("clock_ghz", self.clock_ghz.is_some()),
            ("memory_bandwidth_gbs", self.memory_bandwidth_gbs.is_some()),
        ] {
            if !given {
                notes.push(format!("{field}: {name} datasheet"));
            }
        }
        Ok((m, notes))
    }
}

/// The kernel side: per-thread dynamic instruction counts (averages may be fractional) and the launch.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"comp_insts": 27, "coal_mem_insts": 0, "uncoal_mem_insts": 6, "synch_insts": 6,
    "threads_per_block": 128, "blocks": 80, "active_blocks_per_sm": 5, "uncoal_per_mw": 32,
    "load_bytes_per_warp": 128}))]
pub struct HongKimKernel {
    /// #Comp_insts: computation instructions per thread.
    pub comp_insts: f64,
    /// #Coal_Mem_insts: coalesced global-memory instructions per thread.
    #[serde(default)]
    pub coal_mem_insts: f64,
    /// #Uncoal_Mem_insts: uncoalesced global-memory instructions per thread.
    #[serde(default)]
    pub uncoal_mem_insts: f64,
    /// #Synch_insts: barrier instructions per thread.
    #[serde(default)]
    pub synch_insts: f64,
    /// Threads per block.
    pub threads_per_block: u32,
    /// #Blocks in the grid.
    pub blocks: u64,
    /// #Active_blocks_per_SM (occupancy).
    pub active_blocks_per_sm: u32,
    /// #Uncoal_per_mw: transactions per uncoalesced warp memory access (needed when `uncoal_mem_insts` > 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uncoal_per_mw: Option<f64>,
    /// Load_bytes_per_warp: bytes one warp memory instruction moves; `null` = warp size × 4 B.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub load_bytes_per_warp: Option<f64>,
    /// h1: L1 hit rate, 0–1 (cache extension).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub l1_hit_rate: Option<f64>,
    /// h2: L2 hit rate of the L1 misses, 0–1 (cache extension).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub l2_hit_rate: Option<f64>,
}

/// A Hong–Kim request: `{"gpu": {...}, "kernel": {...}}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct HongKimRequest {
    pub gpu: HongKimMachineInput,
    pub kernel: HongKimKernel,
}

impl HongKimRequest {
    /// Estimates with `gpu.name` (if any) looked up in the built-in catalog.
    ///
    /// Errors: `gpu.name` not in the catalog, and every error of [`estimate_request`].
    pub fn estimate_with_catalog(&self) -> Result<HongKimEstimate, KernelModelError> {
        let base = match &self.gpu.name {
            None => None,
            Some(n) => Some(
                &crate::hw::lookup(n)
                    .ok_or_else(|| KernelModelError::new("gpu.name", format!("unknown GPU {n:?}")))?
                    .spec,
            ),
        };
        estimate_request(self, base)
    }
}

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
mod tests {
    use super::*;
    use crate::hw::lookup;

    /// The paper's worked example machine (MODELS.md §2.2): 16 SMs at 1 GHz, 80 GB/s, Mem_LD 420,
    /// departure delays 4 (coalesced) and 10 (uncoalesced), 4 issue cycles.
    fn paper_machine() -> HongKimMachine {
        HongKimMachine {
            sm_count: 16,
            clock_ghz: 1.0,
            memory_bandwidth_gbs: 80.0,
            dram_latency_cycles: 420.0,
            departure_delay_coal_cycles: 4.0,
            departure_delay_uncoal_cycles: 10.0,
            issue_cycles: 4.0,
            warp_size: 32,
            l1_latency_cycles: None,
            l2_latency_cycles: None,
            l2_bandwidth_gbs: None,
        }
    }

    fn paper_kernel() -> HongKimKernel {
        HongKimKernel {
            comp_insts: 27.0,
            coal_mem_insts: 0.0,
            uncoal_mem_insts: 6.0,
            synch_insts: 6.0,
            threads_per_block: 128,
            blocks: 80,
            active_blocks_per_sm: 5,
            uncoal_per_mw: Some(32.0),
            load_bytes_per_warp: Some(128.0),
            l1_hit_rate: None,
            l2_hit_rate: None,
        }
    }

    fn close(a: f64, b: f64, tol: f64) -> bool {
        (a - b).abs() <= tol
    }

    #[test]
    fn paper_worked_example() {
        // By hand: N = 4 warps × 5 blocks = 20; Mem_L = 420 + 31·10 = 730; Departure_delay = 10·32 = 320;
        // MWP_Without_BW = 730/320 = 2.28125; BW_per_warp = 128/730 = 0.17534 GB/s;
        // MWP_peak_BW = 80/(0.17534·16) = 28.516; MWP = 2.28125; Comp = 4·33 = 132; Mem = 730·6 = 4380;
        // CWP = min(4512/132 = 34.18, 20) = 20; #Rep = 80/(5·16) = 1; case 2:
        // Exec = 4380·20/2.28125 + 132/6·1.28125 = 38,400 + 28.1875 = 38,428.1875;
        // Synch = 320·1.28125·6·5·1 = 12,300; total 50,728.1875 cycles (the paper quotes ≈ 50,738).
        let e = estimate(&paper_machine(), &paper_kernel()).unwrap();
        assert_eq!(e.n_warps, 20.0);
        assert_eq!(e.mem_l_cycles, 730.0);
        assert_eq!(e.departure_delay_cycles, 320.0);
        assert_eq!(e.mwp, 2.28125);
        assert_eq!(e.mwp_limit, "departure_delay");
        assert!(close(e.bw_per_warp_gbs, 0.175_342, 1e-6));
        assert!(close(e.mwp_peak_bw.unwrap(), 28.515_625, 1e-9));
        assert_eq!(e.cwp, 20.0);
        assert_eq!(e.case, HongKimCase::Case2);
        assert_eq!(e.rep, 1.0);
        assert!(close(e.exec_cycles, 38_428.19, 0.01));
        assert!(close(e.synch_cost_cycles, 12_300.0, 1e-9));
        assert!((e.cycles - 50_728.0).abs() / 50_728.0 < 0.01);
        assert!(close(e.cycles, 50_728.1875, 1e-6));
        // 1 GHz: one cycle per ns.
        assert!(close(e.time_us, 50.728_187_5, 1e-9));
        assert!(e.verdict.starts_with("memory-bound"));
    }

    #[test]
    fn request_json_of_the_worked_example() {
        let req: HongKimRequest = serde_json::from_str(
            r#"{"gpu": {"sm_count": 16, "clock_ghz": 1.0, "memory_bandwidth_gbs": 80, "dram_latency_cycles": 420,
                        "departure_delay_coal_cycles": 4, "departure_delay_uncoal_cycles": 10, "issue_cycles": 4},
                "kernel": {"comp_insts": 27, "coal_mem_insts": 0, "uncoal_mem_insts": 6, "synch_insts": 6,
                           "threads_per_block": 128, "blocks": 80, "active_blocks_per_sm": 5, "uncoal_per_mw": 32,
                           "load_bytes_per_warp": 128}}"#,
        )
        .unwrap();
        let e = req.estimate_with_catalog().unwrap();
        assert!(close(e.cycles, 50_728.1875, 1e-6));
        assert_eq!(e.defaults_used, vec!["warp_size: default 32".to_string()]);
        let json = serde_json::to_value(&e).unwrap();
        assert_eq!(json["case"], "case2");
        assert_eq!(json["mwp"], 2.28125);
        // Unknown fields are refused.
        assert!(serde_json::from_str::<HongKimRequest>(r#"{"gpu": {"sms": 1}, "kernel": {}}"#).is_err());
    }

    #[test]
    fn case1_when_mwp_and_cwp_reach_n() {
        // 64 threads × 1 block = N = 2 warps; 1 coalesced load, 10 comp; Mem_L = 420, departure 4:
        // MWP_Without_BW = min(105, 2) = 2; MWP_peak_BW = 80/((128/420)·16) = 16.4; MWP = 2;
        // Comp = 4·11 = 44, Mem = 420, CWP = min(464/44 = 10.5, 2) = 2 → case 1;
        // #Rep = 16/(1·16) = 1; Exec = 420 + 44 + 44/1·(2−1) = 508; no synch.
        let k = HongKimKernel {
            comp_insts: 10.0,
            coal_mem_insts: 1.0,
            uncoal_mem_insts: 0.0,
            synch_insts: 0.0,
            threads_per_block: 64,
            blocks: 16,
            active_blocks_per_sm: 1,
            uncoal_per_mw: None,
            load_bytes_per_warp: Some(128.0),
            l1_hit_rate: None,
            l2_hit_rate: None,
        };
        let e = estimate(&paper_machine(), &k).unwrap();
        assert_eq!(e.case, HongKimCase::Case1);
        assert_eq!((e.mwp, e.cwp, e.n_warps), (2.0, 2.0, 2.0));
        assert_eq!(e.mwp_limit, "warps");
        assert_eq!(e.cycles, 508.0);
    }

    #[test]
    fn case3_when_computation_dominates() {
        // 256 threads × 4 blocks = N = 32; coalesced, Mem_LD 200, departure 1 → MWP_Without_BW = min(200, 32) = 32;
        // 10,000 GB/s: MWP_peak_BW = 10000/((128/200)·16) = 976.6; MWP = 32.
        // 49 comp + 1 mem: Comp = 4·50 = 200, Mem = 200 → CWP = 400/200 = 2 < MWP and Comp = Mem → case 3;
        // #Rep = 64/(4·16) = 1; Exec = 200 + 200·32 = 6,600 cycles = 6.6 µs at 1 GHz.
        let m = HongKimMachine {
            dram_latency_cycles: 200.0,
            departure_delay_coal_cycles: 1.0,
            memory_bandwidth_gbs: 10_000.0,
            ..paper_machine()
        };
        let k = HongKimKernel {
            comp_insts: 49.0,
            coal_mem_insts: 1.0,
            uncoal_mem_insts: 0.0,
            synch_insts: 0.0,
            threads_per_block: 256,
            blocks: 64,
            active_blocks_per_sm: 4,
            uncoal_per_mw: None,
            load_bytes_per_warp: None,
            l1_hit_rate: None,
            l2_hit_rate: None,
        };
        let e = estimate(&m, &k).unwrap();
        assert_eq!(e.case, HongKimCase::Case3);
        assert_eq!((e.mwp, e.cwp), (32.0, 2.0));
        assert!(close(e.mwp_peak_bw.unwrap(), 976.5625, 1e-9));
        assert_eq!(e.cycles, 6_600.0);
        assert!(close(e.time_us, 6.6, 1e-12));
        assert!(e.verdict.starts_with("compute-bound"));
    }

    #[test]
    fn cache_extension_by_hand() {
        // Worked example with h1 = h2 = 0.5, L1 20, L2 200 cycles, L2 at 20 GB/s, departure_uncoal 1:
        // AMAT = 0.5·20 + 0.5·(0.5·200 + 0.5·420) = 10 + 155 = 165; Mem_L = 165 + 31·1 = 196; departure = 32;
        // MWP_Without_BW = 196/32 = 6.125; DRAM bytes/warp 0.25·128 = 32 → MWP_peak_BW = 80·196/(32·16) = 30.625;
        // L2 bytes/warp 0.5·128 = 64 → MWP_peak_BW_L2 = 20·196/(64·16) = 3.828125 → MWP = 3.828125 (L2 bound);
        // Comp 132, Mem = 196·6 = 1176, CWP = min(1308/132 = 9.91, 20) ≥ MWP → case 2;
        // Exec = 1176·20/3.828125 + 22·2.828125 = 6144 + 62.21875 = 6206.21875;
        // Synch = 32·2.828125·6·5 = 2715; total 8921.21875.
        let m = HongKimMachine {
            departure_delay_uncoal_cycles: 1.0,
            l1_latency_cycles: Some(20.0),
            l2_latency_cycles: Some(200.0),
            l2_bandwidth_gbs: Some(20.0),
            ..paper_machine()
        };
        let k = HongKimKernel { l1_hit_rate: Some(0.5), l2_hit_rate: Some(0.5), ..paper_kernel() };
        let e = estimate(&m, &k).unwrap();
        assert_eq!(e.amat_cycles, Some(165.0));
        assert_eq!(e.mem_l_cycles, 196.0);
        assert_eq!(e.mwp_without_bw, 6.125);
        assert!(close(e.mwp_peak_bw.unwrap(), 30.625, 1e-9));
        assert!(close(e.mwp_peak_bw_l2.unwrap(), 3.828125, 1e-12));
        assert_eq!(e.mwp_limit, "l2_bandwidth");
        assert_eq!(e.case, HongKimCase::Case2);
        assert!(close(e.exec_cycles, 6206.21875, 1e-9));
        assert!(close(e.synch_cost_cycles, 2715.0, 1e-9));
        assert!(close(e.cycles, 8921.21875, 1e-9));
        // Hit rates of 0 give back the paper's model exactly.
        let k0 = HongKimKernel { l1_hit_rate: Some(0.0), l2_hit_rate: Some(0.0), ..paper_kernel() };
        let e0 = estimate(&paper_machine(), &k0).unwrap();
        assert!(close(e0.cycles, 50_728.1875, 1e-6));
        // A hit rate needs its level's latency.
        let err = estimate(&paper_machine(), &HongKimKernel { l1_hit_rate: Some(0.3), ..paper_kernel() });
        assert_eq!(err.unwrap_err().field, "gpu.l1_latency_cycles");
    }

    #[test]
    fn guards() {
        // No memory instructions: Exec = Comp·N·#Rep = (4·10)·(4·2)·(32/(2·16)) = 40·8·1 = 320.
        let k = HongKimKernel {
            comp_insts: 10.0,
            coal_mem_insts: 0.0,
            uncoal_mem_insts: 0.0,
            synch_insts: 3.0,
            threads_per_block: 128,
            blocks: 32,
            active_blocks_per_sm: 2,
            uncoal_per_mw: None,
            load_bytes_per_warp: None,
            l1_hit_rate: None,
            l2_hit_rate: None,
        };
        let e = estimate(&paper_machine(), &k).unwrap();
        assert_eq!((e.case, e.cycles, e.synch_cost_cycles), (HongKimCase::NoMemory, 320.0, 0.0));
        // A grid smaller than the GPU: 8 blocks on 16 SMs → 8 active SMs with one block each, #Rep = 1.
        let small = HongKimKernel { blocks: 8, ..paper_kernel() };
        let e = estimate(&paper_machine(), &small).unwrap();
        assert_eq!((e.active_sms, e.active_blocks_per_sm, e.rep, e.n_warps), (8, 1, 1.0, 4.0));
        // Bad inputs name their field.
        let bad = |k: HongKimKernel| estimate(&paper_machine(), &k).unwrap_err().field;
        assert_eq!(bad(HongKimKernel { blocks: 0, ..paper_kernel() }), "kernel.blocks");
        assert_eq!(bad(HongKimKernel { uncoal_per_mw: None, ..paper_kernel() }), "kernel.uncoal_per_mw");
        assert_eq!(bad(HongKimKernel { comp_insts: -1.0, ..paper_kernel() }), "kernel.comp_insts");
        assert_eq!(bad(HongKimKernel { l2_hit_rate: Some(1.5), ..paper_kernel() }), "kernel.l2_hit_rate");
        assert_eq!(
            bad(HongKimKernel { comp_insts: 0.0, uncoal_mem_insts: 0.0, ..paper_kernel() }),
            "kernel.comp_insts"
        );
        let m = HongKimMachine { issue_cycles: 0.0, ..paper_machine() };
        assert_eq!(estimate(&m, &paper_kernel()).unwrap_err().field, "gpu.issue_cycles");
    }

    #[test]
    fn machine_from_a_catalog_gpu() {
        // A100-SXM4-40GB: Mem_LD = 450·1.41 = 634.5; issue = 32/64.0268 = 0.49979;
        // departure_coal = 128·108·1.41/1555 = 19,491.84/1555 = 12.53495; departure_uncoal = 4,872.96/1555 = 3.13374.
        let a100 = lookup("A100-SXM4-40GB").unwrap().spec.clone();
        let m = HongKimMachine::from_gpu(&a100);
        assert!(close(m.dram_latency_cycles, 634.5, 1e-9));
        assert!(close(m.issue_cycles, 0.49979, 1e-5));
        assert!(close(m.departure_delay_coal_cycles, 12.53495, 1e-5));
        assert!(close(m.departure_delay_uncoal_cycles, 3.13374, 1e-5));
        assert_eq!(m.l2_bandwidth_gbs, Some(3110.0));
        // A request naming the GPU and overriding one number: the override wins, the rest is noted.
        let req = HongKimRequest {
            gpu: HongKimMachineInput {
                name: Some("NVIDIA A100-SXM4-40GB".into()),
                dram_latency_cycles: Some(640.0),
                ..Default::default()
            },
            kernel: HongKimKernel { blocks: 1080, active_blocks_per_sm: 2, ..paper_kernel() },
        };
        let e = req.estimate_with_catalog().unwrap();
        assert_eq!(e.machine.dram_latency_cycles, 640.0);
        assert!(e.defaults_used.iter().any(|d| d.starts_with("issue_cycles")));
        assert!(!e.defaults_used.iter().any(|d| d.starts_with("dram_latency_cycles")));
        // #Rep = 1080/(2·108) = 5.
        assert_eq!(e.rep, 5.0);
        assert!(e.time_us > 0.0);
        // Unknown names and missing numbers are errors, not guesses.
        let unknown = HongKimRequest {
            gpu: HongKimMachineInput { name: Some("no-such-gpu".into()), ..Default::default() },
            kernel: paper_kernel(),
        };
        assert_eq!(unknown.estimate_with_catalog().unwrap_err().field, "gpu.name");
        let partial = HongKimRequest {
            gpu: HongKimMachineInput { sm_count: Some(16), clock_ghz: Some(1.0), ..Default::default() },
            kernel: paper_kernel(),
        };
        assert_eq!(partial.estimate_with_catalog().unwrap_err().field, "gpu.memory_bandwidth_gbs");
    }
}
