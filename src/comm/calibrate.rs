//! Calibration of the communication models from measurements (MODELS.md §3.1, §3.3), and NCCL's own cost model
//! as the analytic baseline for collectives.
//!
//! **Postal fit.** t(n) = α + n/β (α µs, β GB/s = 10³ B/µs) is linear in (α, 1/β). Message sizes in a benchmark
//! sweep span many decades (osu_latency/osu_bw, nccl-tests: 1 B … 8 GiB), so an ordinary least-squares fit would
//! be decided by the largest messages alone and α would be noise. The fit therefore minimises **relative**
//! residuals r = (t_measured − t_model) / t_measured (weighted least squares with weights 1/t²), and is made robust
//! by **Huber IRLS** (Huber 1964; Holland & Welsch 1977): each pass re-weights every point by
//! w = min(1, k·σ/|r|), k = 1.345 (95 % efficiency under Gaussian noise), σ = median|r| / 0.6745 (MAD scale,
//! floored at 10⁻⁶), until the fitted times change by less than 10⁻¹⁰ relative (at most 100 passes). A congested
//! run or a warm-up outlier then pulls the fit by a bounded amount instead of quadratically. α is constrained to
//! ≥ 0: if the free fit gives α < 0 (latency below the noise), the fit is redone through the origin and
//! `latency_clamped` says so.
//!
//! **Per link class** (S0's K-model, [rec]): send/recv samples (osu_latency, osu_bw converted to times, nccl-tests
//! sendrecv) are grouped into intra-node and inter-node by their `nodes` (or `gpus_per_node` vs `ranks`), and one
//! (α, β) is fitted per class. [`fit_postal_piecewise`] fits the two sides of an eager/rendezvous switch apart.
//!
//! **Per collective** (nccl-tests rows): with busbw conventions (MODELS.md §3.3: fit bandwidths in busbw, which is
//! comparable to link peak whatever the rank count), t(S) = L + f·S / B_bus, where f is nccl-tests' bus-bandwidth
//! factor ([`Collective::busbw_factor`]: 2(p−1)/p for all-reduce, (p−1)/p for all-gather / reduce-scatter /
//! all-to-all, 1 otherwise) and S the nccl-tests size. That is exactly the ring formula of MODELS.md §3.2 with
//! B = B_bus (e.g. ring all-reduce 2(p−1)α + 2(p−1)/p·S/B), so the same robust postal fit on (f·S, t) gives B_bus
//! and the latency L; L / steps is the per-step α (steps: 2(p−1) all-reduce, p−1 all-gather / reduce-scatter /
//! all-to-all / broadcast / reduce, 1 send/recv).
//!
//! **NCCL's model** ([`nccl_predict`]): NCCL's tuner (src/graph/tuning.cc) predicts
//! time = latency + bytes / (1000 · bw) µs, with its base and per-hop latencies ([`NCCL_BASE_LATENCY_US`],
//! [`NCCL_HW_LATENCY_US`]) as priors.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::Collective;
use crate::ingest::CommSample;

/// One measurement: message size (bytes, as nccl-tests counts it) and time (µs).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Point {
    pub bytes: f64,
    pub time_us: f64,
}

impl Point {
    /// A point of `bytes` taking `time_us`.
    pub fn new(bytes: f64, time_us: f64) -> Point {
        Point { bytes, time_us }
    }
}

/// Why a fit cannot be made.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema, thiserror::Error)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum CalibrationError {
    /// No points at all.
    #[error("no samples to fit")]
    Empty,
    /// A point with a non-positive or non-finite time, or a negative or non-finite size (0-based index).
    #[error("sample {index}: {message}")]
    BadPoint { index: usize, message: String },
    /// Fewer than two distinct message sizes: α and β cannot be told apart.
    #[error("needs at least two distinct message sizes, got {distinct}")]
    TooFewSizes { distinct: usize },
    /// The fitted time does not grow with the size (slope ≤ 0): no bandwidth can be fitted.
    #[error("time does not grow with message size: the bandwidth cannot be fitted")]
    NoBandwidth,
    /// Input the model does not apply to (a collective over one rank, an algorithm NCCL does not run).
    #[error("{message}")]
    Invalid { message: String },
}

