//! Calibration of the achievable efficiencies ([`Efficiency`]) on end-to-end measurements, with grouped
//! cross-validation: the rows are grouped by (source, model configuration), the groups dealt into folds, and every
//! fold is predicted with constants fitted on the other folds only — so a reported error never comes from a row
//! (or a model) the constants saw.
//!
//! The fit minimizes the mean |ln(predicted/measured)| with every source weighted equally (so 1,440 vTrain rows do
//! not drown 11 NeuSight rows), together with a prior on each constant from its cited plausible range (a maximum a
//! posteriori fit, [`super::fit_prior`]), by Nelder–Mead inside the ranges.

use std::collections::BTreeMap;

use std::sync::Arc;

use crate::cost::{Derated, Efficiency, KernelChoice};
use crate::hw::System;
use crate::learn::backend::LearnedBackend;
use crate::learn::Registry;
use crate::llm::{predict, TrainingConfig};

/// The sources the constants are fitted on (llm-foundry's PyTorch FSDP runs among them: the one framework that is
/// not Megatron-style). NeuSight's rows (4-GPU `neusight`, single-GPU `neusight-1gpu`) are
/// only predicted, never fitted on: they are FP32 without tensor cores, unlike every other row, and kept out they
/// test the constants on a precision and a framework (Hugging Face modules) the fit never saw.
pub const FIT_SOURCES: [&str; 4] = ["vtrain", "nemo", "dgxc", "llmfoundry"];

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
    /// Whose measured kernels the learned models answer with (the service's [`crate::cost::TRAINING_KERNELS`]).
    pub kernels: KernelChoice,
}

/// The predicted time of `row` under `eff` (`None` when the predictor refuses it): the service's training backend
/// (learned where `row.models` covers an operator or collective, analytic answers derated by `eff`).
pub fn predict_with(row: &Prepared, eff: &Efficiency) -> Option<f64> {
    let learned = LearnedBackend::new(row.system.clone(), row.models.clone()).with_kernels(row.kernels);
    let backend = Derated::new(learned, *eff);
    let p = predict(&row.cfg, &backend).ok()?;
    Some(if row.without_update { p.iteration_time_s - p.timeline.update_s } else { p.iteration_time_s })
}

/// The constants the end-to-end fit adjusts, each inside its plausible range ([`BOUNDS`]). The others come from
/// operator-level training data and stay fixed: the GEMM fractions of the measured GPUs
/// ([`crate::cost::derate::MEASURED_GEMM`]), and `network` and `collective_us` from vTrain's A100 NCCL all-reduce
/// table (train split: t = t_α–β / 0.74 + 50 µs fits its 2–8-GPU, 1 MiB–1 GiB rows with 4.2 % MAPE). `gemm_fp8`
/// is not fitted: with the bundled models every fp8 GEMM of these runs is learned, so they do not determine it
/// (it times fp8 GEMMs only on GPUs the bundle does not cover); it stays at 0.565, the fit with analytic operators
/// and the overlaps (2026-11-23), which aiconfigurator's H100 rows (train split) bear out: the median of the top
/// decile by FLOPs reaches 0.50 of the 1,979 TFLOP/s dense fp8 peak per-tensor scaled (the activation quantization
/// inside the timed call) and 0.58 block-scaled.
///
/// The Ampere sustained clock is not among them: it is measured
/// ([`crate::cost::derate::SUSTAINED_CLOCK_AMPERE`], SuperBench's sustained A100 GEMMs), because the only Ampere
/// rows here (vTrain's, hidden 1,024–2,048, often host-bound) hardly depend on it and pushed it to its bound.
pub const FITTED: [&str; 4] = ["memory", "kernel_us", "host_us", "sustained_clock"];

