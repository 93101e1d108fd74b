//! Feature vectors of the learned communication correction (S0's gradient-boosting error correction of the MPI
//! model; MODELS.md §4): the collective, its size and placement, the link parameters the baseline used, whether
//! they are achieved (measured) or datasheet bandwidths, and the baseline time.

use crate::comm::{Group, GroupLinks};

use crate::op::Collective;

/// Names of [`comm_features`]'s values, in order.
pub const COMM_FEATURES: [&str; 13] = [
    "collective",
    "bytes_log2",
    "ranks_log2",
    "nodes_log2",
    "ranks_per_node",
    "baseline_us_log10",
    "intra_alpha_us",
    "intra_gbs",
    "inter_alpha_us",
    "inter_gbs_per_gpu",
    "busbw_factor",
    "bytes_per_rank_log2",
    "links_achieved",
];

/// Index of a collective (stable: the order of [`Collective`]'s variants).
pub fn collective_code(c: Collective) -> f64 {
    match c {
        Collective::AllReduce => 0.0,
        Collective::AllGather => 1.0,
        Collective::ReduceScatter => 2.0,
        Collective::Broadcast => 3.0,
        Collective::Reduce => 4.0,
        Collective::AllToAll => 5.0,
        Collective::SendRecv => 6.0,
    }
}

/// The feature vector of collective `c` of `bytes` over `group`, timed `baseline_us` over `links`; `achieved`:
/// the links' bandwidths are what NCCL achieved on the machine (a calibration from its samples, or a preset's
/// [`crate::hw::Link::achieved`] link, [`crate::cost::derate::achieved`]) rather than datasheet figures (1 / 0).
/// The same bandwidth means different things in the two cases: NVLink 4's datasheet 450 GB/s is a baseline
/// NCCL's all-to-all reaches about 0.7 of (aiconfigurator's H100, 8 GPUs), dgx-h100's achieved 350 GB/s one it
/// nearly reaches.
pub fn comm_features(
    c: Collective,
    bytes: f64,
    group: Group,
    links: &GroupLinks,
    baseline_us: f64,
    achieved: bool,
) -> [f64; 13] {
    let l2 = |v: f64| (v.max(0.0) + 1.0).log2();
    [
        collective_code(c),
        l2(bytes),
        l2(group.ranks as f64),
        l2(group.nodes as f64),
        group.ranks_per_node as f64,
        (baseline_us.max(1e-3)).log10(),
        links.intra_alpha_us,
        links.intra_gbs,
        links.inter_alpha_us,
        links.inter_gbs_per_gpu,
        c.busbw_factor(group.ranks),
        l2(bytes / group.ranks.max(1) as f64),
        if achieved { 1.0 } else { 0.0 },
    ]
}

/// Key of the communication regressor of collective `c` (all systems).
pub fn comm_key(c: Collective) -> String {
    format!("comm.{}", c.as_str())
}
