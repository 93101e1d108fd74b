//! NCCL's own cost model (src/graph/tuning.cc) and its constants: the analytic baseline for collectives, as the
//! [parent module](super) describes.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::CalibrationError;
use crate::op::Collective;

/// NCCL algorithm (the two its cost model covers for every NVIDIA system).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum NcclAlgorithm {
    Tree,
    Ring,
}

/// NCCL protocol.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum NcclProtocol {
    Ll,
    Ll128,
    Simple,
}

/// Intra-node link kind as NCCL's model distinguishes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum NcclIntraLink {
    Nvlink,
    Pci,
}

/// NCCL base latency per algorithm [Tree, Ring] and protocol [LL, LL128, Simple], µs (NCCL src/graph/tuning.cc
/// `baseLat`; MODELS.md §3.3).
pub const NCCL_BASE_LATENCY_US: [[f64; 3]; 2] = [[6.8, 14.0, 8.4], [6.6, 14.0, 8.4]];

/// NCCL hardware latency per hop, µs, per link [NVLink, PCI, network], algorithm [Tree, Ring] and protocol
/// [LL, LL128, Simple] (NCCL src/graph/tuning.cc `hwLat`; MODELS.md §3.3 lists the ring rows).
pub const NCCL_HW_LATENCY_US: [[[f64; 3]; 2]; 3] =
    [[[0.6, 1.25, 4.0], [0.6, 1.9, 3.4]], [[1.0, 1.9, 4.0], [1.0, 2.5, 5.7]], [[5.0, 8.5, 14.0], [2.7, 4.0, 14.0]]];

/// NCCL's per-network-step overhead on multi-node rings, µs (×3 for Simple): `getNetOverhead`'s x86 default.
pub const NCCL_NET_OVERHEAD_US: f64 = 1.0;

/// What [`nccl_predict`] needs.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct NcclModelInput {
    pub collective: Collective,
    pub algorithm: NcclAlgorithm,
    pub protocol: NcclProtocol,
    pub ranks: u32,
    pub nodes: u32,
    pub intra_link: NcclIntraLink,
    /// Bus bandwidth of the algorithm's graph (channels × per-channel bandwidth), GB/s: a fitted busbw is the
    /// natural value.
    pub bus_bw_gbs: f64,
    /// Size as nccl-tests counts it, bytes.
    pub bytes: f64,
}

/// NCCL's predicted time and its parts.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, ToSchema)]
pub struct NcclPrediction {
    /// Latency term, µs.
    pub latency_us: f64,
    /// Algorithm bandwidth after NCCL's protocol factors and bus→algorithm ratio, GB/s.
    pub bandwidth_gbs: f64,
    /// latency + bytes / (1000 · bandwidth), µs.
    pub time_us: f64,
}