/// The plausible range of each fitted constant, (name, low, high), also the ±2σ of its prior in the maximum a
/// posteriori fit ([`super::fit_prior`]): the fit searches inside it only, so a constant
/// that the rows push to a bound shows it (the fold ranges in `perfcast eval training --cross-validate` say so)
/// instead of taking an unphysical value that trades against another constant. Why these ranges:
/// - `memory` 0.5–0.9 of DRAM bandwidth: bandwidth tests reach 0.85–0.93 on A100 and H100 (STREAM-like copies);
///   the memory-bound operators here also carry the uncounted element-wise kernels beside them (bias, dropout,
///   residual adds, casts), which cannot cost more than doubling their traffic, hence 0.5.
/// - `kernel_us` 5–40 µs of GPU time per counted kernel: a bare launch and tail is 2–5 µs (the roofline's 2 µs),
///   plus up to 3–4 uncounted small kernels of 5–10 µs each around a counted one.
/// - `host_us` 20–100 µs of CPU time per counted kernel: PyTorch eager dispatch is 10–25 µs per launched kernel
///   (operator dispatch, autograd bookkeeping, the launch call), times the 2–4 kernels behind a counted one.
/// - `overlap_slowdown` κ 0–0.2 (when fitted): the share of SMs and memory bandwidth an overlapped collective takes
///   ([`crate::cost::derate::OVERLAP_SLOWDOWN`]).
/// - `sustained_clock` (every GPU but Ampere) 0.8–1.0 of the microbenchmark speed for learned compute-bound
///   operators: a power-capped training run holds its tensor-core kernels at a sustained clock below the boost
///   clock of a short microbenchmark, but not by more than a fifth (the fitted rows that depend on it are H100).
///
/// The unbounded fit with the overlaps and the bundled models (2026-11-24) went to memory 0.30 and 0–25 µs per
/// kernel: it slowed the bandwidth-bound operators to make up for H100 bf16 steps predicted 10–15 % too fast, and
/// took vTrain's small-kernel time away to compensate (README, end-to-end training).
pub const BOUNDS: [(&str, f64, f64); 5] = [
    ("memory", 0.5, 0.9),
    ("kernel_us", 5.0, 40.0),
    ("host_us", 20.0, 100.0),
    ("overlap_slowdown", 0.0, 0.2),
    ("sustained_clock", 0.8, 1.0),
];

/// The value in [lo, hi] of the search coordinate `x` (any real): lo + (hi − lo)·(1 + tanh x)/2.
fn bounded(x: f64, (lo, hi): (f64, f64)) -> f64 {
    lo + (hi - lo) * 0.5 * (1.0 + x.tanh())
}

/// The search coordinate of `v` in [lo, hi] (values at or past a bound map just inside it).
fn coordinate(v: f64, (lo, hi): (f64, f64)) -> f64 {
    let u = (2.0 * (v - lo) / (hi - lo) - 1.0).clamp(-0.999, 0.999);
    u.atanh()
}

