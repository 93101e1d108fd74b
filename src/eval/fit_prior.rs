//! The prior that makes the end-to-end fit of [`Efficiency`] identified: a maximum a posteriori (MAP) fit instead of
//! a bare loss minimization, so that a constant the rows do not pin down stays at its cited plausible value instead
//! of drifting to wherever the search leaves it.
//!
//! Why. With vTrain left out, the remaining sources (large models on H100 and Blackwell, mostly GPU-bound) hardly
//! depend on the per-kernel overheads `kernel_us` and `host_us`: vTrain's small-hidden, host-bound rows are the only
//! ones that identify them. The bare fit of that fold slid to `kernel_us` = 5 µs (its bound) on main and moved
//! `host_us` 78 → 93 µs when another source's kernel count changed (the reverted `longcp` merge, 2026-11-28), and
//! vTrain's held-out prediction moved with it (9.7 → 18.0 %). A prediction for an unseen source that depends on
//! where an unidentified constant drifts is not a model.
//!
//! The objective. Each constant θ has a Gaussian prior whose ±2σ (95 %) is its cited plausible range
//! ([`super::efficiency_fit::BOUNDS`]): θ0 = (lo + hi)/2, σ = (hi − lo)/4. The rows' log errors are taken as Laplace
//! with scale b (the loss is their source-weighted mean |ln(pred/meas)|); rows of one (source, model) group share
//! their error — the same unit the cross-validation keeps whole — so the data carry G independent observations, G the
//! number of groups fitted on. The negative log posterior, with b at its maximum-likelihood value b̂ = loss, is
//! G·ln(loss) + ½·Σ z² up to constants (z = (θ − θ0)/σ); divided by G:
//!
//! ```text
//! objective = ln(loss) + Σ_j ((θ_j − θ0_j)/σ_j)² / (2·G)
//! ```
//!
//! No free weight: a constant moves 1σ from its prior only where that lowers the loss by a factor e^(1/(2G)) (about
//! 1.4 % at G = 37, the groups left when vTrain's eight are out), and a flat direction of the loss ends at θ0.

use crate::cost::Efficiency;

use super::efficiency_fit::{BOUNDS, FIELDS, FITTED};

/// The prior of a [`BOUNDS`] entry (name, low, high): (θ0, σ) = ((lo + hi)/2, (hi − lo)/4), so the cited range is
/// the prior's ±2σ.
pub fn prior(bound: (&str, f64, f64)) -> (f64, f64) {
    let (_, lo, hi) = bound;
    ((lo + hi) / 2.0, (hi - lo) / 4.0)
}

/// The prior centre of `name` (a [`BOUNDS`] name). Panics on an unknown name: callers pass only the crate's own
/// names ([`FIELDS`]', each of which `every_field_has_its_bounds_and_fitted_comes_first` checks has its bounds), so
/// an unknown one is a programming error, not an input to handle.
pub fn centre(name: &str) -> f64 {
    prior(*BOUNDS.iter().find(|b| b.0 == name).expect("a BOUNDS name")).0
}

/// Σ z² over the constants the fit adjusts in `e`: `memory`, `kernel_us`, `host_us`, `sustained_clock`, and
/// `overlap_slowdown` when `contention` (the others are fixed and carry no prior), summed in [`BOUNDS`] order.
/// Dimensionless.
pub fn prior_sq(e: &Efficiency, contention: bool) -> f64 {
    let fitted = &FIELDS[..FITTED.len() + contention as usize];
    BOUNDS
        .iter()
        .filter_map(|b| {
            let (c, s) = prior(*b);
            fitted.iter().find(|f| f.0 == b.0).map(|(_, get, _, _)| ((get(e) - c) / s).powi(2))
        })
        .sum()
}

/// The MAP objective of a fit: ln(`loss`) + `prior_sq` / (2·`groups`), `loss` the source-weighted mean
/// |ln(pred/meas)| (> 0), `prior_sq` from [`prior_sq`], `groups` the number of (source, model) groups fitted on
/// (at least 1). Lower is better.
pub fn objective(loss: f64, prior_sq: f64, groups: usize) -> f64 {
    loss.max(1e-12).ln() + prior_sq / (2.0 * groups.max(1) as f64)
}

