//! Communication: link models, collective algorithms and NCCL conventions (MODELS.md §3).
//!
//! [`estimate`] times one collective of a group placed on a [`System`]: it evaluates the algorithms that apply
//! and picks the fastest, as NCCL's tuner does.
//!
//! Owns link models, collective algorithms, NCCL's conventions, the calibration fits and the measured curves of
//! committed tables ([`measured_curve`], also read by `llm::serving::wideep`). May import: `hw`, `op`,
//! `samples`. Must not import `cost`, `learn`, `llm` or anything outside the domain core.

pub mod algorithms;
pub mod bound;
pub mod calibrate;
pub mod calibrated;
pub mod engine_allreduce;
pub mod measured_curve;

use serde::Serialize;
use utoipa::ToSchema;

use crate::hw::System;
use crate::op::Collective;
use algorithms::*;
pub use bound::link_bound_us;

/// Where a communication group sits: `ranks` = `ranks_per_node` × `nodes`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Group {
    /// Ranks in the group.
    pub ranks: u32,
    /// Nodes the group spans.
    pub nodes: u32,
    /// Ranks of the group on each of its nodes.
    pub ranks_per_node: u32,
}

impl Group {
    /// A group of `ranks` ranks packed `ranks_per_node` to a node.
    pub fn new(ranks: u32, ranks_per_node: u32) -> Group {
        let per = ranks_per_node.clamp(1, ranks.max(1));
        Group { ranks: ranks.max(1), nodes: ranks.max(1).div_ceil(per), ranks_per_node: per }
    }
}

/// One algorithm's estimate.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct AlgorithmEstimate {
    /// `ring`, `hierarchical`, `recursive_doubling`, `rabenseifner`, `binomial_tree`, `scatter_allgather`,
    /// `pairwise`, `postal`.
    pub algorithm: &'static str,
    /// Time, µs.
    pub time_us: f64,
}

/// The estimate of one collective: the fastest algorithm's time and every candidate.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct CommEstimate {
    /// Time of the chosen algorithm, µs.
    pub time_us: f64,
    /// The chosen algorithm.
    pub algorithm: &'static str,
    /// Every algorithm evaluated.
    pub algorithms: Vec<AlgorithmEstimate>,
}

/// The link parameters a group sees on a system (α in µs, bandwidths in GB/s).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GroupLinks {
    pub intra_alpha_us: f64,
    /// Per-GPU intra-node bandwidth.
    pub intra_gbs: f64,
    pub inter_alpha_us: f64,
    /// Each GPU's share of its node's NIC bandwidth: node bandwidth / GPUs of the node communicating at once.
    pub inter_gbs_per_gpu: f64,
}

impl GroupLinks {
    /// Links of `system` when `active_per_node` GPUs of every node communicate at the same time (the usual case in
    /// training: every GPU belongs to one tensor- or data-parallel group and all groups run together), so the
    /// node's NICs are shared among them (Gropp et al.'s max-rate model, MODELS.md §3.1).
    /// With `nics` given, one GPU never gets more than one NIC's bandwidth (a GPU drives its own NIC, as NCCL
    /// maps them on multi-NIC nodes).
    pub fn on(system: &System, active_per_node: u32) -> GroupLinks {
        let active = active_per_node.clamp(1, system.gpus_per_node.max(1));
        let node = system.inter_node.bandwidth_gbs;
        let per_gpu = match system.inter_node.nics {
            Some(n) => (node / active as f64).min(node / n.max(1) as f64),
            None => node / active as f64,
        };
        GroupLinks {
            intra_alpha_us: system.intra_node.latency_us,
            intra_gbs: system.intra_node.bandwidth_gbs,
            inter_alpha_us: system.inter_node.latency_us,
            inter_gbs_per_gpu: per_gpu,
        }
    }
}