/// A constant the fit adjusts: its [`BOUNDS`] name, how to read it from an [`Efficiency`], how to set it, and the
/// decimals [`rust_block`] prints it with (the precision of the shipped constant in `src/cost/derate.rs`).
pub type Field = (&'static str, fn(&Efficiency) -> f64, fn(&mut Efficiency, f64), usize);

/// The one map from [`BOUNDS`] names to [`Efficiency`] fields, in the order of the search vector: the [`FITTED`]
/// constants, then the contention κ (`overlap_slowdown`, searched only when it is fitted). The search vector
/// (`to_eff`, `from_eff`), the prior ([`super::fit_prior::prior_sq`]) and the prior centres
/// ([`super::fit_prior::at_centres`]) all read and write the constants through it.
pub const FIELDS: [Field; 5] = [
    ("memory", |e| e.memory, |e, v| e.memory = v, 3),
    ("kernel_us", |e| e.kernel_us, |e, v| e.kernel_us = v, 1),
    ("host_us", |e| e.host_us, |e, v| e.host_us = v, 1),
    ("sustained_clock", |e| e.sustained_clock, |e, v| e.sustained_clock = v, 3),
    ("overlap_slowdown", |e| e.overlap_slowdown, |e, v| e.overlap_slowdown = v, 3),
];

/// The [`BOUNDS`] range (lo, hi) of `name`. Panics on a name outside [`BOUNDS`]: only [`FIELDS`]' names come
/// here, and `every_field_has_its_bounds_and_fitted_comes_first` checks that each has one.
fn range(name: &str) -> (f64, f64) {
    let b = BOUNDS.iter().find(|b| b.0 == name).expect("a BOUNDS name");
    (b.1, b.2)
}

/// The Efficiency of the search vector `x` (coordinates in [`FIELDS`] order; 4 or, with the contention κ, 5), the
/// other fields from `base`.
fn to_eff(x: &[f64], base: &Efficiency) -> Efficiency {
    let mut e = *base;
    for (&v, (name, _, set, _)) in x.iter().zip(FIELDS) {
        set(&mut e, bounded(v, range(name)));
    }
    e
}

/// The search vector of `e`: the coordinates of [`FITTED`] in their [`BOUNDS`], and of the contention κ when
/// `contention` is fitted.
fn from_eff(e: &Efficiency, contention: bool) -> Vec<f64> {
    FIELDS[..FITTED.len() + contention as usize]
        .iter()
        .map(|(name, get, _, _)| coordinate(get(e), range(name)))
        .collect()
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

/// Where every fit starts: the shipped constants' fixed fields with the fitted ones at their prior centres
/// ([`super::fit_prior`]: memory 0.7, 22.5 µs per kernel on the GPU, 60 µs per kernel on the host, the sustained
/// clock at 0.9), so no fold starts from a fit that saw it. The measured Ampere clock is the shipped one.
pub fn start() -> Efficiency {
    super::fit_prior::at_centres(&Efficiency::CALIBRATED)
}

/// Fits the constants on `rows` inside their [`BOUNDS`], starting from `start`; with `contention` also the
/// contention κ of overlapped communication ([`Efficiency::overlap_slowdown`]), which otherwise stays at `start`'s.
/// The fit is the maximum a posteriori one of [`super::fit_prior`] (the loss and each constant's cited prior, G the
/// number of (source, model) groups in `rows`). Returns the constants and their [`loss`] on `rows`.
pub fn fit(rows: &[&Prepared], start: &Efficiency, iters: usize, contention: bool) -> (Efficiency, f64) {
    let mut groups: Vec<(&str, &str)> = rows.iter().map(|r| (r.source, r.group.as_str())).collect();
    groups.sort();
    groups.dedup();
    let (eff, _) = fit_objective(&mut |e| loss(rows, e), groups.len(), start, iters, contention);
    (eff, loss(rows, &eff))
}

/// Minimizes the MAP objective ([`super::fit_prior::objective`]) of `loss` (a positive source-weighted mean
/// |ln error|) with `groups` independent groups, inside the [`BOUNDS`], from `start`. Returns the constants and
/// the objective there.
///
/// Nelder–Mead runs twice, the second time from a fresh simplex around the first run's best point (a restart, the
/// usual remedy for a simplex that has collapsed early): `memory` and `kernel_us` trade against each other, and a
/// single run ended in different places depending on the number of constants searched.
pub fn fit_objective(
    loss: &mut dyn FnMut(&Efficiency) -> f64,
    groups: usize,
    start: &Efficiency,
    iters: usize,
    contention: bool,
) -> (Efficiency, f64) {
    use super::fit_prior::{objective, prior_sq};
    let mut f = |x: &[f64]| {
        let e = to_eff(x, start);
        objective(loss(&e), prior_sq(&e, contention), groups)
    };
    let (x, _) = nelder_mead(&mut f, &from_eff(start, contention), 0.3, iters);
    let (x, v) = nelder_mead(&mut f, &x, 0.3, iters);
    (to_eff(&x, start), v)
}

/// The fitted constants as the lines to paste into [`Efficiency::CALIBRATED`] (`src/cost/derate.rs`), each with
/// the range of the cross-validation folds' fits (the spread shows whether the rows pin it down): `eff` fitted on
/// every row, `folds` the folds' fits, `contention` whether κ was fitted too. The header line says how: `fitted_by`
/// (the command that ran and the rows `eff` was fitted on, e.g. ``"`perfcast eval training --leave-source-out`
/// on the 1,793 rows of vtrain, nemo"``), then `stamp` (date and commit).
pub fn rust_block(eff: &Efficiency, folds: &[Efficiency], contention: bool, fitted_by: &str, stamp: &str) -> String {
    let fold_range = |get: fn(&Efficiency) -> f64| {
        let lo = folds.iter().map(get).fold(f64::INFINITY, f64::min);
        let hi = folds.iter().map(get).fold(f64::NEG_INFINITY, f64::max);
        if folds.is_empty() {
            String::new()
        } else {
            format!(" // folds {lo:.3}–{hi:.3}")
        }
    };
    let mut s = format!("// fitted by {fitted_by}, {stamp}\n");
    for &(name, get, _, decimals) in &FIELDS[..FITTED.len() + contention as usize] {
        s.push_str(&format!("{name}: {:.*},{}\n", decimals, get(eff), fold_range(get)));
    }
    s
}

/// The fold of a (source, model) group: the groups of the fitted sources (`fit_sources`) sorted by name and dealt
/// round-robin into `k` folds, then the groups of the sources that are only predicted, continuing the deal — so a
/// source that is only predicted never changes which rows the fitted constants of a fold saw.
pub fn folds(rows: &[Prepared], fit_sources: &[String], k: usize) -> BTreeMap<(String, String), usize> {
    let mut groups: Vec<(bool, String, String)> = rows
        .iter()
        .map(|r| (!fit_sources.iter().any(|s| s == r.source), r.source.to_string(), r.group.clone()))
        .collect();
    groups.sort();
    groups.dedup();
    groups.into_iter().enumerate().map(|(i, (_, s, g))| ((s, g), i % k)).collect()
}

/// Leave-source-out evaluation: every fitted source's rows predicted with constants fitted on the *other* fitted
/// sources only, the rows of sources that are never fitted (`fit_sources` lacks them) with constants fitted on every
/// fitted source — so no row's prediction comes from constants that saw any row of its source. This is how a new
/// user's runs (another cluster, another framework, another model family) meet the constants.
///
/// Returns every row's prediction, the held-out fits as (source, constants) in `fit_sources` order (a source
/// without rows gets none), and the fit on every fitted row.
pub fn leave_source_out(
    rows: &[Prepared],
    fit_sources: &[String],
    start: &Efficiency,
    iters: usize,
    contention: bool,
    progress: &mut dyn FnMut(&str),
) -> (Vec<Option<f64>>, Vec<(String, Efficiency)>, Efficiency) {
    let fitted = |r: &&Prepared| fit_sources.iter().any(|s| s == r.source);
    let all: Vec<&Prepared> = rows.iter().filter(fitted).collect();
    let (eff_all, l) = fit(&all, start, iters, contention);
    progress(&format!("every fitted source: {} rows, loss {l:.4}, {eff_all:?}", all.len()));
    let mut preds: Vec<Option<f64>> =
        rows.iter().map(|r| if fitted(&r) { None } else { predict_with(r, &eff_all) }).collect();
    let mut held = Vec::new();
    for s in fit_sources {
        if !rows.iter().any(|r| r.source == s.as_str()) {
            continue;
        }
        let train: Vec<&Prepared> = all.iter().copied().filter(|r| r.source != s.as_str()).collect();
        let (eff, l) = fit(&train, start, iters, contention);
        progress(&format!("without {s}: trained on {} rows, loss {l:.4}, {eff:?}", train.len()));
        for (i, r) in rows.iter().enumerate() {
            if r.source == s.as_str() {
                preds[i] = predict_with(r, &eff);
            }
        }
        held.push((s.clone(), eff));
    }
    (preds, held, eff_all)
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
    let fold_of = folds(rows, fit_sources, k);
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
mod tests;