impl CalibrationError {
    fn invalid(message: impl Into<String>) -> CalibrationError {
        CalibrationError::Invalid { message: message.into() }
    }
}

/// Robust-fit settings (module doc).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FitOptions {
    /// Huber constant k in units of the robust scale σ; `f64::INFINITY` gives plain (relative) least squares.
    pub huber_k: f64,
    /// Maximum IRLS passes.
    pub max_iterations: u32,
    /// Convergence: largest relative change of a fitted time between passes.
    pub tolerance: f64,
}

impl Default for FitOptions {
    fn default() -> FitOptions {
        FitOptions { huber_k: 1.345, max_iterations: 100, tolerance: 1e-10 }
    }
}

/// How well a fit matches its points. Residuals are relative: (measured − model) / measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct FitStats {
    /// Points fitted.
    pub samples: usize,
    /// Distinct message sizes among them.
    pub distinct_sizes: usize,
    /// √(mean r²) over all points (outliers included).
    pub rms_relative_residual: f64,
    /// max |r|.
    pub max_abs_relative_residual: f64,
    /// Robust scale σ of r at the end (median|r| / 0.6745).
    pub robust_scale: f64,
    /// Points the Huber weights discounted (|r| > k·σ).
    pub downweighted: usize,
    /// IRLS passes made.
    pub iterations: u32,
    /// Whether the passes converged before the limit.
    pub converged: bool,
}

/// A fitted postal (Hockney) model t = α + n/β.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct PostalFit {
    /// α, µs.
    pub alpha_us: f64,
    /// β, GB/s (10⁹ B/s).
    pub beta_gbs: f64,
    /// The free fit gave α < 0; α was fixed at 0.
    pub latency_clamped: bool,
    pub stats: FitStats,
}

impl PostalFit {
    /// Modelled time of `bytes`, µs.
    pub fn time_us(&self, bytes: f64) -> f64 {
        self.alpha_us + bytes / (self.beta_gbs * 1e3)
    }
}

fn check_points(points: &[Point]) -> Result<usize, CalibrationError> {
    if points.is_empty() {
        return Err(CalibrationError::Empty);
    }
    for (index, p) in points.iter().enumerate() {
        if !(p.time_us.is_finite() && p.time_us > 0.0) {
            return Err(CalibrationError::BadPoint {
                index,
                message: format!("time must be a positive number of µs, got {}", p.time_us),
            });
        }
        if !(p.bytes.is_finite() && p.bytes >= 0.0) {
            return Err(CalibrationError::BadPoint {
                index,
                message: format!("size must be a non-negative number of bytes, got {}", p.bytes),
            });
        }
    }
    let mut sizes: Vec<f64> = points.iter().map(|p| p.bytes).collect();
    sizes.sort_by(f64::total_cmp);
    sizes.dedup();
    if sizes.len() < 2 {
        return Err(CalibrationError::TooFewSizes { distinct: sizes.len() });
    }
    Ok(sizes.len())
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n == 0 {
        0.0
    } else if n % 2 == 1 {
        v[n / 2]
    } else {
        0.5 * (v[n / 2 - 1] + v[n / 2])
    }
}

/// Result of one IRLS run: intercept (µs), slope (µs per byte), weights, scale, passes, convergence.
struct Irls {
    a: f64,
    b: f64,
    weights: Vec<f64>,
    scale: f64,
    iterations: u32,
    converged: bool,
}

