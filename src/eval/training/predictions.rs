//! The predictions of `perfcast eval training` and their intervals, one step per [`Mode`]: the shipped constants
//! with the shipped quantiles, grouped k-fold cross-validation with cross-conformal intervals, or whole sources
//! left out with each source's intervals from the other sources.

use super::Mode;
use crate::cost::Efficiency;
use crate::eval::efficiency_fit::{self, cross_validate, fit, leave_source_out, predict_with, Prepared};
use crate::eval::intervals::{cross_conformal, leave_source_out_intervals, Quantiles, SourceRow};
use crate::llm::interval::ResidualClass;

/// Every row's prediction and interval under one [`Mode`], and the constants behind them.
pub(super) struct Predicted {
    /// Predicted time per row, s (`None`: not predictable).
    pub preds: Vec<Option<f64>>,
    /// The 10 %–90 % interval per row, s.
    pub intervals: Vec<Option<(f64, f64)>>,
    /// The constants of each fold (leave-source-out: of each held-out source); empty with fixed constants.
    pub folds: Vec<Efficiency>,
    /// What each of `folds` is (`without nemo`); empty: numbered folds.
    pub fold_labels: Vec<String>,
    /// The constants used (fixed) or fitted on every row.
    pub efficiency: Efficiency,
    /// The residual quantiles the intervals come from.
    pub quantiles: Option<Quantiles>,
    /// What the intervals are (the report's `coverage_kind`).
    pub coverage_kind: &'static str,
}

/// Predicts every `prepared` row (of residual class `classes[i]`) as `mode` says ([`fixed`], [`cross_validated`],
/// [`sources_left_out`]); `progress` gets the fits' steps.
pub(super) fn predict(
    mode: &Mode,
    prepared: &[Prepared],
    classes: &[ResidualClass],
    progress: &mut dyn FnMut(&str),
) -> Predicted {
    match mode {
        Mode::Fixed(eff) => fixed(prepared, classes, eff),
        Mode::CrossValidate { folds, iterations, fit_sources, contention } => {
            cross_validated(prepared, classes, fit_sources, *folds, *iterations, *contention, progress)
        }
        Mode::LeaveSourceOut { iterations, fit_sources, contention } => {
            sources_left_out(prepared, classes, fit_sources, *iterations, *contention, progress)
        }
    }
}

/// Every row predicted with the constants `eff` (the shipped ones: in-sample for the rows they were fitted on),
/// its interval from the shipped residual quantiles of its class (`src/llm/interval.rs`).
fn fixed(prepared: &[Prepared], classes: &[ResidualClass], eff: &Efficiency) -> Predicted {
    let preds: Vec<Option<f64>> = prepared.iter().map(|p| predict_with(p, eff)).collect();
    let shipped = Quantiles::shipped();
    let intervals = preds.iter().zip(classes).map(|(p, c)| p.map(|p| shipped.interval(p, c))).collect();
    Predicted {
        preds,
        intervals,
        folds: Vec::new(),
        fold_labels: Vec::new(),
        efficiency: *eff,
        quantiles: Some(shipped),
        coverage_kind: "in-sample (shipped constants and quantiles)",
    }
}

