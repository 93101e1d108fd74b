//! `perfcast eval training`: end-to-end accuracy of the training-iteration predictor on the measured runs of
//! `../shared/data` (vTrain, NeuSight's 4-GPU and single-GPU runs, NeMo, DGX Cloud, llm-foundry;
//! [`super::e2e`]), per source,
//! with row counts, MAPE and signed error, and every row's prediction in a CSV.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use serde::Serialize;

mod predictions;
mod summary;
#[cfg(test)]
mod tests;

use super::e2e::{load, E2eRow};
use super::efficiency_fit::Prepared;
use super::intervals::{Coverage, Quantiles};
use super::output::{coverage_table, summary_table};
use crate::cost::{KernelChoice, TRAINING_KERNELS};
use crate::learn::Registry;
use crate::llm::interval::ResidualClass;
use crate::llm::{validate_request, TrainingPrediction};

/// One evaluated row.
#[derive(Debug, Clone, Serialize)]
pub struct RowResult {
    /// The end-to-end source (DATA.md's dataset label, e.g. `vtrain`, `nemo-moe`).
    pub source: &'static str,
    /// Where the row comes from (file and line, or table title and column).
    pub id: String,
    /// Its model configuration (the group of grouped cross-validation).
    pub group: String,
    /// The GPU (catalog name).
    pub gpu: String,
    /// GPUs of the run.
    pub gpus: u64,
    /// Tensor-parallel degree.
    pub tp: u32,
    /// Pipeline-parallel degree.
    pub pp: u32,
    /// Data-parallel degree.
    pub dp: u32,
    /// Context-parallel degree.
    pub cp: u32,
    /// Virtual pipeline stages per rank (1: no interleaving).
    pub virtual_stages: u32,
    /// Micro-batch size, sequences.
    pub micro_batch: u32,
    /// Micro-batches per iteration per data-parallel rank.
    pub grad_accum: u32,
    /// Training precision as the request names it (`bf16`, `fp8`, `nvfp4`, …).
    pub precision: String,
    /// Measured iteration time, s.
    pub measured_s: f64,
    /// Predicted iteration time, s.
    pub predicted_s: f64,
    /// The row's 10 %–90 % prediction interval, s: cross-conformal in cross-validation (quantiles of the other
    /// folds' residuals), the shipped quantiles otherwise.
    pub p10_s: f64,
    /// The interval's 90th percentile, s.
    pub p90_s: f64,
    /// Its residual class ([`crate::llm::interval::ResidualClass`]).
    pub class: String,
    /// Model TFLOP/s per GPU implied by the measurement (generalized Narayanan formula).
    pub measured_tflops_per_gpu: f64,
    /// Why the row is a data trap ([`E2eRow::trap`]); empty for an ordinary row. Trap rows are scored like the
    /// others, and every summary subset holding one is repeated without them.
    pub trap: Option<&'static str>,
}

pub use super::output::Summary;

/// The report.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// Every evaluated row.
    pub rows: Vec<RowResult>,
    /// MAPE and signed error per source and subset (the markdown tables' rows).
    pub summary: Vec<Summary>,
    /// (source, reason) → rows not evaluated.
    pub skipped: Vec<(String, String, u64)>,
    /// The constants used (fixed) or fitted on every row (cross-validation).
    pub efficiency: crate::cost::Efficiency,
    /// Cross-validation: the constants of each fold (leave-source-out: of each held-out source).
    pub folds: Vec<crate::cost::Efficiency>,
    /// What each of `folds` is (`fold 3`, `without nemo`).
    pub fold_labels: Vec<String>,
    /// What the intervals and their coverage are: `held-out (cross-conformal)` or `in-sample (shipped quantiles)`.
    pub coverage_kind: &'static str,
    /// How often measured times fall in their p10–p90 intervals, per source, over the fitted sources and per
    /// residual class.
    pub coverage: Vec<Coverage>,
    /// The residual quantiles: fitted on every fitted row's out-of-fold residual (cross-validation; to ship in
    /// `src/llm/interval.rs`), or the shipped ones.
    pub quantiles: Option<Quantiles>,
    /// The learned models the predictions used (`bundled <version>: N models`, or none).
    pub models: String,
}

/// The predicted time of a row: the iteration, without the update for forward+backward-only measurements.
pub fn predicted_s(row: &E2eRow, p: &TrainingPrediction) -> f64 {
    if row.without_update {
        p.iteration_time_s - p.timeline.update_s
    } else {
        p.iteration_time_s
    }
}

