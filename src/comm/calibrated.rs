//! A system's communication calibration and how estimates use it (S0's K-model calibrated per system, MODELS.md
//! §3.1–3.3).
//!
//! [`calibrate`] fits, from the system's OSU / nccl-tests samples, a postal model per link class (send/recv
//! between GPUs of one node, and between nodes) and a bus-bandwidth model per measured (collective, ranks, nodes,
//! GPUs per node) group ([`super::calibrate`] has the fits). [`SystemCalibration::estimate`] then answers a
//! collective:
//! 1. **measured group** — the same collective over the same ranks, nodes and GPUs per node was measured: its fit
//!    t = L + f·S/busbw;
//! 2. **calibrated links** — otherwise the α–β algorithms of [`super::estimate`] run over calibrated links: the
//!    intra-node α and bandwidth from the largest single-node group of the same collective (its busbw is the
//!    per-GPU bandwidth the ring sees; MODELS.md §3.3), else from the intra-node send/recv fit; the inter-node
//!    per-GPU bandwidth from the well-fitting multi-node group of the same collective measured with the nearest
//!    number of GPUs per node (one peer pair moves less than several GPUs per node do), else from the
//!    best-fitting multi-node group of any collective with one rank per node, else from the inter-node send/recv
//!    fit. Latencies come from fits only when their samples include small
//!    messages ([`LATENCY_IDENTIFIABLE_BYTES`]); large-message sweeps cannot determine α.
//! Each part the samples do not cover falls back to the system's declared links.

use serde::Serialize;
use utoipa::ToSchema;

use super::calibrate::{fit_collectives, fit_link_classes, CollectiveGroupFit, LinkClass, LinkClassFit};
use super::{estimate, CommEstimate, Group, GroupLinks};
use crate::op::Collective;
use crate::samples::CommSample;

/// What the calibration of one system found.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize, ToSchema)]
pub struct SystemCalibration {
    /// Samples used.
    pub samples: usize,
    /// Postal fits of send/recv per link class.
    pub link_classes: Vec<LinkClassFit>,
    /// Bus-bandwidth fits per measured (collective, ranks, nodes, GPUs per node).
    pub collectives: Vec<CollectiveGroupFit>,
    /// Smallest message of each link class's samples, bytes (same order as `link_classes`).
    #[serde(default)]
    pub link_min_bytes: Vec<u64>,
    /// Smallest message of each group's samples, bytes (same order as `collectives`).
    #[serde(default)]
    pub group_min_bytes: Vec<u64>,
}

/// Messages up to this size make a fit's latency term trustworthy; sweeps of large messages only (nccl-tests
/// from 32 MiB) leave α undetermined, and it then absorbs protocol effects instead of latency.
pub const LATENCY_IDENTIFIABLE_BYTES: u64 = 64 << 10;

/// A fit whose RMS relative residual is at most this describes its samples (a noisier one mixes paths, e.g.
/// node pairs of very different quality, and is used only when nothing better exists).
pub const GOOD_FIT_RESIDUAL: f64 = 0.1;

/// Calibrates from `samples` (all of one system).
pub fn calibrate(samples: &[CommSample]) -> SystemCalibration {
    let link_classes = fit_link_classes(samples);
    let collectives = fit_collectives(samples);
    let min =
        |keep: &dyn Fn(&CommSample) -> bool| samples.iter().filter(|s| keep(s)).map(|s| s.bytes).min().unwrap_or(0);
    let link_min_bytes = link_classes
        .iter()
        .map(|l| min(&|s| s.collective == Collective::SendRecv && super::calibrate::link_class(s) == l.link_class))
        .collect();
    let group_min_bytes = collectives
        .iter()
        .map(|g| {
            min(&|s| {
                s.collective == g.collective
                    && s.ranks == g.ranks
                    && s.nodes == g.nodes
                    && s.gpus_per_node == g.gpus_per_node
            })
        })
        .collect();
    SystemCalibration { samples: samples.len(), link_classes, collectives, link_min_bytes, group_min_bytes }
}

