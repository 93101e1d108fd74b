//! Calibration of the achievable efficiencies ([`Efficiency`]) on end-to-end measurements, with grouped
//! cross-validation: the rows are grouped by (source, model configuration), the groups dealt into folds, and every
//! fold is predicted with constants fitted on the other folds only — so a reported error never comes from a row
//! (or a model) the constants saw.
//!
//! The fit minimizes the mean |ln(predicted/measured)| with every source weighted equally (so 1,440 vTrain rows do
//! not drown 11 NeuSight rows), by Nelder–Mead over the logarithms of the constants (fractions capped at 1).

use std::collections::BTreeMap;

use std::sync::Arc;

use crate::cost::{Derated, Efficiency};
use crate::hw::System;
use crate::learn::backend::LearnedBackend;
use crate::learn::Registry;
use crate::llm::{predict, TrainingConfig};

/// The sources the constants are fitted on. NeuSight's distributed rows are never fitted on: their pipeline runs
/// are about 3.3× their data-parallel runs where a 1F1B pipeline of 4 micro-batches would be 1.75× (the
/// implementation is not documented), and they are FP32 without tensor cores, unlike every other row.
pub const FIT_SOURCES: [&str; 3] = ["vtrain", "nemo", "dgxc"];

/// A row ready to predict.
#[derive(Debug, Clone)]
pub struct Prepared {
    pub source: &'static str,
    pub group: String,
    pub system: System,
    pub cfg: TrainingConfig,
    pub measured_s: f64,
    pub without_update: bool,
    /// The learned models the operators and collectives are timed with where one covers them (the bundled ones: a
    /// fresh install's), the rest analytic and derated; an empty registry times everything analytically.
    pub models: Arc<Registry>,
}

/// The predicted time of `row` under `eff` (`None` when the predictor refuses it): the service's training backend
/// (learned where `row.models` covers an operator or collective, analytic answers derated by `eff`).
pub fn predict_with(row: &Prepared, eff: &Efficiency) -> Option<f64> {
    let backend = Derated::new(LearnedBackend::new(row.system.clone(), row.models.clone()), *eff);
    let p = predict(&row.cfg, &backend).ok()?;
    Some(if row.without_update { p.iteration_time_s - p.timeline.update_s } else { p.iteration_time_s })
}

/// The constants the end-to-end fit adjusts. The others come from operator-level training data and stay fixed:
/// the GEMM fractions of the measured GPUs ([`crate::cost::derate::MEASURED_GEMM`]), and `network` and
/// `collective_us` from vTrain's A100 NCCL all-reduce table (train split: t = t_α–β / 0.74 + 50 µs fits its
/// 2–8-GPU, 1 MiB–1 GiB rows with 4.2 % MAPE). `gemm_fp8` stays at the value the fit found with analytic operators
/// (0.735, 2026-11-21): with the bundled models every fp8 GEMM of these runs is learned, so they no longer
/// determine it (the five folds put it anywhere between 0.11 and 0.82).
pub const FITTED: [&str; 3] = ["memory", "kernel_us", "host_us"];

fn to_eff(x: &[f64], base: &Efficiency) -> Efficiency {
    let frac = |v: f64| v.exp().min(1.0);
    let mut e = Efficiency { memory: frac(x[0]), kernel_us: x[1].exp(), host_us: x[2].exp(), ..*base };
    if let Some(k) = x.get(3) {
        e.overlap_slowdown = frac(*k);
    }
    e
}

/// The search vector of `e`: the logarithms of [`FITTED`], and of the contention κ when `contention` is fitted.
fn from_eff(e: &Efficiency, contention: bool) -> Vec<f64> {
    let mut x = vec![e.memory.ln(), e.kernel_us.max(1e-3).ln(), e.host_us.max(1e-3).ln()];
    if contention {
        x.push(e.overlap_slowdown.max(1e-3).ln());
    }
    x
}

/// Mean over sources of the mean |ln(pred/meas)| of `rows` under `eff`.
pub fn loss(rows: &[&Prepared], eff: &Efficiency) -> f64 {
    let mut by_source: BTreeMap<&str, (f64, f64)> = BTreeMap::new();
    for r in rows {
        let e = by_source.entry(r.source).or_default();
        match predict_with(r, eff) {
            Some(p) if p > 0.0 => e.0 += (p / r.measured_s).ln().abs(),
            _ => e.0 += 10.0,
        }
        e.1 += 1.0;
    }
    by_source.values().map(|(s, n)| s / n).sum::<f64>() / by_source.len().max(1) as f64
}