/// The Efficiency at every prior centre, the other fields from `base`: where a fit starts, so no fit starts from
/// constants that saw any row.
pub fn at_centres(base: &Efficiency) -> Efficiency {
    let mut e = *base;
    for (name, _, set, _) in &FIELDS[..FITTED.len()] {
        set(&mut e, centre(name));
    }
    e
}

#[cfg(test)]
mod tests {
    use super::super::efficiency_fit::fit_objective;
    use super::*;

    #[test]
    fn the_priors_are_the_cited_ranges_as_two_sigma() {
        // memory 0.5–0.9 → 0.7 ± 0.1; kernel_us 5–40 → 22.5 ± 8.75; host_us 20–100 → 60 ± 20;
        // κ 0–0.2 → 0.1 ± 0.05; sustained clock 0.8–1.0 → 0.9 ± 0.05.
        let want = [(0.7, 0.1), (22.5, 8.75), (60.0, 20.0), (0.1, 0.05), (0.9, 0.05)];
        for (b, (c, s)) in BOUNDS.iter().zip(want) {
            let (pc, ps) = prior(*b);
            assert!((pc - c).abs() < 1e-12 && (ps - s).abs() < 1e-12, "{b:?}");
        }
        // At memory 0.8 (1σ), host_us 100 (2σ), the rest at their centres: Σ z² = 1 + 4 = 5.
        let e = Efficiency { memory: 0.8, host_us: 100.0, ..at_centres(&Efficiency::CALIBRATED) };
        assert!((prior_sq(&e, false) - 5.0).abs() < 1e-9);
        // κ counts only when it is fitted: κ 0 is 2σ below 0.1.
        let k = Efficiency { overlap_slowdown: 0.0, ..at_centres(&Efficiency::CALIBRATED) };
        assert!(prior_sq(&k, false).abs() < 1e-12);
        assert!((prior_sq(&k, true) - 4.0).abs() < 1e-9);
    }

    #[test]
    fn a_constant_the_loss_ignores_ends_at_its_prior() {
        // The loss depends on memory only (minimum at 0.6); kernel_us, host_us and the clock end at their centres
        // 22.5 µs, 60 µs and 0.9, however far from them the fit starts.
        let start = Efficiency { kernel_us: 8.0, host_us: 90.0, sustained_clock: 0.82, ..Efficiency::CALIBRATED };
        let mut loss = |e: &Efficiency| 0.05 * (1.0 + (e.memory - 0.6).powi(2));
        let (e, _) = fit_objective(&mut loss, 20, &start, 400, false);
        assert!((e.kernel_us - 22.5).abs() < 0.05, "{e:?}");
        assert!((e.host_us - 60.0).abs() < 0.1, "{e:?}");
        assert!((e.sustained_clock - 0.9).abs() < 1e-3, "{e:?}");
    }

    #[test]
    fn a_quadratic_loss_and_the_prior_meet_at_the_closed_form_minimum() {
        // ln(loss) = w·(h − 80)² in host_us h (the data alone want 80 µs), w = 0.001 /µs²; the prior is 60 ± 20 µs
        // with G = 10 groups, so its weight per µs² is 1/(2G·σ²) = 1/(20·400) = 0.000125. The minimum of
        // w(h − 80)² + 0.000125·(h − 60)² is h* = (80·w + 60·0.000125)/(w + 0.000125)
        //   = (0.08 + 0.0075)/0.001125 = 77.78 µs.
        // The other constants sit at their centres in the loss's minimum and in the prior's, so they stay there.
        let mut loss = |e: &Efficiency| {
            let others = (e.memory - 0.7).powi(2) + (e.kernel_us - 22.5).powi(2) + (e.sustained_clock - 0.9).powi(2);
            (0.001 * (e.host_us - 80.0).powi(2) + others).exp()
        };
        let (e, _) = fit_objective(&mut loss, 10, &at_centres(&Efficiency::CALIBRATED), 400, false);
        assert!((e.host_us - 77.78).abs() < 0.05, "{e:?}");
    }
}