/// Times collective `c` of `bytes` over `group` with `links` (bytes as nccl-tests counts them: the full vector
/// for all-reduce, broadcast and reduce; the gathered total for all-gather; the input for reduce-scatter; the
/// whole send buffer per rank for all-to-all; the message for send/recv).
///
/// Candidates: all-reduce — ring, hierarchical, recursive doubling, Rabenseifner; all-gather / reduce-scatter —
/// ring, hierarchical, recursive doubling; broadcast / reduce — binomial tree, scatter + all-gather (pipelined
/// ring); all-to-all — pairwise (across nodes each rank's (p − g)/p share goes through its own NIC share while
/// the (g − 1)/p share crosses the intra-node link); send/recv — postal. A flat algorithm across nodes runs at the slower of the
/// intra-node link and the group's NIC share (g·B_e per node for g ranks per node), with NCCL's latency split:
/// steps that cross nodes pay α_e, the others α_i (MODELS.md §3.3).
pub fn estimate(c: Collective, bytes: f64, group: Group, links: &GroupLinks) -> CommEstimate {
    let p = group.ranks;
    let g = group.ranks_per_node;
    let nodes = group.nodes;
    let multi = nodes > 1;
    // Flat algorithms' bottleneck bandwidth and per-step α.
    let flat_gbs = if multi {
        let nic = links.inter_gbs_per_gpu * g as f64;
        if g > 1 {
            nic.min(links.intra_gbs)
        } else {
            nic
        }
    } else {
        links.intra_gbs
    };
    let alpha = if multi { links.inter_alpha_us } else { links.intra_alpha_us };
    // Ring latency with NCCL's split: 2(N−1) of the 2(p−1) all-reduce steps cross nodes.
    let ring_alpha_sum = |steps_factor: f64| {
        let steps = steps_factor * (p as f64 - 1.0);
        let inter_steps = if multi { steps_factor * (nodes as f64 - 1.0) } else { 0.0 };
        (steps - inter_steps) * links.intra_alpha_us + inter_steps * links.inter_alpha_us
    };
    let mut algos: Vec<AlgorithmEstimate> = Vec::with_capacity(4);
    let mut push = |algorithm: &'static str, time_us: f64| algos.push(AlgorithmEstimate { algorithm, time_us });
    if p <= 1 && c != Collective::SendRecv {
        push("none", 0.0);
    } else {
        match c {
            Collective::AllReduce => {
                push("ring", ring_all_reduce_us(p, bytes, 0.0, flat_gbs) + ring_alpha_sum(2.0));
                if multi && g > 1 {
                    push(
                        "hierarchical",
                        hierarchical_all_reduce_us(
                            g,
                            nodes,
                            bytes,
                            links.intra_alpha_us,
                            links.intra_gbs,
                            links.inter_alpha_us,
                            links.inter_gbs_per_gpu,
                        ),
                    );
                }
                push("recursive_doubling", recursive_doubling_all_reduce_us(p, bytes, alpha, flat_gbs));
                push("rabenseifner", rabenseifner_all_reduce_us(p, bytes, alpha, flat_gbs));
            }
            Collective::AllGather | Collective::ReduceScatter => {
                push("ring", ring_gather_us(p, bytes, 0.0, flat_gbs) + ring_alpha_sum(1.0));
                if multi && g > 1 {
                    push(
                        "hierarchical",
                        hierarchical_gather_us(
                            g,
                            nodes,
                            bytes,
                            links.intra_alpha_us,
                            links.intra_gbs,
                            links.inter_alpha_us,
                            links.inter_gbs_per_gpu,
                        ),
                    );
                }
                push("recursive_doubling", recursive_doubling_all_gather_us(p, bytes, alpha, flat_gbs));
            }
            Collective::Broadcast | Collective::Reduce => {
                push("binomial_tree", binomial_tree_us(p, bytes, alpha, flat_gbs));
                push("scatter_allgather", scatter_allgather_broadcast_us(p, bytes, alpha, flat_gbs));
            }
            Collective::AllToAll => {
                if multi {
                    // Each rank sends (p − g)/p of its buffer through its own NIC share and (g − 1)/p over the
                    // intra-node link, concurrently.
                    let (pf, gf) = (p as f64, g as f64);
                    let inter = (pf - gf) / pf * transfer_us(bytes, links.inter_gbs_per_gpu);
                    let intra = (gf - 1.0) / pf * transfer_us(bytes, links.intra_gbs);
                    push("pairwise", (pf - 1.0) * alpha + inter.max(intra));
                } else {
                    push("pairwise", pairwise_all_to_all_us(p, bytes, alpha, flat_gbs));
                }
            }
            Collective::SendRecv => {
                let (a, bw) = if multi {
                    (links.inter_alpha_us, links.inter_gbs_per_gpu)
                } else {
                    (links.intra_alpha_us, links.intra_gbs)
                };
                push("postal", postal_us(a, bw, bytes));
            }
        }
    }
    let best = algos
        .iter()
        .min_by(|a, b| a.time_us.total_cmp(&b.time_us))
        .cloned()
        .unwrap_or(AlgorithmEstimate { algorithm: "none", time_us: 0.0 });
    CommEstimate { time_us: best.time_us, algorithm: best.algorithm, algorithms: algos }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hw::presets;

    fn system(name: &str) -> System {
        presets().into_iter().find(|p| p.name == name).unwrap().resolve().unwrap()
    }

    #[test]
    fn busbw_factors_follow_nccl_tests() {
        assert_eq!(Collective::AllReduce.busbw_factor(8), 1.75);
        assert_eq!(Collective::AllGather.busbw_factor(8), 0.875);
        assert_eq!(Collective::SendRecv.busbw_factor(2), 1.0);
    }

    #[test]
    fn single_node_all_reduce_is_the_ring_formula() {
        // dgx-h100 (NCCL's achieved 350 GB/s within the node), 8 GPUs, 1 GiB: ring = 2·7·2 µs + 1.75 · 2^30 /
        // 350e9 s = 28 + 5368.71 µs.
        let s = system("dgx-h100");
        let e = estimate(Collective::AllReduce, 1_073_741_824.0, Group::new(8, 8), &GroupLinks::on(&s, 8));
        let ring = e.algorithms.iter().find(|a| a.algorithm == "ring").unwrap();
        assert!((ring.time_us - (28.0 + 1.75 * 1_073_741_824.0 / 350e9 * 1e6)).abs() < 1e-6, "{}", ring.time_us);
        // Rabenseifner moves the same bytes with 2·lg 8 = 6 latencies instead of 14: 12 µs instead of 28 µs.
        assert_eq!(e.algorithm, "rabenseifner");
        assert!((ring.time_us - e.time_us - 16.0).abs() < 1e-6);
    }

    #[test]
    fn a_gb200_all_reduce_across_trays_of_one_rack_runs_on_nvlink_and_across_racks_on_its_nic() {
        // GB200 NVL72: 18 compute trays of 4 GPUs share one NVLink 5 domain (1.8 TB/s bidirectional = 900 GB/s
        // per direction per GPU, GB200 NVL72 datasheet); each GPU has its own ConnectX-7 at 400 Gb/s = 50 GB/s.
        let s = system("gb200-nvl72");
        let links = GroupLinks::on(&s, 72);
        assert_eq!((links.intra_gbs, links.inter_gbs_per_gpu), (900.0, 400.0 / 8.0));
        // Data parallelism over 8 GPUs (tp = 1): GPUs 0–7 sit on trays 0 and 1 of one rack, one NVLink domain.
        let two_trays = Group::new(8, 8);
        assert_eq!(two_trays.nodes, 1);
        let e = estimate(Collective::AllReduce, 1_073_741_824.0, two_trays, &links);
        // Ring: 2·(8−1)/8 · 2^30 B / 900e9 B/s = 1.75 · 1,073,741,824 / 9e11 s = 2,087.8313 µs, plus 2·7 steps ×
        // 2 µs = 28 µs; Rabenseifner moves the same bytes with 2·lg 8 = 6 steps: 12 µs.
        let ring = e.algorithms.iter().find(|a| a.algorithm == "ring").unwrap();
        assert!((ring.time_us - (28.0 + 2087.8313)).abs() < 1e-3, "{}", ring.time_us);
        assert_eq!(e.algorithm, "rabenseifner");
        assert!((e.time_us - (12.0 + 2087.8313)).abs() < 1e-3, "{}", e.time_us);
        // Two racks, one GPU each (a pipeline or data-parallel peer in the next rack): the IB NIC, 50 GB/s per
        // GPU, not NVLink. Ring over 2 ranks: 2·(1/2) · 2^30 / 50e9 s = 21,474.8365 µs, plus 2 steps × 5 µs.
        let two_racks = Group::new(2, 1);
        let x = estimate(Collective::AllReduce, 1_073_741_824.0, two_racks, &links);
        let ring = x.algorithms.iter().find(|a| a.algorithm == "ring").unwrap();
        assert!((ring.time_us - (10.0 + 21_474.836)).abs() < 1e-2, "{}", ring.time_us);
    }

    #[test]
    fn spanning_nodes_costs_more_and_shares_the_nic() {
        let s = system("perlmutter-a100-40g");
        let links = GroupLinks::on(&s, 4);
        // NIC share per GPU: 25 GB/s / 4 = 6.25 GB/s.
        assert_eq!(links.inter_gbs_per_gpu, 6.25);
        let within = estimate(Collective::AllReduce, 1e8, Group::new(4, 4), &links);
        let across = estimate(Collective::AllReduce, 1e8, Group::new(8, 4), &links);
        assert!(across.time_us > 5.0 * within.time_us);
        // The best across two nodes is the hierarchical formula: 12 + 500 + 10 + 4000 µs (see algorithms tests).
        assert_eq!(across.algorithm, "hierarchical");
        assert!((across.time_us - 4522.0).abs() < 1e-6, "{}", across.time_us);
    }
}