/// The end-to-end sources, in report order.
pub const SOURCES: [&str; 9] =
    ["vtrain", "neusight", "neusight-1gpu", "nemo", "nemo-blackwell", "nemo-moe", "nemo-long-cp", "dgxc", "llmfoundry"];

/// How to get the efficiencies the predictions use.
#[derive(Debug, Clone)]
pub enum Mode {
    /// Predict every row with these constants (the shipped ones: in-sample for rows they were fitted on).
    Fixed(crate::cost::Efficiency),
    /// Grouped k-fold cross-validation: each row predicted with constants fitted without its (source, model)
    /// group's fold; then the constants fitted on every row.
    /// `contention` also fits the contention κ of overlapped communication.
    CrossValidate { folds: usize, iterations: usize, fit_sources: Vec<String>, contention: bool },
    /// Leave-source-out: each fitted source predicted with constants fitted on the other fitted sources, the
    /// sources never fitted with constants fitted on all of them ([`super::efficiency_fit::leave_source_out`]);
    /// intervals cross-conformal over sources (each source's from the other sources' held-out residuals); then
    /// the constants fitted on every row.
    LeaveSourceOut { iterations: usize, fit_sources: Vec<String>, contention: bool },
}

/// The rows that validate, ready to predict with `models` (and the efficiencies), and what was skipped.
#[allow(clippy::type_complexity)]
pub fn prepare(
    data: &std::path::Path,
    models: &Arc<Registry>,
) -> Result<(Vec<(E2eRow, Prepared)>, BTreeMap<(String, String), u64>), String> {
    let mut data_rows = load(data)?;
    let mut out = Vec::new();
    for row in std::mem::take(&mut data_rows.rows) {
        let system = row.system.resolve().map_err(|e| format!("{}: {e:?}", row.id))?;
        let req = &row.request;
        match validate_request(req, system.total_gpus())
            .and_then(|cfg| crate::llm::recipe::check_gpu(&cfg, &system.gpu).map(|()| cfg))
        {
            Ok(cfg) => {
                let p = Prepared {
                    source: row.source,
                    group: row.group.clone(),
                    system,
                    cfg,
                    measured_s: row.measured_s,
                    without_update: row.without_update,
                    models: models.clone(),
                    kernels: TRAINING_KERNELS,
                };
                out.push((row, p));
            }
            Err(e) => {
                *data_rows
                    .skipped
                    .entry((row.source.to_string(), format!("not representable: {}", e.field)))
                    .or_default() += 1;
            }
        }
    }
    Ok((out, data_rows.skipped))
}

/// Evaluates every row with the learned `models` (`label` names them in the report; an empty registry: analytic
/// operators only) and the efficiencies: fixed, or cross-validated.
pub fn run(
    data: &std::path::Path,
    mode: &Mode,
    models: (&Arc<Registry>, &str),
    progress: &mut dyn FnMut(&str),
) -> Result<Report, String> {
    run_with(data, mode, models, TRAINING_KERNELS, progress)
}

/// [`run`] with the learned models answering with `kernels`' measurements instead of the service's
/// ([`TRAINING_KERNELS`], `KernelChoice::Training`: training's fp8 GEMMs from TensorRT-LLM's cuBLASLt measurements):
/// `KernelChoice::Neutral` times them with vLLM's CUTLASS kernels (`perfcast eval training --kernels neutral`).
pub fn run_with(
    data: &std::path::Path,
    mode: &Mode,
    models: (&Arc<Registry>, &str),
    kernels: KernelChoice,
    progress: &mut dyn FnMut(&str),
) -> Result<Report, String> {
    let (mut rows, mut skipped) = prepare(data, models.0)?;
    for (_, p) in rows.iter_mut() {
        p.kernels = kernels;
    }
    progress(&format!("{} measured configurations to predict", rows.len()));
    let prepared: Vec<Prepared> = rows.iter().map(|(_, p)| p.clone()).collect();
    let classes: Vec<ResidualClass> = prepared.iter().map(|p| ResidualClass::of(&p.system, p.cfg.gpus())).collect();
    let predicted = predictions::predict(mode, &prepared, &classes, progress);
    let results = row_results(&rows, predicted.preds, predicted.intervals, &classes, &mut skipped);
    let summary = summary::summary(&results);
    let coverage = summary::coverage_rows(&results, mode);
    let skipped = skipped.into_iter().map(|((s, w), n)| (s, w, n)).collect();
    let folds = predicted.folds;
    Ok(Report {
        rows: results,
        summary,
        skipped,
        efficiency: predicted.efficiency,
        fold_labels: if predicted.fold_labels.is_empty() {
            (1..=folds.len()).map(|i| format!("fold {i}")).collect()
        } else {
            predicted.fold_labels
        },
        folds,
        coverage_kind: predicted.coverage_kind,
        coverage,
        quantiles: predicted.quantiles,
        models: models.1.to_string(),
    })
}

