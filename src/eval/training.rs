//! `perfcast eval training`: end-to-end accuracy of the training-iteration predictor on the measured runs of
//! `../shared/data` (vTrain, NeuSight's 4-GPU and single-GPU runs, NeMo, DGX Cloud, llm-foundry;
//! [`super::e2e`]), per source,
//! with row counts, MAPE and signed error, and every row's prediction in a CSV.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use serde::Serialize;

use super::e2e::{load, E2eRow};
use super::efficiency_fit::{cross_validate, fit, leave_source_out, predict_with, Prepared};
use super::intervals::{coverage, cross_conformal, leave_source_out_intervals, Coverage, Quantiles, SourceRow};
use super::output::{coverage_table, summary_table};
use crate::cost::{KernelChoice, TRAINING_KERNELS};
use crate::learn::fit::accuracy;
use crate::learn::Registry;
use crate::llm::interval::ResidualClass;
use crate::llm::{validate_request, TrainingPrediction};

/// One evaluated row.
#[derive(Debug, Clone, Serialize)]
pub struct RowResult {
    pub source: &'static str,
    pub id: String,
    pub group: String,
    /// The GPU (catalog name).
    pub gpu: String,
    pub gpus: u64,
    pub tp: u32,
    pub pp: u32,
    pub dp: u32,
    pub cp: u32,
    pub virtual_stages: u32,
    pub micro_batch: u32,
    pub grad_accum: u32,
    pub precision: String,
    pub measured_s: f64,
    pub predicted_s: f64,
    /// The row's 10 %–90 % prediction interval, s: cross-conformal in cross-validation (quantiles of the other
    /// folds' residuals), the shipped quantiles otherwise.
    pub p10_s: f64,
    pub p90_s: f64,
    /// Its residual class ([`crate::llm::interval::ResidualClass`]).
    pub class: String,
    /// Model TFLOP/s per GPU implied by the measurement (generalized Narayanan formula).
    pub measured_tflops_per_gpu: f64,
}

pub use super::output::Summary;