/// Nelder–Mead minimization of `f` from `x0` with initial steps `step`, `iters` iterations.
pub fn nelder_mead(f: &mut dyn FnMut(&[f64]) -> f64, x0: &[f64], step: f64, iters: usize) -> (Vec<f64>, f64) {
    let n = x0.len();
    let mut simplex: Vec<(Vec<f64>, f64)> = Vec::with_capacity(n + 1);
    simplex.push((x0.to_vec(), f(x0)));
    for i in 0..n {
        let mut x = x0.to_vec();
        x[i] += step;
        let v = f(&x);
        simplex.push((x, v));
    }
    for _ in 0..iters {
        simplex.sort_by(|a, b| a.1.total_cmp(&b.1));
        let centroid: Vec<f64> =
            (0..n).map(|j| simplex[..n].iter().map(|(x, _)| x[j]).sum::<f64>() / n as f64).collect();
        let worst = simplex[n].clone();
        let point = |t: f64| -> Vec<f64> { (0..n).map(|j| centroid[j] + t * (worst.0[j] - centroid[j])).collect() };
        let xr = point(-1.0);
        let fr = f(&xr);
        if fr < simplex[0].1 {
            let xe = point(-2.0);
            let fe = f(&xe);
            simplex[n] = if fe < fr { (xe, fe) } else { (xr, fr) };
        } else if fr < simplex[n - 1].1 {
            simplex[n] = (xr, fr);
        } else {
            let xc = point(0.5);
            let fc = f(&xc);
            if fc < worst.1 {
                simplex[n] = (xc, fc);
            } else {
                let best = simplex[0].0.clone();
                for s in simplex.iter_mut().skip(1) {
                    s.0 = (0..n).map(|j| best[j] + 0.5 * (s.0[j] - best[j])).collect();
                    s.1 = f(&s.0);
                }
            }
        }
    }
    simplex.sort_by(|a, b| a.1.total_cmp(&b.1));
    simplex.swap_remove(0)
}

/// Where every fit starts: the shipped constants' fixed fields with neutral values for the fitted ones (memory at
/// 0.8, 10 µs per kernel on the GPU, 30 µs per kernel on the host), so no fold starts from a fit that saw it.
pub fn start() -> Efficiency {
    Efficiency { memory: 0.8, kernel_us: 10.0, host_us: 30.0, ..Efficiency::CALIBRATED }
}

/// Fits the constants on `rows`, starting from `start`; with `contention` also the contention κ of overlapped
/// communication ([`Efficiency::overlap_slowdown`], capped at 1), which otherwise stays at `start`'s.
pub fn fit(rows: &[&Prepared], start: &Efficiency, iters: usize, contention: bool) -> (Efficiency, f64) {
    let mut f = |x: &[f64]| loss(rows, &to_eff(x, start));
    let (x, v) = nelder_mead(&mut f, &from_eff(start, contention), 0.3, iters);
    (to_eff(&x, start), v)
}

/// The fold of a group: groups sorted by name and dealt round-robin into `k` folds.
pub fn folds(rows: &[Prepared], k: usize) -> BTreeMap<(String, String), usize> {
    let mut groups: Vec<(String, String)> = rows.iter().map(|r| (r.source.to_string(), r.group.clone())).collect();
    groups.sort();
    groups.dedup();
    groups.into_iter().enumerate().map(|(i, g)| (g, i % k)).collect()
}

/// Grouped k-fold cross-validation: every row's prediction with constants fitted without its fold, and each
/// fold's constants.
#[allow(clippy::too_many_arguments)]
pub fn cross_validate(
    rows: &[Prepared],
    fit_sources: &[String],
    k: usize,
    start: &Efficiency,
    iters: usize,
    contention: bool,
    progress: &mut dyn FnMut(&str),
) -> (Vec<Option<f64>>, Vec<Efficiency>) {
    let fold_of = folds(rows, k);
    let fold = |r: &Prepared| fold_of[&(r.source.to_string(), r.group.clone())];
    let mut preds = vec![None; rows.len()];
    let mut fitted = Vec::with_capacity(k);
    for f in 0..k {
        let train: Vec<&Prepared> =
            rows.iter().filter(|r| fold(r) != f && fit_sources.iter().any(|s| s == r.source)).collect();
        let (eff, l) = fit(&train, start, iters, contention);
        progress(&format!("fold {}/{k}: trained on {} rows, loss {l:.4}, {eff:?}", f + 1, train.len()));
        for (i, r) in rows.iter().enumerate() {
            if fold(r) == f {
                preds[i] = predict_with(r, &eff);
            }
        }
        fitted.push(eff);
    }
    (preds, fitted)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nelder_mead_finds_a_quadratic_minimum() {
        // (x − 1)² + 10·(y + 2)² has its minimum 0 at (1, −2).
        let mut f = |x: &[f64]| (x[0] - 1.0).powi(2) + 10.0 * (x[1] + 2.0).powi(2);
        let (x, v) = nelder_mead(&mut f, &[0.0, 0.0], 0.5, 300);
        assert!((x[0] - 1.0).abs() < 1e-4 && (x[1] + 2.0).abs() < 1e-4 && v < 1e-8, "{x:?} {v}");
    }

    #[test]
    fn folds_keep_every_group_whole() {
        let rows =
            super::super::training::prepare(
                &std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/data"),
                &Arc::new(Registry::default()),
            )
                .unwrap()
                .0;
        let rows: Vec<Prepared> = rows.into_iter().map(|(_, p)| p).collect();
        let f = folds(&rows, 5);
        // Every (source, model) group maps to one fold, all five folds are used.
        let used: std::collections::BTreeSet<usize> = f.values().copied().collect();
        assert_eq!(used.len(), 5);
        for r in &rows {
            assert!(f.contains_key(&(r.source.to_string(), r.group.clone())));
        }
        // The eight vTrain model configurations (hidden 1024/2048 × 12–24 layers) are eight groups.
        assert_eq!(f.keys().filter(|(s, _)| s == "vtrain").count(), 8);
    }
}
