//! The serving engines' own all-reduce within one node, as measured: what a vLLM, SGLang or TensorRT-LLM
//! tensor-parallel all-reduce of a message costs, read off aiconfigurator's tables (train split, DATA.md) instead of
//! the NCCL-like α–β model and its learned correction.
//!
//! **When the engines use their own kernel.** vLLM's `CustomAllreduce` (`vllm/distributed/device_communicators/
//! custom_all_reduce.py`) is set up only for a group within one node of 2, 4, 6 or 8 GPUs
//! (`_SUPPORTED_WORLD_SIZES`), fully NVLink-connected above 2 GPUs, and `should_custom_ar` takes a message when its
//! bytes are a multiple of 16 and below `max_size` (8 MiB by default, `CUSTOM_ALL_REDUCE_MAX_SIZES` per compute
//! capability and world size with symmetric memory); larger messages go to NCCL (`PyNcclCommunicator`). SGLang's
//! `CustomAllreduce` (`python/sglang/srt/distributed/device_communicators/custom_all_reduce.py`, adapted from
//! vLLM's) has the same conditions and `_MAX_CAR_SIZE` = 8 MiB. TensorRT-LLM's `AllReduce` op with the default
//! `AllReduceStrategy.AUTO` picks ONESHOT, TWOSHOT or NCCL per SM version, tp size, hidden size and token count
//! (`selectStrategyLookUpTable` and `SelectStrategyLP` in `cpp/tensorrt_llm/common/customAllReduceUtils.h`: ONESHOT
//! up to 4,096 × 4,096 elements at tp 2 on sm_90, TWOSHOT above, NCCL past its tables). aiconfigurator timed each
//! engine's `all_reduce` call as the engine dispatches it — vLLM's and SGLang's captured in a CUDA graph (the
//! `*_graph` rows; their eager rows add a launch and a copy a serving decode step does not pay), TensorRT-LLM's under
//! AUTO — for 2, 4 and 8 GPUs of one node and bf16 messages of 256 B to 1 GiB, so the table holds the switch to NCCL
//! for large messages as well.
//!
//! **Lookup.** `engine_allreduce.csv` (written by `scripts/custom-allreduce-table` from those tables: engine,
//! aiconfigurator's `device`, GPUs, message bytes, µs per call) is read once. A message of n bytes on g GPUs is timed
//! by the rows of the same engine, GPU and g: log-log interpolation between the two measured sizes around n, the
//! smallest size's time below it (the latency floor), nothing above the largest. The engine asked comes first, then
//! the closest engine's ([`KernelFamily::closest`]); the system's own GPU first, then — when the GPU has no table, or
//! none for g GPUs — a *stand-in*: a measured GPU of the same compute-capability major version, the same minor one
//! first, then the nearest in DRAM bandwidth (H200 → H100, GB300 → B300), used only for 2 GPUs or over an NVLink/NVSwitch node (the engines' custom
//! all-reduce needs full NVLink above 2 GPUs). No group across nodes, no group size the tables lack: `None` (the
//! caller falls back to its collective model). The caller keeps the link bound ([`super::link_bound_us`]). The
//! reading, the interpolation and the stand-in order are [`super::measured_curve`]'s, shared with SGLang's wide-EP
//! tables (`llm::serving::wideep`).

use std::sync::OnceLock;

use serde::Deserialize;

use super::measured_curve::{interpolate, read_curves, stand_ins, CurvePoint, CurveRow, MeasuredCurve};
use crate::hw::System;
use crate::op::KernelFamily;

/// The tables, as `scripts/custom-allreduce-table` writes them.
const TABLE_CSV: &str = include_str!("engine_allreduce.csv");

/// One row of `engine_allreduce.csv`: `engine,device,num_gpus,message_bytes,latency_us`.
#[derive(Debug, Deserialize)]
struct Row {
    /// `vllm`, `sglang` or `trtllm` ([`KernelFamily::parse`]).
    engine: String,
    /// aiconfigurator's `device`.
    device: String,
    /// GPUs in the all-reduce group (one node).
    num_gpus: u32,
    /// Message size, bytes (bf16).
    message_bytes: f64,
    /// Time of one all-reduce call, µs.
    latency_us: f64,
}

