//! The link bound of a collective: the least time any algorithm needs to move the bytes that must cross the
//! group's busiest link, latency not counted. A learned correction trained on other machines may not answer a
//! collective faster than this (the learned backend floors it here), so a system's own links always limit what its
//! collectives cost.
//!
//! With `p` ranks, `g` per node on `N` nodes, `n` bytes as nccl-tests counts them, `B_i` the intra-node bandwidth
//! per GPU and `B_e` each GPU's share of its node's NICs ([`super::GroupLinks`]), both unidirectional GB/s:
//! - **all-reduce**: within a node each GPU must at least send its contribution (g − 1)/g · n once — what in-switch
//!   reduction (NVLink SHARP) needs; a ring sends twice that, 2(g − 1)/g · n (Patarasuk & Yuan 2009's bound for
//!   algorithms without in-network reduction); across nodes each node must at least export (N − 1)/N · n through
//!   its g GPUs' NIC share, g·B_e (half the hierarchical ring's inter-node phase, what SHARP could reach). In
//!   nccl-tests terms: bus bandwidth at most 2·B within a node.
//! - **all-gather / reduce-scatter**: each GPU receives (resp. sends) the (g − 1)/p · n held by its node's peers over
//!   its intra-node link, and each node the (N − 1)/N · n held elsewhere through g·B_e.
//! - **all-to-all**: each GPU sends (g − 1)/p · n to its node's peers over its intra-node link and (p − g)/p · n
//!   off the node through its own NIC share B_e.
//! - **broadcast / reduce**: the root (resp. each receiver) moves n once: n / B_i within a node, n / (g·B_e)
//!   across nodes (a node receives the whole message once, however its GPUs share it).
//! - **send/recv**: n over the link the pair uses.
//!
//! The bound is the largest of a collective's terms (the phases may overlap). The α–β algorithms of
//! [`super::estimate`] are never below it.

use super::algorithms::transfer_us;
use super::{Group, GroupLinks};
use crate::op::Collective;