/// NCCL's cost model (tuning.cc `ncclTopoTuneModel`, simplified): the protocol factors on busBw (ring LL ×0.5,
/// ring LL128 ×0.92, tree all-reduce ×0.92, tree LL ×1/3.8, tree LL128 ×7/9 on one node, ×120/128 across nodes —
/// the per-channel caps are left out), the bus→algorithm ratio (ring: ranks / nsteps, tree: 1/2), and the latency
/// - ring all-reduce / all-gather / reduce-scatter: base + (nsteps − interSteps)·intraLat + interSteps·interLat,
///   nsteps = 2(p−1) or p−1, interSteps = 2(N−1) or N−1 across N nodes, intraLat raised to the network overhead on
///   multi-node rings, interLat the network tree latency when each node has one rank;
/// - ring broadcast / reduce: base + one hop latency (NCCL's pipelined chain);
/// - tree all-reduce: base + 2·((p/N − 1)·intraLat + ⌊lg N⌋·interLat).
///
/// Errors: fewer than 2 ranks, nodes not dividing into ranks, a non-positive bandwidth or negative size, and
/// (algorithm, collective) pairs NCCL does not model (tree is all-reduce only; all-to-all and send/recv are
/// point-to-point in NCCL).
pub fn nccl_predict(input: &NcclModelInput) -> Result<NcclPrediction, CalibrationError> {
    let NcclModelInput { collective: c, algorithm, protocol, ranks, nodes, intra_link, bus_bw_gbs, bytes } = *input;
    if ranks < 2 {
        return Err(CalibrationError::invalid("NCCL's model needs at least 2 ranks"));
    }
    if nodes == 0 || nodes > ranks {
        return Err(CalibrationError::invalid(format!("{nodes} nodes for {ranks} ranks")));
    }
    if !(bus_bw_gbs.is_finite() && bus_bw_gbs > 0.0) {
        return Err(CalibrationError::invalid(format!("bus_bw_gbs must be positive, got {bus_bw_gbs}")));
    }
    if !(bytes.is_finite() && bytes >= 0.0) {
        return Err(CalibrationError::invalid(format!("bytes must be ≥ 0, got {bytes}")));
    }
    let (a, p) = (algorithm as usize, protocol as usize);
    let (pf, nf) = (ranks as f64, nodes as f64);
    let nsteps = match c {
        Collective::AllReduce => 2.0 * (pf - 1.0),
        Collective::AllGather | Collective::ReduceScatter => pf - 1.0,
        Collective::Broadcast | Collective::Reduce => pf,
        Collective::AllToAll | Collective::SendRecv => {
            return Err(CalibrationError::invalid(format!(
                "{} is point-to-point in NCCL: use the postal model",
                c.as_str()
            )))
        }
    };
    if algorithm == NcclAlgorithm::Tree && c != Collective::AllReduce {
        return Err(CalibrationError::invalid(format!("NCCL runs {} as a ring only", c.as_str())));
    }
    let mut bus = bus_bw_gbs;
    match (algorithm, protocol) {
        (NcclAlgorithm::Ring, NcclProtocol::Ll) => bus *= 0.5,
        (NcclAlgorithm::Ring, NcclProtocol::Ll128) => bus *= 0.92,
        _ => {}
    }
    if algorithm == NcclAlgorithm::Tree {
        bus *= 0.92;
        match protocol {
            NcclProtocol::Ll => bus /= 3.8,
            NcclProtocol::Ll128 => bus *= if nodes == 1 { 7.0 / 9.0 } else { 120.0 / 128.0 },
            NcclProtocol::Simple => {}
        }
    }
    let bandwidth_gbs = match algorithm {
        NcclAlgorithm::Ring => bus * pf / nsteps,
        NcclAlgorithm::Tree => bus * 0.5,
    };
    let intra_hw = match intra_link {
        NcclIntraLink::Nvlink => 0,
        NcclIntraLink::Pci => 1,
    };
    let ppn = pf / nf;
    let mut intra_lat = NCCL_HW_LATENCY_US[intra_hw][a][p];
    let inter_lat = if ppn == 1.0 { NCCL_HW_LATENCY_US[2][0][p] } else { NCCL_HW_LATENCY_US[2][a][p] };
    let base = NCCL_BASE_LATENCY_US[a][p];
    let latency_us = match (algorithm, c) {
        (NcclAlgorithm::Ring, Collective::Broadcast | Collective::Reduce) => {
            let hw = if nodes == 1 { intra_hw } else { 2 };
            base + NCCL_HW_LATENCY_US[hw][a][p]
        }
        (NcclAlgorithm::Ring, _) => {
            if nodes > 1 {
                let overhead =
                    if protocol == NcclProtocol::Simple { 3.0 * NCCL_NET_OVERHEAD_US } else { NCCL_NET_OVERHEAD_US };
                intra_lat = intra_lat.max(overhead);
            }
            let inter_steps = if nodes == 1 {
                0.0
            } else if c == Collective::AllReduce {
                2.0 * (nf - 1.0)
            } else {
                nf - 1.0
            };
            base + (nsteps - inter_steps) * intra_lat + inter_steps * inter_lat
        }
        (NcclAlgorithm::Tree, _) => {
            let log2_nodes = (nodes as f64).log2().floor();
            base + 2.0 * ((ppn.floor() - 1.0) * intra_lat + log2_nodes * inter_lat)
        }
    };
    Ok(NcclPrediction { latency_us, bandwidth_gbs, time_us: latency_us + bytes / (1000.0 * bandwidth_gbs) })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nccl_model_by_hand() {
        // Ring all-reduce, Simple, 8 ranks on one NVLink node, busBw 240 GB/s, 1 GiB:
        // nsteps 14; latency = 8.4 + 14·3.4 = 56.0 µs; bw = 240·8/14 = 137.143 GB/s;
        // time = 56 + 1,073,741,824 / (1000 · 137.143) = 56 + 7829.37 = 7885.37 µs.
        let mut input = NcclModelInput {
            collective: Collective::AllReduce,
            algorithm: NcclAlgorithm::Ring,
            protocol: NcclProtocol::Simple,
            ranks: 8,
            nodes: 1,
            intra_link: NcclIntraLink::Nvlink,
            bus_bw_gbs: 240.0,
            bytes: 1_073_741_824.0,
        };
        let p = nccl_predict(&input).unwrap();
        assert!((p.latency_us - 56.0).abs() < 1e-9);
        assert!((p.bandwidth_gbs - 137.142_857).abs() < 1e-5);
        assert!((p.time_us - 7885.37).abs() < 0.01, "{}", p.time_us);
        // Tree all-reduce, Simple, 16 ranks on 2 nodes, busBw 100: bw = 100·0.92·0.5 = 46 GB/s;
        // latency = 8.4 + 2·(7·4.0 + 1·14.0) = 92.4 µs; 1e8 B → 92.4 + 1e8/46,000 = 2266.313 µs.
        input = NcclModelInput {
            algorithm: NcclAlgorithm::Tree,
            ranks: 16,
            nodes: 2,
            bus_bw_gbs: 100.0,
            bytes: 1e8,
            ..input
        };
        let p = nccl_predict(&input).unwrap();
        assert!((p.latency_us - 92.4).abs() < 1e-9);
        assert!((p.bandwidth_gbs - 46.0).abs() < 1e-9);
        assert!((p.time_us - 2266.313).abs() < 1e-3);
        // Ring all-gather, LL, 16 ranks on 2 nodes (8 per node), busBw 100: bw = 100·0.5·16/15 = 53.333 GB/s;
        // intraLat = max(0.6, 1.0 net overhead) = 1.0, interLat (ring LL network) 2.7, 1 inter step:
        // latency = 6.6 + 14·1.0 + 1·2.7 = 23.3 µs.
        let p = nccl_predict(&NcclModelInput {
            collective: Collective::AllGather,
            algorithm: NcclAlgorithm::Ring,
            protocol: NcclProtocol::Ll,
            ..input
        })
        .unwrap();
        assert!((p.latency_us - 23.3).abs() < 1e-9);
        assert!((p.bandwidth_gbs - 53.333_333).abs() < 1e-5);
        // Refused: tree all-gather, all-to-all, one rank.
        assert!(nccl_predict(&NcclModelInput { collective: Collective::AllGather, ..input }).is_err());
        assert!(nccl_predict(&NcclModelInput {
            collective: Collective::AllToAll,
            algorithm: NcclAlgorithm::Ring,
            ..input
        })
        .is_err());
        assert!(nccl_predict(&NcclModelInput { ranks: 1, nodes: 1, ..input }).is_err());
    }
}