/// Huber IRLS on relative residuals for t = a + b·x (or t = b·x without intercept).
fn irls(points: &[Point], intercept: bool, opts: &FitOptions) -> Result<Irls, CalibrationError> {
    // Scale sizes to [0, 1] so the normal equations stay well conditioned.
    let x_max = points.iter().map(|p| p.bytes).fold(0.0, f64::max);
    let u: Vec<f64> = points.iter().map(|p| 1.0 / p.time_us).collect();
    let v: Vec<f64> = points.iter().map(|p| p.bytes / x_max / p.time_us).collect();
    let n = points.len();
    let mut w = vec![1.0; n];
    let (mut a, mut b) = (0.0, 0.0);
    let mut prev: Option<Vec<f64>> = None;
    let mut scale = 0.0;
    let mut iterations = 0;
    let mut converged = false;
    for it in 1..=opts.max_iterations.max(1) {
        iterations = it;
        let (mut suu, mut suv, mut svv, mut su, mut sv) = (0.0, 0.0, 0.0, 0.0, 0.0);
        for i in 0..n {
            suu += w[i] * u[i] * u[i];
            suv += w[i] * u[i] * v[i];
            svv += w[i] * v[i] * v[i];
            su += w[i] * u[i];
            sv += w[i] * v[i];
        }
        if intercept {
            let det = suu * svv - suv * suv;
            if !(det.is_finite() && det > 1e-12 * suu * svv) {
                return Err(CalibrationError::TooFewSizes { distinct: 1 });
            }
            a = (su * svv - sv * suv) / det;
            b = (sv * suu - su * suv) / det;
        } else {
            a = 0.0;
            b = sv / svv;
        }
        // Relative residuals and fitted times (relative to the measurement).
        let r: Vec<f64> = (0..n).map(|i| 1.0 - a * u[i] - b * v[i]).collect();
        scale = (median(r.iter().map(|x| x.abs()).collect()) / 0.6745).max(1e-6);
        let fitted: Vec<f64> = (0..n).map(|i| a * u[i] + b * v[i]).collect();
        if let Some(p) = &prev {
            let change = p.iter().zip(&fitted).map(|(x, y)| (x - y).abs()).fold(0.0, f64::max);
            if change <= opts.tolerance {
                converged = true;
                break;
            }
        }
        prev = Some(fitted);
        let cut = opts.huber_k * scale;
        for i in 0..n {
            w[i] = if r[i].abs() <= cut { 1.0 } else { cut / r[i].abs() };
        }
        if !opts.huber_k.is_finite() {
            converged = true;
            break;
        }
    }
    Ok(Irls { a, b: b / x_max, weights: w, scale, iterations, converged })
}

fn stats(points: &[Point], a: f64, b: f64, fit: &Irls, distinct: usize) -> FitStats {
    let r: Vec<f64> = points.iter().map(|p| (p.time_us - (a + b * p.bytes)) / p.time_us).collect();
    let n = r.len() as f64;
    FitStats {
        samples: points.len(),
        distinct_sizes: distinct,
        rms_relative_residual: (r.iter().map(|x| x * x).sum::<f64>() / n).sqrt(),
        max_abs_relative_residual: r.iter().fold(0.0, |m, x| m.max(x.abs())),
        robust_scale: fit.scale,
        downweighted: fit.weights.iter().filter(|w| **w < 1.0).count(),
        iterations: fit.iterations,
        converged: fit.converged,
    }
}

/// Fits t = α + n/β to `points` with the default robust settings (module doc).
///
/// Errors: no points; a point with a non-positive/non-finite time or a negative size; fewer than two distinct
/// sizes; a fit whose time does not grow with size.
pub fn fit_postal(points: &[Point]) -> Result<PostalFit, CalibrationError> {
    fit_postal_with(points, &FitOptions::default())
}

/// [`fit_postal`] with explicit settings.
pub fn fit_postal_with(points: &[Point], opts: &FitOptions) -> Result<PostalFit, CalibrationError> {
    let distinct = check_points(points)?;
    let mut fit = irls(points, true, opts)?;
    let mut clamped = false;
    if fit.a < 0.0 {
        fit = irls(points, false, opts)?;
        clamped = true;
    }
    if !(fit.b.is_finite() && fit.b > 0.0) {
        return Err(CalibrationError::NoBandwidth);
    }
    let stats = stats(points, fit.a, fit.b, &fit, distinct);
    Ok(PostalFit { alpha_us: fit.a, beta_gbs: 1.0 / (fit.b * 1e3), latency_clamped: clamped, stats })
}

