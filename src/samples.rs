//! The sample types: what the parsers of [`crate::ingest`] produce, the store keeps and the models read — one
//! measured operator call ([`OpSample`]), kernel launch ([`KernelSample`]), collective ([`CommSample`]) or profile
//! timer ([`TimerSample`]), and the rows a parser read but did not keep ([`Rejected`]).
//!
//! Plain data in the units their field names carry. May import: `hw` and `op` (the vocabulary of operator
//! classes, collectives and precisions); imported by the domain core, `ingest` and `store` alike, so the core never
//! needs the parsers.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::hw::Precision;
use crate::op::{Collective, Dims, KernelFamily, OpClass, Phase};

/// Free-form string attributes of a sample: library versions, kernel names, launch configuration, CI labels.
pub type Attributes = BTreeMap<String, String>;

/// One measured operator call (S1's micro-benchmark sample).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct OpSample {
    pub op: OpClass,
    pub phase: Phase,
    pub dtype: Precision,
    /// Device name as the file (or the upload's `gpu`/`system` parameter) gives it; the service resolves it to a
    /// catalog name.
    pub gpu: String,
    /// Shape, per the class's dim names ([`crate::op`]); unused trailing dims are 0.
    #[schema(value_type = Vec<u64>)]
    pub dims: Dims,
    /// Measured time, µs.
    pub time_us: f64,
    #[serde(default)]
    pub attributes: Attributes,
}

impl OpSample {
    /// The engine whose kernels measured this sample ([`kernel_family`] of its attributes).
    pub fn kernel_family(&self) -> Option<KernelFamily> {
        kernel_family(&self.attributes)
    }
}

/// The engine whose kernels measured a sample with `attributes`: its `backend` attribute (aiconfigurator's column:
/// `vllm`, `sglang`, `trtllm`), else its `framework` attribute (the collector's label: `VLLM`, `SGLang`,
/// `TRTLLM`), when either names one ([`KernelFamily::parse`]); None for an engine-neutral sample.
pub fn kernel_family(attributes: &Attributes) -> Option<KernelFamily> {
    ["backend", "framework"].iter().find_map(|k| attributes.get(*k).and_then(|v| KernelFamily::parse(v)))
}

/// The precision the kernel of a sample with `attributes` computed in when the sample's dtype names another: its
/// `attn_dtype` attribute (aiconfigurator's attention tables, whose sample dtype is the KV cache's), None otherwise.
pub fn compute_dtype(attributes: &Attributes) -> Option<Precision> {
    attributes.get("attn_dtype").and_then(|d| Precision::parse(d))
}

/// One measured kernel launch (Nsight Compute, rocprof, a PyTorch trace).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct KernelSample {
    /// Kernel (function) name, demangled when the tool demangles.
    pub name: String,
    /// Device name when the file names it.
    #[serde(default)]
    pub gpu: Option<String>,
    /// Duration, µs.
    pub duration_us: f64,
    /// Grid size in blocks (x, y, z).
    #[serde(default)]
    pub grid: Option<[u64; 3]>,
    /// Block size in threads (x, y, z).
    #[serde(default)]
    pub block: Option<[u64; 3]>,
    /// Normalized metrics (names and units in [`kernel_metrics`]).
    #[serde(default)]
    pub metrics: BTreeMap<String, f64>,
    #[serde(default)]
    pub attributes: Attributes,
}

/// Names of [`KernelSample::metrics`] and their units; parsers convert to these.
pub mod kernel_metrics {
    /// FP32 floating-point operations (fadd + fmul + 2·ffma), count.
    pub const FLOPS_FP32: &str = "flops_fp32";
    /// FP64 floating-point operations, count.
    pub const FLOPS_FP64: &str = "flops_fp64";
    /// FP16 floating-point operations on the CUDA cores, count.
    pub const FLOPS_FP16: &str = "flops_fp16";
    /// Tensor-core operations (any precision), count of FLOPs.
    pub const FLOPS_TENSOR: &str = "flops_tensor";
    /// DRAM bytes read + written.
    pub const DRAM_BYTES: &str = "dram_bytes";
    /// L2 bytes (lts__t_bytes).
    pub const L2_BYTES: &str = "l2_bytes";
    /// L1/TEX bytes (l1tex__t_bytes).
    pub const L1_BYTES: &str = "l1_bytes";
    /// L1 hit rate, 0–1.
    pub const L1_HIT_RATE: &str = "l1_hit_rate";
    /// L2 hit rate, 0–1.
    pub const L2_HIT_RATE: &str = "l2_hit_rate";
    /// Achieved occupancy, 0–1.
    pub const ACHIEVED_OCCUPANCY: &str = "achieved_occupancy";
    /// Registers per thread.
    pub const REGISTERS_PER_THREAD: &str = "registers_per_thread";
    /// Static + dynamic shared memory per block, bytes.
    pub const SHARED_MEM_BYTES: &str = "shared_mem_bytes";
    /// SM cycles elapsed (average over SMs).
    pub const SM_CYCLES: &str = "sm_cycles";
}