/// The report.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub rows: Vec<RowResult>,
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
/// ([`TRAINING_KERNELS`]): `KernelChoice::Training` times training's fp8 GEMMs with TensorRT-LLM's less its measured
/// quantization kernels (`perfcast eval training --kernels training`).
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
    let mut fold_labels: Vec<String> = Vec::new();
    let (preds, folds, efficiency, intervals, quantiles, coverage_kind) = match mode {
        Mode::Fixed(eff) => {
            let preds: Vec<Option<f64>> = prepared.iter().map(|p| predict_with(p, eff)).collect();
            let shipped = Quantiles::shipped();
            let iv = preds.iter().zip(&classes).map(|(p, c)| p.map(|p| shipped.interval(p, c))).collect();
            (preds, Vec::new(), *eff, iv, Some(shipped), "in-sample (shipped constants and quantiles)")
        }
        Mode::CrossValidate { folds, iterations, fit_sources, contention } => {
            let start = super::efficiency_fit::start();
            let (preds, fitted) =
                cross_validate(&prepared, fit_sources, *folds, &start, *iterations, *contention, progress);
            let eligible = |p: &Prepared| fit_sources.iter().any(|s| s == p.source);
            let all: Vec<&Prepared> = prepared.iter().filter(|p| eligible(p)).collect();
            let (eff, l) = fit(&all, &start, *iterations, *contention);
            progress(&format!("all rows: loss {l:.4}, {eff:?}"));
            let fold_of = super::efficiency_fit::folds(&prepared, fit_sources, *folds);
            let conformal: Vec<_> = prepared
                .iter()
                .zip(&preds)
                .zip(&classes)
                .map(|((p, pred), c)| {
                    let group = format!("{}/{}", p.source, p.group);
                    (*c, group, fold_of[&(p.source.to_string(), p.group.clone())], *pred, eligible(p), p.measured_s)
                })
                .collect();
            let iv = cross_conformal(&conformal, *folds);
            let residuals: Vec<(ResidualClass, &str, f64)> = conformal
                .iter()
                .filter(|(_, _, _, p, ok, _)| *ok && p.is_some_and(|p| p > 0.0))
                .map(|(c, g, _, p, _, m)| (*c, g.as_str(), (m / p.unwrap_or(1.0)).ln()))
                .collect();
            (preds, fitted, eff, iv, Quantiles::fit(&residuals), "held-out (cross-conformal)")
        }
        Mode::LeaveSourceOut { iterations, fit_sources, contention } => {
            let start = super::efficiency_fit::start();
            let (preds, held, eff) =
                leave_source_out(&prepared, fit_sources, &start, *iterations, *contention, progress);
            // Every source's rows are predicted by constants fitted without it (the never-fitted sources by those
            // fitted on all the others), so every row's residual is one of a source left out: all of them enter
            // the intervals, each row's from the other sources only.
            let rows_by_source: Vec<SourceRow> = prepared
                .iter()
                .zip(&preds)
                .zip(&classes)
                .map(|((p, pred), c)| {
                    (*c, origin(p.source).to_string(), format!("{}/{}", p.source, p.group), *pred, p.measured_s)
                })
                .collect();
            let iv = leave_source_out_intervals(&rows_by_source);
            let residuals: Vec<(ResidualClass, &str, &str, f64)> = rows_by_source
                .iter()
                .filter(|(_, _, _, p, m)| p.is_some_and(|p| p > 0.0) && *m > 0.0)
                .map(|(c, s, g, p, m)| (*c, s.as_str(), g.as_str(), (m / p.unwrap_or(1.0)).ln()))
                .collect();
            fold_labels = held.iter().map(|(s, _)| format!("without {s}")).collect();
            let fitted = held.into_iter().map(|(_, e)| e).collect();
            let q = Quantiles::fit_across_sources(&residuals);
            (preds, fitted, eff, iv, q, "leave-source-out (each source's intervals from the other sources)")
        }
    };
    let mut results = Vec::new();
    for ((((row, p), pred), iv), class) in rows.iter().zip(preds).zip(intervals).zip(&classes) {
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
        });
    }
    let mut summary = Vec::new();
    let mut add = |label: String, f: &dyn Fn(&RowResult) -> bool| {
        let (p, m): (Vec<f64>, Vec<f64>) =
            results.iter().filter(|r| f(r)).map(|r| (r.predicted_s, r.measured_s)).unzip();
        if !m.is_empty() {
            summary.push(Summary { label, accuracy: accuracy(&p, &m) });
        }
    };
    for source in SOURCES {
        add(source.to_string(), &|r| r.source == source);
    }
    let moe_cells: std::collections::BTreeSet<(String, String)> =
        results.iter().filter(|r| r.source == "nemo-moe").map(|r| (r.group.clone(), r.gpu.clone())).collect();
    for (model, gpu) in moe_cells {
        add(format!("nemo-moe {model} {gpu}"), &|r| r.source == "nemo-moe" && r.group == model && r.gpu == gpu);
    }
    let per_gpu: std::collections::BTreeSet<(&str, String)> = results
        .iter()
        .filter(|r| matches!(r.source, "nemo-moe" | "nemo-blackwell" | "nemo-long-cp"))
        .map(|r| (r.source, r.gpu.clone()))
        .collect();
    for (source, gpu) in per_gpu {
        add(format!("{source} {gpu}"), &|r| r.source == source && r.gpu == gpu);
    }
    let long_cp: std::collections::BTreeSet<(String, u32)> =
        results.iter().filter(|r| r.source == "nemo-long-cp").map(|r| (r.gpu.clone(), r.cp)).collect();
    for (gpu, cp) in long_cp {
        add(format!("nemo-long-cp {gpu} cp {cp}"), &|r| r.source == "nemo-long-cp" && r.gpu == gpu && r.cp == cp);
    }
    for pp in [1, 2, 4] {
        add(format!("vtrain pp {pp}"), &|r| r.source == "vtrain" && r.pp == pp);
    }
    for tp in [1, 2, 4, 8] {
        add(format!("vtrain tp {tp}"), &|r| r.source == "vtrain" && r.tp == tp);
    }
    for prec in ["bf16", "fp8"] {
        add(format!("nemo + dgxc {prec}"), &|r| (r.source == "nemo" || r.source == "dgxc") && r.precision == prec);
    }
    let groups: std::collections::BTreeSet<(String, &str)> =
        results.iter().filter(|r| r.source != "vtrain").map(|r| (r.group.clone(), r.source)).collect();
    for (g, s) in groups {
        add(format!("{s} {g}"), &|r| r.source == s && r.group == g);
    }
    let cov = |label: &str, f: &dyn Fn(&RowResult) -> bool| {
        let t: Vec<(f64, f64, f64)> =
            results.iter().filter(|r| f(r)).map(|r| (r.measured_s, r.p10_s, r.p90_s)).collect();
        coverage(label, &t)
    };
    let fitted_sources = match mode {
        Mode::CrossValidate { fit_sources, .. } | Mode::LeaveSourceOut { fit_sources, .. } => fit_sources.clone(),
        Mode::Fixed(_) => super::efficiency_fit::FIT_SOURCES.iter().map(|s| s.to_string()).collect(),
    };
    let mut coverage_rows: Vec<Coverage> = Vec::new();
    coverage_rows.extend(cov("fitted sources", &|r| fitted_sources.iter().any(|s| s == r.source)));
    if matches!(mode, Mode::LeaveSourceOut { .. }) {
        coverage_rows.extend(cov("every source", &|_| true));
    }
    let per_source: Vec<Coverage> = SOURCES.iter().filter_map(|s| cov(s, &|r| r.source == *s)).collect();
    if matches!(mode, Mode::LeaveSourceOut { .. }) && !per_source.is_empty() {
        // Each source label weighing the same: vTrain's 1,440 rows would otherwise be three quarters of the figure.
        let n = per_source.len() as f64;
        let mean = |f: &dyn Fn(&Coverage) -> f64| per_source.iter().map(f).sum::<f64>() / n;
        coverage_rows.push(Coverage {
            label: format!("every source, each of the {} labels weighing the same", per_source.len()),
            rows: per_source.iter().map(|c| c.rows).sum(),
            inside: mean(&|c| c.inside),
            below: mean(&|c| c.below),
            above: mean(&|c| c.above),
        });
    }
    coverage_rows.extend(per_source);
    let class_names: std::collections::BTreeSet<String> = results.iter().map(|r| r.class.clone()).collect();
    for c in class_names {
        coverage_rows.extend(cov(&format!("class {c} (fitted sources)"), &|r| {
            r.class == c && fitted_sources.iter().any(|s| s == r.source)
        }));
    }
    let skipped = skipped.into_iter().map(|((s, w), n)| (s, w, n)).collect();
    Ok(Report {
        rows: results,
        summary,
        skipped,
        efficiency,
        fold_labels: if fold_labels.is_empty() {
            (1..=folds.len()).map(|i| format!("fold {i}")).collect()
        } else {
            fold_labels
        },
        folds,
        coverage_kind,
        coverage: coverage_rows,
        quantiles,
        models: models.1.to_string(),
    })
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

