//! The model's inputs: the machine (every number resolved, or as a request gives it: a GPU to start from and
//! overrides), the kernel's instruction counts and launch, and the request that pairs them.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::{estimate_request, HongKimEstimate};
use crate::hw::GpuSpec;
use crate::kernel::machine::{self, ParamSource};
use crate::kernel::{non_negative, positive, KernelModelError};

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

    pub(super) fn validate(&self) -> Result<(), KernelModelError> {
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