/// Two postal fits on either side of a protocol switch (MPI eager/rendezvous, NCCL LL/Simple).
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct PiecewisePostalFit {
    /// Messages of at most this size are in `below`, bytes.
    pub switch_bytes: f64,
    pub below: PostalFit,
    pub above: PostalFit,
}

impl PiecewisePostalFit {
    /// Modelled time of `bytes` on its side of the switch, µs.
    pub fn time_us(&self, bytes: f64) -> f64 {
        if bytes <= self.switch_bytes {
            self.below.time_us(bytes)
        } else {
            self.above.time_us(bytes)
        }
    }
}

/// Fits sizes ≤ `switch_bytes` and sizes > `switch_bytes` separately.
///
/// Errors: as [`fit_postal`], for either side.
pub fn fit_postal_piecewise(points: &[Point], switch_bytes: f64) -> Result<PiecewisePostalFit, CalibrationError> {
    check_points(points)?;
    let (lo, hi): (Vec<Point>, Vec<Point>) = points.iter().partition(|p| p.bytes <= switch_bytes);
    Ok(PiecewisePostalFit { switch_bytes, below: fit_postal(&lo)?, above: fit_postal(&hi)? })
}

/// A link class of the postal model (MODELS.md §3.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum LinkClass {
    /// Both ranks on one node (NVLink, NVSwitch, xGMI, PCIe).
    IntraNode,
    /// Ranks on different nodes (InfiniBand, Slingshot, RoCE, EFA).
    InterNode,
    /// The sample does not say where its ranks were.
    Unknown,
}

/// Where a sample's ranks were: `nodes` > 1 → inter-node, `nodes` = 1 → intra-node; without `nodes`,
/// `ranks` > `gpus_per_node` → inter-node, else intra-node; with neither, [`LinkClass::Unknown`].
pub fn link_class(s: &CommSample) -> LinkClass {
    match (s.nodes, s.gpus_per_node) {
        (Some(n), _) if n > 1 => LinkClass::InterNode,
        (Some(_), _) => LinkClass::IntraNode,
        (None, Some(g)) if s.ranks > g => LinkClass::InterNode,
        (None, Some(_)) => LinkClass::IntraNode,
        (None, None) => LinkClass::Unknown,
    }
}

/// The fit of one link class.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct LinkClassFit {
    pub link_class: LinkClass,
    /// Send/recv samples of this class.
    pub samples: usize,
    /// The fit, when one could be made.
    pub fit: Option<PostalFit>,
    /// Why not, otherwise.
    pub error: Option<String>,
}