/// One measured collective or point-to-point transfer (OSU, nccl-tests, a PyTorch trace, TAU).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct CommSample {
    pub collective: Collective,
    /// Message size as nccl-tests counts it (the full vector; for all-gather the gathered total), bytes.
    pub bytes: u64,
    /// Ranks taking part.
    pub ranks: u32,
    /// Nodes, when known.
    #[serde(default)]
    pub nodes: Option<u32>,
    /// GPUs (ranks) per node, when known.
    #[serde(default)]
    pub gpus_per_node: Option<u32>,
    /// Time, µs.
    pub time_us: f64,
    /// Algorithm bandwidth bytes/time, GB/s.
    #[serde(default)]
    pub algbw_gbs: Option<f64>,
    /// Bus bandwidth (nccl-tests convention), GB/s.
    #[serde(default)]
    pub busbw_gbs: Option<f64>,
    /// Element type (`float`, `bf16`, …) when stated.
    #[serde(default)]
    pub dtype: Option<String>,
    #[serde(default)]
    pub attributes: Attributes,
}

impl CommSample {
    /// A sample of `collective` moving `bytes` (nccl-tests convention) among `ranks` in `time_us` µs, with algbw =
    /// bytes / time (GB/s) and busbw = algbw × [`Collective::busbw_factor`] (MODELS.md §3.3); nodes, GPUs per
    /// node, dtype and attributes empty, to be filled with struct update syntax.
    pub fn timed(collective: Collective, bytes: u64, ranks: u32, time_us: f64) -> CommSample {
        let algbw = bytes as f64 / (time_us * 1e3);
        CommSample {
            collective,
            bytes,
            ranks,
            nodes: None,
            gpus_per_node: None,
            time_us,
            algbw_gbs: Some(algbw),
            busbw_gbs: Some(algbw * collective.busbw_factor(ranks)),
            dtype: None,
            attributes: Attributes::new(),
        }
    }
}

/// A profile timer: a named region's calls and time on one rank (TAU timers — MPI calls among them —, rocprof's
/// API statistics and memory copies). The raw material of a per-rank time breakdown.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct TimerSample {
    /// Timer name (`MPI_Allreduce()`, `hipMemcpy`, `MEMORY_COPY_HOST_TO_DEVICE`).
    pub name: String,
    /// Group (`MPI`, `TAU_USER`, `HIP_API`, `MEMORY_COPY`).
    pub group: String,
    /// MPI rank (TAU node `N`), when known.
    #[serde(default)]
    pub rank: Option<u32>,
    /// Thread (TAU `T`), when known.
    #[serde(default)]
    pub thread: Option<u32>,
    /// Number of calls.
    pub calls: f64,
    /// Time in the region itself, µs.
    pub exclusive_us: f64,
    /// Time in the region and everything it called, µs.
    pub inclusive_us: f64,
    #[serde(default)]
    pub attributes: Attributes,
}

/// A parsed sample.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Sample {
    Op(OpSample),
    Kernel(KernelSample),
    Comm(CommSample),
    Timer(TimerSample),
}

/// A row that was read but not kept, and why.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct Rejected {
    /// 1-based line of the input.
    pub line: u64,
    pub reason: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timed_comm_samples_carry_nccl_bandwidths() {
        // 1 MB all-reduced among 8 ranks in 10 µs: algbw 100 GB/s, busbw 2·7/8 · 100 = 175 GB/s.
        let s = CommSample::timed(Collective::AllReduce, 1_000_000, 8, 10.0);
        assert_eq!((s.algbw_gbs, s.busbw_gbs, s.nodes, s.dtype), (Some(100.0), Some(175.0), None, None));
        let g = CommSample::timed(Collective::AllGather, 4_000, 4, 2.0);
        assert_eq!(g.busbw_gbs, Some(1.5));
    }
}