/// How a calibrated estimate was made.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum CalibrationUse {
    /// The measured group's own fit.
    MeasuredGroup,
    /// The α–β algorithms over calibrated link parameters.
    CalibratedLinks,
}

impl SystemCalibration {
    /// (α µs or None when not identifiable, β GB/s, relative residual) of a link class's send/recv fit.
    fn link(&self, class: LinkClass) -> Option<(Option<f64>, f64, f64)> {
        self.link_classes.iter().enumerate().find(|(_, l)| l.link_class == class).and_then(|(i, l)| {
            let trusted = self.link_min_bytes.get(i).is_some_and(|&m| m <= LATENCY_IDENTIFIABLE_BYTES);
            l.fit.as_ref().map(|f| (trusted.then_some(f.alpha_us), f.beta_gbs, f.stats.rms_relative_residual))
        })
    }

    /// The inter-node path of collective `c` for a group with `ranks_per_node` ranks per node, from the well-fitting
    /// multi-node group of `c` measured with the nearest number of GPUs per node on a log scale (1, 2, 4, 8; ties:
    /// the better fit): (α per step when trusted, per-GPU NIC bandwidth GB/s, residual, ranks). The per-GPU
    /// bandwidth inverts the model [`super::estimate`] applies: a send/recv pair or a group with one GPU per node
    /// gives its bus bandwidth; all-to-all with g GPUs per node sends (p − g)/(p − 1) of its bus traffic through
    /// the NICs, busbw·(p − g)/(p − 1); the ring collectives share g NICs, busbw/g. Pairs and placements differ:
    /// one all-to-all peer pair of the H100 cluster (DATA.md) moves 36 GB/s, its 2-node runs with 2–8 GPUs per
    /// node 47–49 GB/s per GPU.
    fn nearest_placement(&self, c: Collective, ranks_per_node: u32) -> Option<(Option<f64>, f64, f64, u32)> {
        let want = (ranks_per_node.max(1) as f64).log2();
        self.collectives
            .iter()
            .enumerate()
            .filter(|(_, g)| g.collective == c && g.nodes.is_some_and(|n| n > 1))
            .filter_map(|(i, g)| {
                let f = g.fit.as_ref()?;
                if f.stats.rms_relative_residual > GOOD_FIT_RESIDUAL {
                    return None;
                }
                let gpn = g.gpus_per_node.unwrap_or(1).max(1);
                let (p, gf) = (g.ranks.max(2) as f64, gpn as f64);
                let per_gpu = match c {
                    _ if gpn == 1 => f.busbw_gbs,
                    Collective::SendRecv => f.busbw_gbs,
                    Collective::AllToAll => f.busbw_gbs * (p - gf) / (p - 1.0),
                    _ => f.busbw_gbs / gf,
                };
                let trusted = self.group_min_bytes.get(i).is_some_and(|&m| m <= LATENCY_IDENTIFIABLE_BYTES);
                Some((gpn, (trusted.then_some(f.alpha_per_step_us), per_gpu, f.stats.rms_relative_residual, g.ranks)))
            })
            .min_by(|(ga, a), (gb, b)| {
                let d = |g: u32| ((g as f64).log2() - want).abs();
                d(*ga).total_cmp(&d(*gb)).then(a.2.total_cmp(&b.2))
            })
            .map(|(_, x)| x)
    }

    /// Fitted groups matching `keep`, as (α per step or None, busbw, relative residual, ranks).
    fn groups(&self, keep: &dyn Fn(&CollectiveGroupFit) -> bool) -> Vec<(Option<f64>, f64, f64, u32)> {
        self.collectives
            .iter()
            .enumerate()
            .filter(|(_, g)| keep(g))
            .filter_map(|(i, g)| {
                let trusted = self.group_min_bytes.get(i).is_some_and(|&m| m <= LATENCY_IDENTIFIABLE_BYTES);
                g.fit.as_ref().map(|f| {
                    (trusted.then_some(f.alpha_per_step_us), f.busbw_gbs, f.stats.rms_relative_residual, g.ranks)
                })
            })
            .collect()
    }