/// What tells the table's curves of one GPU apart: the engine whose all-reduce ran and the group size.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Key {
    engine: KernelFamily,
    ranks: u32,
}

impl CurveRow for Row {
    type Key = Key;
    fn point(self) -> Option<CurvePoint<Key>> {
        let engine = KernelFamily::parse(&self.engine)?;
        let key = Key { engine, ranks: self.num_gpus };
        Some(CurvePoint { key, device: self.device, x: self.message_bytes, y: self.latency_us })
    }
}

/// One measured curve: an engine's all-reduce on `ranks` GPUs of one GPU model, (message bytes, µs per call).
type Curve = MeasuredCurve<Key>;

/// A measured answer: µs per call, the engine whose kernel measured it and the GPU it was measured on.
#[derive(Debug, Clone, PartialEq)]
pub struct EngineAllReduce {
    /// Time of one all-reduce, µs.
    pub time_us: f64,
    /// The engine whose measurement answered (the one asked, or the closest measured).
    pub engine: KernelFamily,
    /// The GPU the measurement ran on (the system's own, or a stand-in).
    pub gpu: String,
}

impl EngineAllReduce {
    /// The table the answer came from, as it names itself in a [`crate::cost::Source`]: `<engine>_allreduce/<GPU>`
    /// (`trtllm_allreduce/B200`).
    pub fn table(&self) -> String {
        format!("{}_allreduce/{}", self.engine, self.gpu)
    }
}

fn curves() -> &'static [Curve] {
    static CURVES: OnceLock<Vec<Curve>> = OnceLock::new();
    CURVES.get_or_init(|| read_curves::<Row>(TABLE_CSV))
}

/// Whether the system's node links its GPUs by NVLink (NVSwitch, NVL72): the engines' custom all-reduce needs that
/// above 2 GPUs.
fn nvlink_node(system: &System) -> bool {
    let kind = system.intra_node.kind.to_ascii_lowercase();
    kind.contains("nvlink") || kind.contains("nvswitch") || kind.contains("nvl")
}

/// The time `engine`'s own all-reduce of `bytes` takes over `ranks` GPUs of one node of `system`, from the measured
/// tables (module doc for the lookup order); None across nodes, for one rank, or where no table answers.
pub fn engine_allreduce(
    engine: KernelFamily,
    system: &System,
    ranks: u32,
    nodes: u32,
    bytes: f64,
) -> Option<EngineAllReduce> {
    engine_allreduce_in(curves(), engine, system, ranks, nodes, bytes)
}

fn engine_allreduce_in(
    curves: &[Curve],
    engine: KernelFamily,
    system: &System,
    ranks: u32,
    nodes: u32,
    bytes: f64,
) -> Option<EngineAllReduce> {
    if nodes != 1 || ranks < 2 || !bytes.is_finite() || bytes < 0.0 {
        return None;
    }
    let gpu = &system.gpu;
    // The curve of `engine` (or the closest engine measured) on the GPU named `name`, for this group and message.
    let on = |name: &str| {
        engine.closest().into_iter().find_map(|e| {
            let key = Key { engine: e, ranks };
            let c = curves.iter().find(|c| c.key == key && c.gpu == name)?;
            Some(EngineAllReduce { time_us: interpolate(&c.points, bytes)?, engine: e, gpu: c.gpu.clone() })
        })
    };
    if let Some(own) = on(&gpu.name) {
        return Some(own);
    }
    if !(ranks == 2 || nvlink_node(system)) {
        return None;
    }
    // Stand-ins (only when the system's own GPU has no answer: a serving step's all-reduce asks this once per
    // message size).
    stand_ins(curves, gpu).into_iter().find_map(on)
}

#[cfg(test)]
#[path = "engine_allreduce_tests.rs"]
mod tests;