/// Grouped k-fold cross-validation over (source, model) groups ([`cross_validate`], `iterations` Nelder–Mead steps
/// per fit from [`efficiency_fit::start`]): each row predicted with constants fitted without its fold, its interval
/// cross-conformal from the other folds' out-of-fold residuals ln(measured / predicted) ([`cross_conformal`]); then
/// the constants and the residual quantiles fitted on every row of `fit_sources`.
fn cross_validated(
    prepared: &[Prepared],
    classes: &[ResidualClass],
    fit_sources: &[String],
    folds: usize,
    iterations: usize,
    contention: bool,
    progress: &mut dyn FnMut(&str),
) -> Predicted {
    let start = efficiency_fit::start();
    let (preds, fitted) = cross_validate(prepared, fit_sources, folds, &start, iterations, contention, progress);
    let eligible = |p: &Prepared| fit_sources.iter().any(|s| s == p.source);
    let all: Vec<&Prepared> = prepared.iter().filter(|p| eligible(p)).collect();
    let (eff, l) = fit(&all, &start, iterations, contention);
    progress(&format!("all rows: loss {l:.4}, {eff:?}"));
    let fold_of = efficiency_fit::folds(prepared, fit_sources, folds);
    let conformal: Vec<_> = prepared
        .iter()
        .zip(&preds)
        .zip(classes)
        .map(|((p, pred), c)| {
            let group = format!("{}/{}", p.source, p.group);
            (*c, group, fold_of[&(p.source.to_string(), p.group.clone())], *pred, eligible(p), p.measured_s)
        })
        .collect();
    let intervals = cross_conformal(&conformal, folds);
    let residuals: Vec<(ResidualClass, &str, f64)> = conformal
        .iter()
        .filter(|(_, _, _, p, ok, _)| *ok && p.is_some_and(|p| p > 0.0))
        .map(|(c, g, _, p, _, m)| (*c, g.as_str(), (m / p.unwrap_or(1.0)).ln()))
        .collect();
    Predicted {
        preds,
        intervals,
        folds: fitted,
        fold_labels: Vec::new(),
        efficiency: eff,
        quantiles: Quantiles::fit(&residuals),
        coverage_kind: "held-out (cross-conformal)",
    }
}

/// Whole sources left out ([`leave_source_out`], `iterations` Nelder–Mead steps per fit): each fitted source
/// predicted with constants fitted on the other fitted sources, the never-fitted sources with constants fitted on
/// all of them; every row's interval from the other sources' residuals ([`leave_source_out_intervals`]), the
/// quantiles with the spread between the sources' mean residuals ([`Quantiles::fit_across_sources`]).
fn sources_left_out(
    prepared: &[Prepared],
    classes: &[ResidualClass],
    fit_sources: &[String],
    iterations: usize,
    contention: bool,
    progress: &mut dyn FnMut(&str),
) -> Predicted {
    let start = efficiency_fit::start();
    let (preds, held, eff) = leave_source_out(prepared, fit_sources, &start, iterations, contention, progress);
    // Every source's rows are predicted by constants fitted without it (the never-fitted sources by those
    // fitted on all the others), so every row's residual is one of a source left out: all of them enter
    // the intervals, each row's from the other sources only.
    let rows_by_source: Vec<SourceRow> = prepared
        .iter()
        .zip(&preds)
        .zip(classes)
        .map(|((p, pred), c)| {
            (*c, origin(p.source).to_string(), format!("{}/{}", p.source, p.group), *pred, p.measured_s)
        })
        .collect();
    let intervals = leave_source_out_intervals(&rows_by_source);
    let residuals: Vec<(ResidualClass, &str, &str, f64)> = rows_by_source
        .iter()
        .filter(|(_, _, _, p, m)| p.is_some_and(|p| p > 0.0) && *m > 0.0)
        .map(|(c, s, g, p, m)| (*c, s.as_str(), g.as_str(), (m / p.unwrap_or(1.0)).ln()))
        .collect();
    let fold_labels = held.iter().map(|(s, _)| format!("without {s}")).collect();
    let folds = held.into_iter().map(|(_, e)| e).collect();
    let quantiles = Quantiles::fit_across_sources(&residuals);
    Predicted {
        preds,
        intervals,
        folds,
        fold_labels,
        efficiency: eff,
        quantiles,
        coverage_kind: "leave-source-out (each source's intervals from the other sources)",
    }
}

/// The source a row's bias belongs to in the spread between sources: NeuSight's single-GPU and 4-GPU rows are
/// one publication's runs (same machines, same PyTorch code), so one source; every other label is its own.
fn origin(source: &str) -> &str {
    if source == "neusight-1gpu" {
        "neusight"
    } else {
        source
    }
}
