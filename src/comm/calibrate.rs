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
//!
//! [`Collective::busbw_factor`]: crate::op::Collective::busbw_factor

mod collectives;
mod links;
mod nccl;

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

pub use collectives::{fit_collective, fit_collectives, ring_steps, CollectiveFit, CollectiveGroupFit};
pub use links::{fit_link_classes, link_class, LinkClass, LinkClassFit};
pub use nccl::{
    nccl_predict, NcclAlgorithm, NcclIntraLink, NcclModelInput, NcclPrediction, NcclProtocol, NCCL_BASE_LATENCY_US,
    NCCL_HW_LATENCY_US, NCCL_NET_OVERHEAD_US,
};

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

/// The median of `v` (the mean of the two middle values for an even count; 0 for none).
pub fn median(mut v: Vec<f64>) -> f64 {
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
#[cfg(test)]
mod tests {
    use super::*;
    use crate::op::Collective;
    use crate::samples::CommSample;

    /// Deterministic noise in [−1 %, +1 %].
    pub(super) fn noise(i: usize) -> f64 {
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

    pub(super) fn comm(
        c: Collective,
        bytes: u64,
        ranks: u32,
        nodes: Option<u32>,
        gpn: Option<u32>,
        t: f64,
    ) -> CommSample {
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
}