    /// The links `base` with every parameter the calibration covers replaced, for collective `c`. Latencies are
    /// replaced only where the samples include small messages ([`LATENCY_IDENTIFIABLE_BYTES`]).
    ///
    /// Intra-node: the largest single-node group of `c`, else intra-node send/recv. Inter-node: the well-fitting
    /// ([`GOOD_FIT_RESIDUAL`]) multi-node group of `c` nearest in GPUs per node to `ranks_per_node`, else the
    /// best-fitting (lowest relative residual) group with one rank per node of any collective, else inter-node
    /// send/recv.
    pub fn links(&self, c: Collective, ranks_per_node: u32, base: &GroupLinks) -> GroupLinks {
        let mut links = *base;
        let intra = self.groups(&|g| g.collective == c && g.nodes == Some(1)).into_iter().max_by_key(|x| x.3);
        if let Some((a, b, _, _)) = intra {
            links.intra_alpha_us = a.unwrap_or(base.intra_alpha_us);
            links.intra_gbs = b;
        } else if let Some((a, b, _)) = self.link(LinkClass::IntraNode) {
            links.intra_alpha_us = a.unwrap_or(base.intra_alpha_us);
            links.intra_gbs = b;
        }
        let across = |g: &CollectiveGroupFit| g.nodes.is_some_and(|n| n > 1) && g.gpus_per_node == Some(1);
        let best = |v: Vec<(Option<f64>, f64, f64, u32)>| v.into_iter().min_by(|x, y| x.2.total_cmp(&y.2));
        let same = self.nearest_placement(c, ranks_per_node);
        let inter = same.or_else(|| best(self.groups(&across)));
        if let Some((a, b, _, _)) = inter {
            links.inter_alpha_us = a.unwrap_or(base.inter_alpha_us);
            links.inter_gbs_per_gpu = b;
        } else if let Some((a, b, _)) = self.link(LinkClass::InterNode) {
            links.inter_alpha_us = a.unwrap_or(base.inter_alpha_us);
            links.inter_gbs_per_gpu = b;
        }
        links
    }