/// One [`RowResult`] per row that has a prediction and an interval (`preds`, `intervals` and `classes` in `rows`'
/// order), with the model FLOP/s per GPU its measurement implies ([`crate::llm::flops::model_flops_of`], the
/// generalized Narayanan et al. 2021 count); the others are counted in `skipped` as `not predictable`.
#[allow(clippy::type_complexity)]
fn row_results(
    rows: &[(E2eRow, Prepared)],
    preds: Vec<Option<f64>>,
    intervals: Vec<Option<(f64, f64)>>,
    classes: &[ResidualClass],
    skipped: &mut BTreeMap<(String, String), u64>,
) -> Vec<RowResult> {
    let mut results = Vec::new();
    for ((((row, p), pred), iv), class) in rows.iter().zip(preds).zip(intervals).zip(classes) {
        let (Some(pred), Some((p10_s, p90_s))) = (pred, iv) else {
            *skipped.entry((row.source.to_string(), "not predictable".to_string())).or_default() += 1;
            continue;
        };
        let cfg = &p.cfg;
        let flops = crate::llm::flops::model_flops_of(cfg);
        results.push(RowResult {
            source: row.source,
            id: row.id.clone(),
            group: row.group.clone(),
            gpu: p.system.gpu.name.clone(),
            gpus: cfg.gpus(),
            tp: cfg.tp,
            pp: cfg.pp,
            dp: cfg.dp,
            cp: cfg.cp,
            virtual_stages: cfg.virtual_stages,
            micro_batch: cfg.micro_batch,
            grad_accum: cfg.grad_accum,
            precision: cfg.precision.to_string(),
            measured_s: row.measured_s,
            predicted_s: pred,
            p10_s,
            p90_s,
            class: class.name(),
            measured_tflops_per_gpu: flops / row.measured_s / cfg.gpus() as f64 / 1e12,
            trap: row.trap,
        });
    }
    results
}

/// The report as markdown.
pub fn markdown(r: &Report) -> String {
    let mut s = format!("Learned models: {}.\n\n{}", r.models, summary_table(&r.summary));
    s.push_str(&format!(
        "\nInterval coverage, {} — measured inside p10–p90 (target 80 %), below p10 and above p90 (10 % each):\n\n",
        r.coverage_kind
    ));
    s.push_str(&coverage_table(&r.coverage));
    let traps: Vec<&RowResult> = r.rows.iter().filter(|row| row.trap.is_some()).collect();
    if !traps.is_empty() {
        s.push_str("\nTrap rows (scored above; each subset holding them is repeated without them):\n\n");
        s.push_str("| row | measured s | predicted s | why |\n|---|---:|---:|---|\n");
        for row in traps {
            s.push_str(&format!(
                "| {} | {:.2} | {:.2} | {} |\n",
                row.id,
                row.measured_s,
                row.predicted_s,
                row.trap.unwrap_or_default()
            ));
        }
    }
    s.push_str(&format!("\nEfficiencies: {:?}\n", r.efficiency));
    for (label, f) in r.fold_labels.iter().zip(&r.folds) {
        s.push_str(&format!("{label}: {f:?}\n"));
    }
    s.push_str("\nNot evaluated:\n\n| source | reason | rows |\n|---|---|---:|\n");
    for (src, why, n) in &r.skipped {
        s.push_str(&format!("| {src} | {why} | {n} |\n"));
    }
    s
}

/// Writes training.md, training.json and training_rows.csv under `out` ([`super::output::write_files`]).
pub fn write(r: &Report, out: &PathBuf) -> Result<(), String> {
    super::output::write_files(out, "training", &markdown(r), r, Some(&r.rows)).map(|_| ())
}
