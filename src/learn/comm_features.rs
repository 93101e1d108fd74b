//! Feature vectors of the learned communication correction (S0's gradient-boosting error correction of the MPI
//! model; MODELS.md §4): the collective, its size and placement, the link parameters the baseline used, and the
//! baseline time.

use crate::comm::{Group, GroupLinks};

use crate::op::Collective;

/// Names of [`comm_features`]'s values, in order.
pub const COMM_FEATURES: [&str; 12] = [
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

/// The feature vector of collective `c` of `bytes` over `group`, timed `baseline_us` over `links`.
pub fn comm_features(c: Collective, bytes: f64, group: Group, links: &GroupLinks, baseline_us: f64) -> [f64; 12] {
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
    ]
}

/// Key of the communication regressor of collective `c` (all systems).
pub fn comm_key(c: Collective) -> String {
    format!("comm.{}", c.as_str())
}