/// The link bound of collective `c` of `bytes` over `group` on `links`, µs (see the module doc); 0 for a group of
/// one rank (other than send/recv).
pub fn link_bound_us(c: Collective, bytes: f64, group: Group, links: &GroupLinks) -> f64 {
    let (p, g, nodes) = (group.ranks.max(1) as f64, group.ranks_per_node.max(1) as f64, group.nodes.max(1) as f64);
    if group.ranks <= 1 && c != Collective::SendRecv {
        return 0.0;
    }
    let n = bytes.max(0.0);
    let multi = group.nodes > 1;
    let intra = |b: f64| if g > 1.0 { transfer_us(b, links.intra_gbs) } else { 0.0 };
    let node_nics = links.inter_gbs_per_gpu * g;
    let inter = |b: f64| if multi { transfer_us(b, node_nics) } else { 0.0 };
    let node_share = (nodes - 1.0) / nodes * n;
    match c {
        Collective::AllReduce => intra((g - 1.0) / g * n).max(inter(node_share)),
        Collective::AllGather | Collective::ReduceScatter => intra((g - 1.0) / p * n).max(inter(node_share)),
        Collective::AllToAll => {
            let off_node = if multi { transfer_us((p - g) / p * n, links.inter_gbs_per_gpu) } else { 0.0 };
            intra((g - 1.0) / p * n).max(off_node)
        }
        Collective::Broadcast | Collective::Reduce => {
            if multi {
                inter(n)
            } else {
                intra(n)
            }
        }
        Collective::SendRecv => {
            if multi {
                transfer_us(n, links.inter_gbs_per_gpu)
            } else {
                transfer_us(n, links.intra_gbs)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::comm::estimate;
    use crate::hw::presets;

    fn links(name: &str, active: u32) -> GroupLinks {
        GroupLinks::on(&presets().into_iter().find(|p| p.name == name).unwrap().resolve().unwrap(), active)
    }

    #[test]
    fn nvl72_all_reduce_within_the_rack_is_bounded_by_nvlink() {
        // GB200 NVL72: 72 GPUs of one rack on NVLink 5 at 900 GB/s per GPU per direction. 1 GiB all-reduce over the
        // 72 of them: the ring's bandwidth term is 2·71/72 · 1,073,741,824 B / 900e9 B/s = 2,352.95 µs (busbw 900
        // GB/s); Rabenseifner moves the same bytes with 2·⌈lg 72⌉ = 14 latencies of 2 µs instead of the ring's
        // 2·71 = 142: 2,352.95 + 28 = 2,380.95 µs, the estimate.
        let l = links("gb200-nvl72", 72);
        let n = 1_073_741_824.0;
        let e = estimate(Collective::AllReduce, n, Group::new(72, 72), &l);
        let ring_bw_us = 2.0 * 71.0 / 72.0 * n / 900e9 * 1e6;
        assert!((ring_bw_us - 2352.95).abs() < 0.01, "{ring_bw_us}");
        assert_eq!(e.algorithm, "rabenseifner");
        assert!((e.time_us - (ring_bw_us + 28.0)).abs() < 1e-6, "{}", e.time_us);
        // The ring itself: 142 · 2 µs + the same bytes.
        let ring = e.algorithms.iter().find(|a| a.algorithm == "ring").unwrap();
        assert!((ring.time_us - (ring_bw_us + 284.0)).abs() < 1e-6);
        // The link bound: each GPU sends its 71/72 of the vector once (in-switch reduction's half of the ring),
        // 1,176.48 µs: no answer may be faster.
        let bound = link_bound_us(Collective::AllReduce, n, Group::new(72, 72), &l);
        assert!((bound - ring_bw_us / 2.0).abs() < 1e-6 && (bound - 1176.48).abs() < 0.01, "{bound}");
        assert!(e.algorithms.iter().all(|a| a.time_us >= bound));
    }

    #[test]
    fn an_all_reduce_spanning_racks_pays_the_nics_its_gpus_share() {
        // Two GB200 NVL72 racks, all 144 GPUs communicating at once: a rack's 3,600 GB/s of ConnectX-7 shared by
        // its 72 GPUs is 50 GB/s each, the one NIC each GPU drives. 1 GiB all-reduce over the 144, hierarchical:
        // intra 2·71 · 2 µs + 2·71/72 · n / 900e9 = 284 + 2,352.95 µs; inter 2·1 · 5 µs + 2·1/2 · (n/72) / 50e9 =
        // 10 + 298.26 µs; total 2,945.21 µs. A flat algorithm crosses racks on 72 NICs at once (72 × 50 = 3,600 GB/s
        // per rack ≥ NVLink's 900), so Rabenseifner runs at NVLink speed: 2·⌈lg 144⌉ = 16 steps of the inter-node
        // 5 µs + 2·143/144 · n / 900e9 = 80 + 2,369.52 = 2,449.52 µs, the estimate.
        let l = links("gb200-nvl72", 72);
        assert_eq!(l.inter_gbs_per_gpu, 3600.0 / 72.0);
        let n = 1_073_741_824.0;
        let e = estimate(Collective::AllReduce, n, Group::new(144, 72), &l);
        let hier = e.algorithms.iter().find(|a| a.algorithm == "hierarchical").unwrap();
        assert!((hier.time_us - 2945.21).abs() < 0.01, "{}", hier.time_us);
        assert_eq!(e.algorithm, "rabenseifner");
        assert!((e.time_us - 2449.52).abs() < 0.01, "{}", e.time_us);

        // One GPU of each of 8 racks in the group (tensor parallelism 72 inside the racks, data parallelism across
        // them), every GPU busy in its own group: each GPU has its own NIC, 50 GB/s. Ring: 2·7/8 · n / 50e9 =
        // 37,580.96 µs + 14 steps of 5 µs = 37,650.96 µs; Rabenseifner the same bytes with 2·3 · 5 = 30 µs:
        // 37,610.96 µs. The NICs bound it: 7/8 · n / 50e9 = 18,790.48 µs.
        let dp = Group::new(8, 1);
        let e = estimate(Collective::AllReduce, n, dp, &l);
        assert!((e.time_us - 37_610.96).abs() < 0.01, "{}", e.time_us);
        let bound = link_bound_us(Collective::AllReduce, n, dp, &l);
        assert!((bound - 18_790.48).abs() < 0.01, "{bound}");
        // With only 8 GPUs of each rack communicating (the rest idle), each still has only its own NIC: 50 GB/s,
        // not 3,600 / 8 = 450.
        assert_eq!(links("gb200-nvl72", 8).inter_gbs_per_gpu, 50.0);
        // GB300's ConnectX-8: 100 GB/s per GPU, so the NIC-bound data-parallel all-reduce halves: 18,790.48 + 30.
        let e300 = estimate(Collective::AllReduce, n, dp, &links("gb300-nvl72", 72));
        assert!((e300.time_us - (37_580.96 / 2.0 + 30.0)).abs() < 0.01, "{}", e300.time_us);
    }

    #[test]
    fn perlmutter_inter_node_bound_by_hand() {
        // Perlmutter: Slingshot-10, 4 NICs × 50 Gb/s = 25 GB/s per node, 6.25 GB/s per GPU with all 4 GPUs of a
        // node communicating. A 100 MB all-reduce over 8 GPUs on 2 nodes (tp 8 across two nodes): each node
        // exports at least 1/2 · 1e8 B through its group's 4 × 6.25 = 25 GB/s: 2,000 µs; within the node 3/4 · 1e8
        // B at 300 GB/s = 250 µs. The bound is 2,000 µs; the hierarchical ring moves twice that over the NICs
        // (4,000 µs, see `comm::tests`).
        let l = links("perlmutter-a100-40g", 4);
        let b = link_bound_us(Collective::AllReduce, 1e8, Group::new(8, 4), &l);
        assert!((b - 2000.0).abs() < 1e-9, "{b}");
        // One GPU per node (a data-parallel group across 4 nodes), all four GPUs of each node busy in their own
        // groups: 3/4 · 1e8 B through 6.25 GB/s = 12,000 µs.
        let b = link_bound_us(Collective::AllReduce, 1e8, Group::new(4, 1), &l);
        assert!((b - 12_000.0).abs() < 1e-9, "{b}");
        // All-to-all over 2 nodes × 4: (8 − 4)/8 of each rank's 1e8 B leaves the node through its 6.25 GB/s share:
        // 8,000 µs (the NVLink part, 3/8 · 1e8 / 300e9 = 125 µs, is smaller).
        let b = link_bound_us(Collective::AllToAll, 1e8, Group::new(8, 4), &l);
        assert!((b - 8000.0).abs() < 1e-9, "{b}");
        // Send/recv between nodes: 1e8 B / 6.25 GB/s = 16,000 µs.
        let b = link_bound_us(Collective::SendRecv, 1e8, Group { ranks: 2, nodes: 2, ranks_per_node: 1 }, &l);
        assert!((b - 16_000.0).abs() < 1e-9, "{b}");
    }

    #[test]
    fn no_analytic_algorithm_beats_the_bound() {
        use Collective::*;
        for name in ["perlmutter-a100-40g", "dgx-h100", "gb200-nvl72", "vista-gh200"] {
            let gpn = presets().into_iter().find(|p| p.name == name).unwrap().gpus_per_node;
            for active in [1, gpn] {
                let l = links(name, active);
                for c in [AllReduce, AllGather, ReduceScatter, Broadcast, Reduce, AllToAll, SendRecv] {
                    for (ranks, per_node) in [(2, 1), (2, 2), (4, 4), (8, 4), (16, 8), (64, 1), (144, 72), (72, 72)] {
                        let per_node = per_node.min(gpn);
                        let group =
                            if c == SendRecv { Group::new(2, per_node.min(2)) } else { Group::new(ranks, per_node) };
                        for bytes in [1e3, 1e6, 1e9] {
                            let e = estimate(c, bytes, group, &l);
                            let b = link_bound_us(c, bytes, group, &l);
                            assert!(e.time_us >= b - 1e-9, "{name} {c:?} {group:?} {bytes}: {} < {b}", e.time_us);
                        }
                    }
                }
            }
        }
    }
}
