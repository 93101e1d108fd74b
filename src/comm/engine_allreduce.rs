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
//! caller falls back to its collective model). The caller keeps the link bound ([`super::link_bound_us`]).

use std::sync::OnceLock;

use crate::hw::{lookup, System};
use crate::op::KernelFamily;

/// The tables, as `scripts/custom-allreduce-table` writes them.
const TABLE_CSV: &str = include_str!("engine_allreduce.csv");

/// One measured curve: an engine's all-reduce on `ranks` GPUs of one GPU model.
#[derive(Debug, Clone, PartialEq)]
struct Curve {
    engine: KernelFamily,
    /// perfcast's catalog name of the GPU (aiconfigurator's `device` resolved through [`lookup`]).
    gpu: String,
    /// The GPU's compute capability, its major version and DRAM bandwidth, GB/s (for the stand-in choice).
    cc: Option<String>,
    cc_major: Option<u32>,
    memory_bandwidth_gbs: f64,
    ranks: u32,
    /// (message bytes, µs per call), sorted by bytes.
    points: Vec<(f64, f64)>,
}

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
    CURVES.get_or_init(|| parse(TABLE_CSV))
}

/// The curves of a table in `scripts/custom-allreduce-table`'s format; rows of unknown engines or GPUs, or that do
/// not parse, are skipped (the committed table has none: a test holds every row).
fn parse(csv: &str) -> Vec<Curve> {
    let mut out: Vec<Curve> = Vec::new();
    for line in csv.lines().skip(1) {
        let f: Vec<&str> = line.split(',').collect();
        let [engine, device, ranks, bytes, us] = f[..] else { continue };
        let (Some(engine), Some(gpu)) = (KernelFamily::parse(engine), lookup(device)) else { continue };
        let (Ok(ranks), Ok(bytes), Ok(us)) = (ranks.parse::<u32>(), bytes.parse::<f64>(), us.parse::<f64>()) else {
            continue;
        };
        if !(bytes > 0.0 && us > 0.0) {
            continue;
        }
        let name = &gpu.spec.name;
        match out.iter_mut().find(|c| c.engine == engine && &c.gpu == name && c.ranks == ranks) {
            Some(c) => c.points.push((bytes, us)),
            None => out.push(Curve {
                engine,
                gpu: name.clone(),
                cc: gpu.spec.compute_capability.clone(),
                cc_major: gpu.spec.compute_major(),
                memory_bandwidth_gbs: gpu.spec.memory_bandwidth_gbs,
                ranks,
                points: vec![(bytes, us)],
            }),
        }
    }
    for c in &mut out {
        c.points.sort_by(|a, b| a.0.total_cmp(&b.0));
    }
    out
}

/// The curve's time for `bytes`: log-log interpolation between the measured sizes around it, the smallest size's
/// time below the table; None above its largest size.
fn interpolate(points: &[(f64, f64)], bytes: f64) -> Option<f64> {
    let (first, last) = (points.first()?, points.last()?);
    if bytes <= first.0 {
        return Some(first.1);
    }
    if bytes > last.0 {
        return None;
    }
    let i = points.partition_point(|p| p.0 < bytes);
    let (hi, lo) = (points[i], points[i - 1]);
    if hi.0 == bytes {
        return Some(hi.1);
    }
    let w = (bytes / lo.0).ln() / (hi.0 / lo.0).ln();
    Some((lo.1.ln() + w * (hi.1 / lo.1).ln()).exp())
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
            let c = curves.iter().find(|c| c.engine == e && c.gpu == name && c.ranks == ranks)?;
            Some(EngineAllReduce { time_us: interpolate(&c.points, bytes)?, engine: e, gpu: c.gpu.clone() })
        })
    };
    if let Some(own) = on(&gpu.name) {
        return Some(own);
    }
    if !(ranks == 2 || nvlink_node(system)) {
        return None;
    }
    // Stand-ins: the measured GPUs of the same compute-capability major version, the same minor version, then the
    // nearest DRAM bandwidth, first (only when the system's own GPU has no answer: a serving step's all-reduce asks
    // this once per message size).
    let major = gpu.compute_major()?;
    let mut others: Vec<&Curve> = curves.iter().filter(|c| c.gpu != gpu.name && c.cc_major == Some(major)).collect();
    others.sort_by(|a, b| {
        let other_cc = |c: &Curve| c.cc != gpu.compute_capability;
        let d = |c: &Curve| (c.memory_bandwidth_gbs - gpu.memory_bandwidth_gbs).abs();
        other_cc(a).cmp(&other_cc(b)).then_with(|| d(a).total_cmp(&d(b))).then_with(|| a.gpu.cmp(&b.gpu))
    });
    others.dedup_by(|a, b| a.gpu == b.gpu);
    others.into_iter().find_map(|c| on(&c.gpu))
}

#[cfg(test)]
#[path = "engine_allreduce_tests.rs"]
mod tests;