/// Fits α, β per link class from the send/recv samples among `samples` (other collectives are ignored).
/// One entry per class present, in the order intra-node, inter-node, unknown.
pub fn fit_link_classes(samples: &[CommSample]) -> Vec<LinkClassFit> {
    let mut groups: BTreeMap<LinkClass, Vec<Point>> = BTreeMap::new();
    for s in samples.iter().filter(|s| s.collective == Collective::SendRecv) {
        groups.entry(link_class(s)).or_default().push(Point::new(s.bytes as f64, s.time_us));
    }
    groups
        .into_iter()
        .map(|(link_class, points)| {
            let (fit, error) = match fit_postal(&points) {
                Ok(f) => (Some(f), None),
                Err(e) => (None, Some(e.to_string())),
            };
            LinkClassFit { link_class, samples: points.len(), fit, error }
        })
        .collect()
}

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

    /// Deterministic noise in [−1 %, +1 %].
    fn noise(i: usize) -> f64 {
        1.0 + 0.01 * (1.7 * i as f64).sin()
    }

    /// Sizes 1 B … 256 MiB by powers of two, t = α + n/β with ±1 % noise.
    fn sweep(alpha_us: f64, beta_gbs: f64) -> Vec<Point> {
        (0..29)
            .map(|i| {
                let n = (1u64 << i) as f64;
                Point::new(n, (alpha_us + n / (beta_gbs * 1e3)) * noise(i))
            })
            .collect()
    }

    #[test]
    fn exact_two_point_fit_by_hand() {
        // (0 B, 2 µs) and (1e6 B, 42 µs): α = 2 µs, slope 40 µs / 1e6 B → β = 1e6 / (40 · 1e3) = 25 GB/s.
        let f = fit_postal(&[Point::new(0.0, 2.0), Point::new(1e6, 42.0)]).unwrap();
        assert!((f.alpha_us - 2.0).abs() < 1e-9, "{}", f.alpha_us);
        assert!((f.beta_gbs - 25.0).abs() < 1e-9, "{}", f.beta_gbs);
        assert!(f.stats.max_abs_relative_residual < 1e-12);
        assert!((f.time_us(5e5) - 22.0).abs() < 1e-9);
        assert!(!f.latency_clamped);
    }

    #[test]
    fn recovers_alpha_and_beta_from_noisy_sweep() {
        // α = 2.5 µs, β = 25 GB/s, 29 sizes with ±1 % deterministic noise. Tolerance: α within 3 %, β within 2 %.
        let f = fit_postal(&sweep(2.5, 25.0)).unwrap();
        assert!((f.alpha_us / 2.5 - 1.0).abs() < 0.03, "alpha {}", f.alpha_us);
        assert!((f.beta_gbs / 25.0 - 1.0).abs() < 0.02, "beta {}", f.beta_gbs);
        assert!(f.stats.rms_relative_residual < 0.01);
        assert!(f.stats.max_abs_relative_residual < 0.02);
        assert!(f.stats.converged);
        assert_eq!((f.stats.samples, f.stats.distinct_sizes), (29, 29));
    }

    #[test]
    fn outliers_barely_move_the_robust_fit() {
        // Three congested runs at 4× their time (one small, one mid, one large message).
        let mut pts = sweep(2.5, 25.0);
        for i in [3, 14, 26] {
            pts[i].time_us *= 4.0;
        }
        let robust = fit_postal(&pts).unwrap();
        let plain = fit_postal_with(&pts, &FitOptions { huber_k: f64::INFINITY, ..Default::default() }).unwrap();
        let err = |f: &PostalFit| ((f.alpha_us / 2.5 - 1.0).abs(), (f.beta_gbs / 25.0 - 1.0).abs());
        let (ra, rb) = err(&robust);
        let (pa, pb) = err(&plain);
        // The robust fit stays within 1.5 % (α) and 1 % (β) — the noise-only tolerance — while plain (relative)
        // least squares is pulled several times further.
        assert!(ra < 0.015 && rb < 0.01, "robust α err {ra}, β err {rb}");
        assert!(pa + pb > 5.0 * (ra + rb), "plain α err {pa}, β err {pb}");
        assert!(robust.stats.downweighted >= 3);
        // The outliers show in the residual statistics: max |r| ≈ 3/4.
        assert!(robust.stats.max_abs_relative_residual > 0.7);
    }

    #[test]
    fn degenerate_inputs_are_errors() {
        assert_eq!(fit_postal(&[]), Err(CalibrationError::Empty));
        assert_eq!(
            fit_postal(&[Point::new(8.0, 1.0), Point::new(8.0, 1.1)]),
            Err(CalibrationError::TooFewSizes { distinct: 1 })
        );
        let e = fit_postal(&[Point::new(8.0, 1.0), Point::new(16.0, 0.0)]).unwrap_err();
        assert!(matches!(e, CalibrationError::BadPoint { index: 1, .. }), "{e}");
        assert!(matches!(
            fit_postal(&[Point::new(-1.0, 1.0), Point::new(16.0, 2.0)]),
            Err(CalibrationError::BadPoint { index: 0, .. })
        ));
        assert!(fit_postal(&[Point::new(1.0, f64::NAN), Point::new(2.0, 1.0)]).is_err());
        // Time that falls with size has no bandwidth.
        assert_eq!(
            fit_postal(&[Point::new(0.0, 10.0), Point::new(1e6, 5.0), Point::new(2e6, 2.0)]),
            Err(CalibrationError::NoBandwidth)
        );
    }

    #[test]
    fn negative_latency_is_clamped_to_zero() {
        // (1e6 B, 10 µs), (2e6 B, 21 µs): the free line has α = −1 µs; through the origin the relative fit of
        // t = s·n minimises (1 − s·1e5)² + (1 − s·2e6/21)², s = (1e5 + 2e6/21) / (1e10 + (2e6/21)²)
        // = 195,238.1 / 1.90703e10 = 1.02378e-5 µs/B → β = 1/(1.02378e-5 · 1e3) = 97.677 GB/s.
        let f = fit_postal_with(
            &[Point::new(1e6, 10.0), Point::new(2e6, 21.0)],
            &FitOptions { huber_k: f64::INFINITY, ..Default::default() },
        )
        .unwrap();
        assert!(f.latency_clamped);
        assert_eq!(f.alpha_us, 0.0);
        assert!((f.beta_gbs - 97.677).abs() < 1e-3, "{}", f.beta_gbs);
    }

    #[test]
    fn piecewise_fit_at_the_eager_switch() {
        // Eager below 64 KiB: α 1.5 µs, β 10 GB/s; rendezvous above: α 8 µs, β 24 GB/s.
        let pts: Vec<Point> = (0..25)
            .map(|i| {
                let n = (1u64 << i) as f64;
                let t = if n <= 65536.0 { 1.5 + n / 10e3 } else { 8.0 + n / 24e3 };
                Point::new(n, t)
            })
            .collect();
        let f = fit_postal_piecewise(&pts, 65536.0).unwrap();
        assert!((f.below.alpha_us - 1.5).abs() < 1e-6 && (f.below.beta_gbs - 10.0).abs() < 1e-6);
        assert!((f.above.alpha_us - 8.0).abs() < 1e-6 && (f.above.beta_gbs - 24.0).abs() < 1e-6);
        assert!((f.time_us(1e6) - (8.0 + 1e6 / 24e3)).abs() < 1e-6);
        // A switch that leaves one side with one size is an error.
        assert!(fit_postal_piecewise(&pts, 1.0).is_err());
    }

    fn comm(c: Collective, bytes: u64, ranks: u32, nodes: Option<u32>, gpn: Option<u32>, t: f64) -> CommSample {
        CommSample {
            collective: c,
            bytes,
            ranks,
            nodes,
            gpus_per_node: gpn,
            time_us: t,
            algbw_gbs: None,
            busbw_gbs: None,
            dtype: None,
            attributes: Default::default(),
        }
    }

    #[test]
    fn link_classes_are_fitted_apart() {
        // Intra-node: α 2 µs, β 150 GB/s; inter-node: α 5 µs, β 25 GB/s (exact data); one all-reduce is ignored.
        let mut samples = Vec::new();
        for i in 0..20 {
            let n = 1u64 << i;
            samples.push(comm(Collective::SendRecv, n, 2, Some(1), None, 2.0 + n as f64 / 150e3));
            samples.push(comm(Collective::SendRecv, n, 2, None, Some(1), 5.0 + n as f64 / 25e3));
        }
        samples.push(comm(Collective::AllReduce, 1024, 8, Some(1), None, 30.0));
        samples.push(comm(Collective::SendRecv, 64, 2, None, None, 3.0));
        let fits = fit_link_classes(&samples);
        assert_eq!(fits.len(), 3);
        let intra = fits[0].fit.as_ref().unwrap();
        assert_eq!((fits[0].link_class, fits[0].samples), (LinkClass::IntraNode, 20));
        assert!((intra.alpha_us - 2.0).abs() < 1e-6 && (intra.beta_gbs - 150.0).abs() < 1e-4);
        let inter = fits[1].fit.as_ref().unwrap();
        assert_eq!(fits[1].link_class, LinkClass::InterNode);
        assert!((inter.alpha_us - 5.0).abs() < 1e-6 && (inter.beta_gbs - 25.0).abs() < 1e-6);
        // The unknown class has one size: no fit, a clear reason.
        assert_eq!(fits[2].link_class, LinkClass::Unknown);
        assert!(fits[2].fit.is_none() && fits[2].error.as_deref().unwrap().contains("two distinct"));
    }

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