/// The report as markdown.
pub fn markdown(r: &Report) -> String {
    let mut s = format!("Learned models: {}.\n\n{}", r.models, summary_table(&r.summary));
    s.push_str(&format!(
        "\nInterval coverage, {} — measured inside p10–p90 (target 80 %), below p10 and above p90 (10 % each):\n\n",
        r.coverage_kind
    ));
    s.push_str(&coverage_table(&r.coverage));
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cost::Efficiency;
    use crate::learn::fit::Accuracy;

    fn data() -> std::path::PathBuf {
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/data")
    }

    fn by_source(r: &Report, s: &str) -> Accuracy {
        r.summary.iter().find(|x| x.label == s).unwrap().accuracy.clone()
    }

    #[test]
    fn the_roofline_is_a_lower_bound_and_the_shipped_configuration_is_not_worse_than_reported() {
        let none = (&Arc::new(Registry::default()), "none");
        let roof = run(&data(), &Mode::Fixed(Efficiency::ROOFLINE), none, &mut |_| {}).unwrap();
        for s in ["vtrain", "nemo", "dgxc"] {
            assert!(by_source(&roof, s).signed < -0.2, "{s}: {:?}", by_source(&roof, s));
        }
        // In-sample guard (these rows calibrated the constants, with the bundled models a fresh install serves; the
        // README reports the out-of-fold errors).
        let bundle = crate::bundle::Bundle::embedded().unwrap();
        let models = Arc::new(crate::bundle::registry(&bundle).unwrap());
        let shipped = run(&data(), &Mode::Fixed(Efficiency::CALIBRATED), (&models, "bundled"), &mut |_| {}).unwrap();
        assert_eq!(by_source(&shipped, "vtrain").rows, 1440);
        // Reported in-sample (2026-11-24, joint bounded fit): vTrain 8.2 %, NeMo 6.1 %, DGX Cloud 10.4 % (its bf16
        // half −14 %, README); a little headroom, so a change that makes any of them worse fails here. Measured
        // 2026-11-27 with the flash-attention backward at 0.87 of its forward's FLOP rate (`FLASH_BACKWARD_RATE`,
        // cited; the constants not refit): vTrain 7.1 %, NeMo 6.5 % (+5.0 %; its 20 rows now include the 405B
        // ones), DGX Cloud 4.9 % — the slower backward costs NeMo's in-sample rows 0.4 points while every
        // leave-source-out error it touches falls (NeMo 10.1 → 9.8 %, long-context CP 17.3 → 13.1 %).
        // Refit 2026-11-28 with the fit's prior (`eval::fit_prior`) and the CP merges and Hopper cuDNN attention
        // (branch `fitprior`): vTrain 7.1 %, NeMo 4.5 % (+2.5 %), DGX Cloud 5.7 %; with the old constants those
        // changes had put NeMo at 7.45 %.
        assert!(by_source(&shipped, "vtrain").mape < 0.085, "{:?}", by_source(&shipped, "vtrain"));
        assert!(by_source(&shipped, "nemo").mape < 0.07, "{:?}", by_source(&shipped, "nemo"));
        assert!(by_source(&shipped, "dgxc").mape < 0.107, "{:?}", by_source(&shipped, "dgxc"));
        // NeuSight is never fitted: its 11 FP32 4-GPU rows and 19 single-GPU rows are predicted with constants fitted
        // on the others. Reported 2026-11-24 (README): 4-GPU 5.1 % (+1.5 %), single-GPU 12.5 % (−3.7 %).
        let (ns, one) = (by_source(&shipped, "neusight"), by_source(&shipped, "neusight-1gpu"));
        assert_eq!((ns.rows, one.rows), (11, 19));
        assert!(ns.mape < 0.08, "{ns:?}");
        assert!(one.mape < 0.15, "{one:?}");
    }

    #[test]
    fn cross_validated_intervals_cover_held_out_rows() {
        // A short cross-validation (3 folds, 20 Nelder–Mead steps per fit): every row's interval comes from the
        // other folds' out-of-fold residuals; over the fitted sources about 80 % of the held-out measurements fall
        // inside p10–p90, about 10 % on each side.
        let fit_sources = super::super::efficiency_fit::FIT_SOURCES.iter().map(|s| s.to_string()).collect();
        let mode = Mode::CrossValidate { folds: 3, iterations: 20, fit_sources, contention: false };
        let r = run(&data(), &mode, (&Arc::new(Registry::default()), "none"), &mut |_| {}).unwrap();
        assert_eq!(r.coverage_kind, "held-out (cross-conformal)");
        let fitted = r.coverage.iter().find(|c| c.label == "fitted sources").unwrap();
        // vTrain 1,440, NeMo 20 (16 + the four Llama 3.1 405B rows the embedding and loss split admits), DGX Cloud
        // 117, llm-foundry 216.
        assert_eq!(fitted.rows, 1440 + 20 + 117 + 216);
        assert!((0.7..=0.9).contains(&fitted.inside), "{fitted:?}");
        assert!(fitted.below > 0.03 && fitted.above > 0.03, "{fitted:?}");
        // The intervals are ordered everywhere. They bracket the point estimates where the class's held-out
        // residuals fall on both sides of 0 (Ampere one-node: vTrain's 1,440 rows beside llm-foundry's 105), not
        // necessarily where they are one-sided: Hopper one-node's fitted rows are 44 llm-foundry runs predicted
        // about 20 % too fast (docs/src/accuracy/training.md) and 7 NeMo / DGX Cloud rows, so ln(measured /
        // predicted) is positive at its 10th percentile and the interval lies above the estimate.
        assert!(r.rows.iter().all(|row| row.p10_s <= row.p90_s));
        assert!(r
            .rows
            .iter()
            .filter(|row| row.class == "ampere/one-node")
            .all(|row| row.p10_s <= row.predicted_s && row.predicted_s <= row.p90_s));
        let q = r.quantiles.as_ref().unwrap();
        // Ampere one-node: vTrain's 1,440 rows and llm-foundry's 105 single-node A100 runs.
        assert!(q.classes.iter().any(|c| c.class == "ampere/one-node" && c.rows == 1440 + 105));
        assert!(q.pooled.q10 < 0.0 && q.pooled.q90 > 0.0);
    }

    #[test]
    fn leave_source_out_intervals_carry_the_spread_between_sources() {
        // A short leave-source-out run (5 Nelder–Mead steps per fit): the shipped-style quantiles' source shift is
        // the mean and spread of the sources' own mean log residuals, recomputed here from the rows.
        let fit_sources = super::super::efficiency_fit::FIT_SOURCES.iter().map(|s| s.to_string()).collect();
        let mode = Mode::LeaveSourceOut { iterations: 5, fit_sources, contention: false };
        let r = run(&data(), &mode, (&Arc::new(Registry::default()), "none"), &mut |_| {}).unwrap();
        let every = r.coverage.iter().find(|c| c.label == "every source").unwrap();
        assert_eq!(every.rows, r.rows.len());
        // The source-weighted row: the mean over the source labels of each label's fraction inside, recounted here.
        let mut labels: std::collections::BTreeMap<&str, (f64, f64)> = Default::default();
        for row in &r.rows {
            let e = labels.entry(row.source).or_default();
            e.0 += f64::from(u8::from(row.p10_s <= row.measured_s && row.measured_s <= row.p90_s));
            e.1 += 1.0;
        }
        let weighted = labels.values().map(|(inside, n)| inside / n).sum::<f64>() / labels.len() as f64;
        let label = format!("every source, each of the {} labels weighing the same", labels.len());
        let row = r.coverage.iter().find(|c| c.label == label).unwrap();
        assert!((row.inside - weighted).abs() < 1e-12, "{row:?} {weighted}");
        assert!(r.rows.iter().all(|row| row.p10_s < row.p90_s));
        // Per source (NeuSight's two tables one source), the mean over its groups of each group's mean ln(m / p).
        let mut groups: std::collections::BTreeMap<(String, String), (f64, f64)> = Default::default();
        for row in &r.rows {
            let source = if row.source == "neusight-1gpu" { "neusight" } else { row.source };
            let e = groups.entry((source.to_string(), format!("{}/{}", row.source, row.group))).or_default();
            e.0 += (row.measured_s / row.predicted_s).ln();
            e.1 += 1.0;
        }
        let mut sources: std::collections::BTreeMap<String, Vec<f64>> = Default::default();
        for ((s, _), (sum, n)) in groups {
            sources.entry(s).or_default().push(sum / n);
        }
        let means: Vec<f64> = sources.values().map(|g| g.iter().sum::<f64>() / g.len() as f64).collect();
        let k = means.len() as f64;
        let mean = means.iter().sum::<f64>() / k;
        let sd = (means.iter().map(|m| (m - mean).powi(2)).sum::<f64>() / (k - 1.0)).sqrt();
        let q = r.quantiles.as_ref().unwrap();
        // vTrain, NeuSight, NeMo, NeMo on Blackwell, NeMo MoE, NeMo's long sequences, DGX Cloud, llm-foundry.
        assert_eq!(q.shift.sources, 8);
        assert!((q.shift.mean - mean).abs() < 1e-9 && (q.shift.sd - sd).abs() < 1e-9, "{:?} {mean} {sd}", q.shift);
        assert!(q.shift.half_width() > 0.0);
    }
}
