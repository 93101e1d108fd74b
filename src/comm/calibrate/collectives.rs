//! Per-collective fits in busbw conventions (nccl-tests rows), as the [parent module](super) describes.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::{check_points, fit_postal, CalibrationError, FitStats, Point};
use crate::op::Collective;
use crate::samples::CommSample;

/// Ring steps of a collective over `p` ranks (module doc): the count its latency term multiplies.
pub fn ring_steps(c: Collective, p: u32) -> f64 {
    let p = p.max(1) as f64;
    match c {
        Collective::AllReduce => 2.0 * (p - 1.0),
        Collective::SendRecv => 1.0,
        _ => p - 1.0,
    }
}

/// A collective's fitted model t(S) = latency + factor·S / busbw.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct CollectiveFit {
    pub collective: Collective,
    pub ranks: u32,
    /// busbw factor f (nccl-tests).
    pub busbw_factor: f64,
    /// Latency term L, µs.
    pub latency_us: f64,
    /// Ring steps the latency spans.
    pub steps: f64,
    /// L / steps: α per step, µs.
    pub alpha_per_step_us: f64,
    /// Fitted bus bandwidth, GB/s.
    pub busbw_gbs: f64,
    /// Asymptotic algorithm bandwidth busbw / f, GB/s.
    pub algbw_gbs: f64,
    /// The free fit gave L < 0; L was fixed at 0.
    pub latency_clamped: bool,
    pub stats: FitStats,
}

impl CollectiveFit {
    /// Modelled time of a collective of `bytes` (nccl-tests size), µs.
    pub fn time_us(&self, bytes: f64) -> f64 {
        self.latency_us + self.busbw_factor * bytes / (self.busbw_gbs * 1e3)
    }
}

/// Fits collective `c` over `ranks` ranks to `points` (sizes as nccl-tests counts them).
///
/// Errors: a collective that moves nothing (`ranks` < 2, or < 2 for send/recv semantics is allowed: send/recv
/// uses factor 1), and every error of [`fit_postal`].
pub fn fit_collective(c: Collective, ranks: u32, points: &[Point]) -> Result<CollectiveFit, CalibrationError> {
    let factor = c.busbw_factor(ranks);
    if c != Collective::SendRecv && ranks < 2 {
        return Err(CalibrationError::invalid(format!("{} over {ranks} rank moves no data", c.as_str())));
    }
    check_points(points)?;
    let bus: Vec<Point> = points.iter().map(|p| Point::new(factor * p.bytes, p.time_us)).collect();
    let f = fit_postal(&bus)?;
    let steps = ring_steps(c, ranks);
    Ok(CollectiveFit {
        collective: c,
        ranks,
        busbw_factor: factor,
        latency_us: f.alpha_us,
        steps,
        alpha_per_step_us: f.alpha_us / steps,
        busbw_gbs: f.beta_gbs,
        algbw_gbs: f.beta_gbs / factor,
        latency_clamped: f.latency_clamped,
        stats: f.stats,
    })
}

/// The fit of one (collective, ranks, nodes, GPUs per node) group of samples.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct CollectiveGroupFit {
    pub collective: Collective,
    pub ranks: u32,
    pub nodes: Option<u32>,
    pub gpus_per_node: Option<u32>,
    /// Samples in the group.
    pub samples: usize,
    pub fit: Option<CollectiveFit>,
    /// Why no fit, otherwise.
    pub error: Option<String>,
}

/// Groups `samples` by (collective, ranks, nodes, GPUs per node) and fits each group ([`fit_collective`]).
pub fn fit_collectives(samples: &[CommSample]) -> Vec<CollectiveGroupFit> {
    type Key = (Collective, u32, Option<u32>, Option<u32>);
    let mut groups: BTreeMap<Key, Vec<Point>> = BTreeMap::new();
    for s in samples {
        groups
            .entry((s.collective, s.ranks, s.nodes, s.gpus_per_node))
            .or_default()
            .push(Point::new(s.bytes as f64, s.time_us));
    }
    groups
        .into_iter()
        .map(|((collective, ranks, nodes, gpus_per_node), points)| {
            let (fit, error) = match fit_collective(collective, ranks, &points) {
                Ok(f) => (Some(f), None),
                Err(e) => (None, Some(e.to_string())),
            };
            CollectiveGroupFit { collective, ranks, nodes, gpus_per_node, samples: points.len(), fit, error }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::comm::calibrate::tests::{comm, noise};

    #[test]
    fn collective_fit_in_busbw() {
        // Ring all-reduce over 8 ranks, α = 5 µs per step, busbw 200 GB/s: t = 14·5 + 1.75·S/(200e3) µs, ±1 %.
        let pts: Vec<Point> = (0..30)
            .map(|i| {
                let s = (1u64 << i) as f64;
                Point::new(s, (70.0 + 1.75 * s / 200e3) * noise(i))
            })
            .collect();
        let f = fit_collective(Collective::AllReduce, 8, &pts).unwrap();
        assert_eq!((f.busbw_factor, f.steps), (1.75, 14.0));
        assert!((f.latency_us / 70.0 - 1.0).abs() < 0.03, "{}", f.latency_us);
        assert!((f.alpha_per_step_us / 5.0 - 1.0).abs() < 0.03);
        assert!((f.busbw_gbs / 200.0 - 1.0).abs() < 0.02, "{}", f.busbw_gbs);
        assert!((f.algbw_gbs - f.busbw_gbs / 1.75).abs() < 1e-9);
        assert!(fit_collective(Collective::AllGather, 1, &pts).is_err());
    }

    #[test]
    fn collective_fit_on_measured_nccl_tests_rows() {
        // nccl-tests all_reduce_perf, 8 × A100-SXM4-40GB, out-of-place (shared/fixtures/nccl-tests/
        // superbench_nccl_allreduce_A100-SXM4-40GB_8gpu.log): latency ≈ 35 µs, busbw → 235 GB/s at 8 GiB.
        let rows: [(u64, f64); 16] = [
            (4, 34.73),
            (64, 34.83),
            (1024, 36.07),
            (16384, 36.18),
            (65536, 37.82),
            (262144, 47.53),
            (1048576, 74.78),
            (4194304, 112.0),
            (16777216, 226.0),
            (67108864, 584.5),
            (134217728, 1162.2),
            (268435456, 2112.2),
            (1073741824, 8159.5),
            (2147483648, 16215.0),
            (4294967296, 32070.0),
            (8589934592, 63896.0),
        ];
        let samples: Vec<CommSample> =
            rows.iter().map(|(b, t)| comm(Collective::AllReduce, *b, 8, Some(1), Some(8), *t)).collect();
        let fits = fit_collectives(&samples);
        assert_eq!(fits.len(), 1);
        let f = fits[0].fit.as_ref().unwrap();
        assert!(f.latency_us > 30.0 && f.latency_us < 40.0, "latency {}", f.latency_us);
        assert!(f.busbw_gbs > 200.0 && f.busbw_gbs < 245.0, "busbw {}", f.busbw_gbs);
        // The LL→Simple mid range does not follow one line: the fit says so through its residuals.
        assert!(f.stats.max_abs_relative_residual > 0.1);
    }
}