    /// The calibrated time of collective `c` of `bytes` over `group`, or `None` when nothing calibrated applies
    /// (no fit for the measured group, no link class fitted).
    pub fn estimate(
        &self,
        c: Collective,
        bytes: f64,
        group: Group,
        base: &GroupLinks,
    ) -> Option<(CommEstimate, CalibrationUse)> {
        let exact = self.collectives.iter().find(|g| {
            g.collective == c
                && g.ranks == group.ranks
                && g.nodes.is_none_or(|n| n == group.nodes)
                && g.gpus_per_node.is_none_or(|r| r == group.ranks_per_node)
        });
        if let Some(f) = exact.and_then(|g| g.fit.as_ref()) {
            let t = f.time_us(bytes);
            let e = CommEstimate {
                time_us: t,
                algorithm: "measured_fit",
                algorithms: vec![super::AlgorithmEstimate { algorithm: "measured_fit", time_us: t }],
            };
            return Some((e, CalibrationUse::MeasuredGroup));
        }
        let links = self.links(c, group.ranks_per_node, base);
        if links == *base {
            return None;
        }
        Some((estimate(c, bytes, group, &links), CalibrationUse::CalibratedLinks))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(c: Collective, bytes: u64, ranks: u32, nodes: u32, gpn: u32, time_us: f64) -> CommSample {
        CommSample {
            collective: c,
            bytes,
            ranks,
            nodes: Some(nodes),
            gpus_per_node: Some(gpn),
            time_us,
            algbw_gbs: None,
            busbw_gbs: None,
            dtype: None,
            attributes: Default::default(),
        }
    }

    fn base() -> GroupLinks {
        GroupLinks { intra_alpha_us: 2.0, intra_gbs: 100.0, inter_alpha_us: 5.0, inter_gbs_per_gpu: 10.0 }
    }

    #[test]
    fn measured_groups_answer_with_their_own_fit() {
        // 8-rank single-node all-reduce with L = 30 µs and busbw 300 GB/s: t = 30 + 1.75·S/300e3 µs.
        let samples: Vec<CommSample> = [1u64 << 10, 1 << 20, 1 << 24, 1 << 28, 1 << 30]
            .iter()
            .map(|&s| sample(Collective::AllReduce, s, 8, 1, 8, 30.0 + 1.75 * s as f64 / 300e3))
            .collect();
        let cal = calibrate(&samples);
        let (e, how) = cal.estimate(Collective::AllReduce, 1e9, Group::new(8, 8), &base()).unwrap();
        assert_eq!(how, CalibrationUse::MeasuredGroup);
        assert!((e.time_us - (30.0 + 1.75 * 1e9 / 300e3)).abs() / e.time_us < 1e-6, "{}", e.time_us);
        // Another rank count: the ring over the calibrated intra link (busbw 300 GB/s, α = 30/14 µs per step).
        let (e4, how) = cal.estimate(Collective::AllReduce, 1e9, Group::new(4, 4), &base()).unwrap();
        assert_eq!(how, CalibrationUse::CalibratedLinks);
        let ring = e4.algorithms.iter().find(|a| a.algorithm == "ring").unwrap();
        let expected = 2.0 * 3.0 * (30.0 / 14.0) + 1.5 * 1e9 / 300e3;
        assert!((ring.time_us - expected).abs() / expected < 1e-6, "{} vs {expected}", ring.time_us);
    }

    #[test]
    fn inter_node_send_recv_sets_the_nic_path() {
        // Node pairs: α 8 µs, β 45 GB/s.
        let samples: Vec<CommSample> = [1u64 << 12, 1 << 20, 1 << 24, 1 << 28]
            .iter()
            .map(|&s| sample(Collective::SendRecv, s, 2, 2, 1, 8.0 + s as f64 / 45e3))
            .collect();
        let links = calibrate(&samples).links(Collective::AllReduce, 1, &base());
        assert!((links.inter_alpha_us - 8.0).abs() < 1e-6);
        assert!((links.inter_gbs_per_gpu - 45.0).abs() < 1e-6);
        // Large messages only: the bandwidth is calibrated, the latency stays the declared one.
        let big: Vec<CommSample> = samples.iter().filter(|s| s.bytes >= 1 << 20).cloned().collect();
        let links = calibrate(&big).links(Collective::AllReduce, 1, &base());
        assert_eq!(links.inter_alpha_us, 5.0);
        assert!((links.inter_gbs_per_gpu - 45.0).abs() < 1e-6);
        // A two-node all-reduce with one rank per node fits the NIC path better than noisy send/recv.
        let mut mixed = big.clone();
        for (i, &s) in [1u64 << 25, 1 << 27, 1 << 29].iter().enumerate() {
            let noisy = if i % 2 == 0 { 1.5 } else { 0.7 };
            mixed.push(sample(Collective::SendRecv, s, 2, 2, 1, noisy * (8.0 + s as f64 / 20e3)));
            mixed.push(sample(Collective::AllReduce, s, 2, 2, 1, 50.0 + s as f64 / 48e3));
        }
        let links = calibrate(&mixed).links(Collective::AllGather, 1, &base());
        assert!((links.inter_gbs_per_gpu - 48.0).abs() < 1e-3, "{}", links.inter_gbs_per_gpu);
        // Intra-node untouched.
        assert_eq!((links.intra_alpha_us, links.intra_gbs), (2.0, 100.0));
        assert!(calibrate(&[]).estimate(Collective::AllReduce, 1e6, Group::new(2, 1), &base()).is_none());
    }
}
