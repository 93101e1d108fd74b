//! The warnings of a training prediction: uncalibrated network links, analytic-only operator times, a
//! tensor-parallel group across nodes, a large pipeline bubble, empty stages, options without effect and a
//! configuration that does not fit.

use super::types::StageReport;
use crate::hw::System;
use crate::llm::config::TrainingConfig;
use crate::llm::layout::Layout;
use crate::llm::memory::MemoryBreakdown;

/// The warning that the links this configuration communicates over are datasheet figures (derated by perfcast's
/// generic network efficiency) rather than what NCCL achieves on the system ([`crate::hw::Link::achieved`]), when
/// the system has no calibration from its own measurements. The intra-node link is used when a node holds
/// several of the configuration's GPUs, the inter-node link when the configuration spans nodes.
pub fn network_warning(cfg: &TrainingConfig, system: &System, calibrated: bool) -> Option<String> {
    if calibrated || cfg.gpus() <= 1 {
        return None;
    }
    let gpn = system.gpus_per_node.max(1) as u64;
    let mut links = Vec::new();
    if gpn > 1 && !system.intra_node.achieved {
        links.push("intra-node");
    }
    if cfg.gpus() > gpn && !system.inter_node.achieved {
        links.push("inter-node");
    }
    (!links.is_empty()).then(|| {
        format!(
            "network uncalibrated: the {} bandwidth of {} is a datasheet figure derated by a generic efficiency, \
             not what NCCL achieves there; upload nccl-tests or OSU results of this system to calibrate it \
             (POST /v1/profiles?system={})",
            links.join(" and "),
            system.name,
            system.name
        )
    })
}

/// The configuration's warnings (see the module doc).
#[allow(clippy::too_many_arguments)]
pub(super) fn warnings(
    cfg: &TrainingConfig,
    layout: &Layout,
    gpus_per_node: u32,
    sources: &[String],
    derated: bool,
    bubble: f64,
    stages: &[StageReport],
    memory: &MemoryBreakdown,
) -> Vec<String> {
    let mut w = Vec::new();
    if sources.iter().all(|s| s == "analytic") {
        w.push(if derated {
            "every operator time is analytic (no learned regressor covers this GPU yet), derated by perfcast's \
             calibrated achievable efficiencies (README, accuracy): expect the end-to-end errors reported there"
                .to_string()
        } else {
            "every operator time is analytic (no learned regressor covers this GPU yet): roofline times are lower \
             bounds, so the iteration time is likely optimistic"
                .to_string()
        });
    }
    if layout.tp_group.nodes > 1 {
        w.push(format!(
            "tp = {} exceeds gpus_per_node = {gpus_per_node}: tensor-parallel all-reduces cross the inter-node network",
            cfg.tp
        ));
    }
    if bubble > 0.25 {
        w.push(format!(
            "pipeline bubble (pp − 1)/(m·v) = {:.0} % of the ideal time: raise grad_accum (or global_batch) or \
             virtual_stages to hide it",
            bubble * 100.0
        ));
    }
    if let Some(s) = stages.iter().find(|s| s.encoders == 0) {
        w.push(format!("stage {} holds no encoder layer: pp is large for {} layers", s.stage, cfg.model.layers));
    }
    if cfg.sequence_parallel && cfg.tp == 1 {
        w.push("sequence_parallel has no effect with tp = 1".to_string());
    }
    if cfg.tp_comm_overlap && !cfg.tp_overlap() {
        w.push(
            "tp_comm_overlap has no effect without sequence_parallel and tp > 1 (Transformer Engine overlaps the \
             sequence-parallel all-gathers and reduce-scatters; NeMo turns it off otherwise)"
                .to_string(),
        );
    }
    if !memory.fits {
        w.push(format!(
            "does not fit: stage {} needs {:.1} GiB per GPU (weights {:.1}, gradients {:.1}, optimizer {:.1}, \
             activations {:.1}, allowance {:.1}) but the GPU has {:.1} GiB; try recompute, sequence_parallel, more \
             tp/pp or a higher zero_stage",
            memory.stage,
            memory.total_gib,
            memory.weights_gib,
            memory.gradients_gib,
            memory.optimizer_gib,
            memory.activations_gib,
            memory.allowance_gib,
            memory.capacity_gib
        ));
    }
    w
}
