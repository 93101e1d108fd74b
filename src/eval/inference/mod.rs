//! `perfcast eval inference`: LLM-Inference-Bench (Argonne; `../shared/data/llm_inference_bench/`) through the
//! serving predictor. Each row is one static batch — B prompts of L tokens prefilled together, then L − 1 decode
//! steps (input length = output length; the prefill samples the first token) — timed end to end in seconds.
//!
//! Rows evaluated: vLLM and TensorRT-LLM on NVIDIA A100, H100 and GH200 (the scope), for the models of
//! perfcast's catalog. Systems: A100 → `perlmutter-a100-40g` (Argonne Polaris' nodes are the same 4× A100-SXM4-40GB
//! on NVLink 3), H100 → `dgx-h100` (H100-SXM5-80GB; the bench's single-GPU decode rates exceed the PCIe card's
//! bandwidth), GH200 → `vista-gh200` (GH200 96 GB, one GPU per node). 16-bit weights and KV cache (the frameworks'
//! defaults). Operators and collectives are timed as a fresh install serves them: through the learned models
//! bundled in the binary ([`crate::bundle`]: attention_prefill / attention_decode / moe / linear per GPU from
//! aiconfigurator), what they do not cover analytically, derated by [`ServingConstants`] ([`ServingDerated`]) —
//! or, with `--analytic-only`, every operator analytic (an empty registry).
//!
//! Every row is train/calibration data (DATA.md): the five fitted constants ([`FITTED`]: the GPU cost per kernel,
//! vLLM V0's and TensorRT-LLM's host time per step and per sequence) are fitted with **grouped k-fold
//! cross-validation**, group = framework × model: each row is predicted by constants fitted without its group's
//! fold. Rows measured faster than their decode steps can read the weights
//! at the GPU's peak bandwidth are not evaluated ([`decode_floor_s`]). The bench's vLLM rows are predicted as the
//! V0 engine (`engine_options.vllm_engine` `v0`): LLM-Inference-Bench ran 2024 releases.
//!
//! The bench times whole batches, not TTFT and TPOT: the summary splits rows by the predicted share of the latency
//! in the prefill step (at most ≈ 18 % here, input = output length) into prefill-heavy (TTFT-like) and
//! decode-heavy (TPOT-like) subsets.

use std::collections::{BTreeMap, HashMap};
use std::io::Read;
use std::path::Path;
use std::sync::{Arc, Mutex};

use serde::Serialize;

use super::efficiency_fit::nelder_mead;
use crate::comm::Group;
use crate::cost::roofline::UnsupportedPrecision;
use crate::cost::{CostBackend, KernelChoice, Timed};
use crate::hw::{presets, Precision, System};
use crate::learn::backend::LearnedBackend;
use crate::learn::Registry;
use crate::llm::interval::conformal_quantiles;
use crate::llm::serving::engine::HostCost;
use crate::llm::serving::interval::{residual_class, ServingQuantiles, MIN_CLASS_ROWS};
use crate::llm::serving::memory::decode_weight_bytes;
use crate::llm::serving::request::{Engine, InferenceRequest};
use crate::llm::serving::steady::StaticBatch;
use crate::llm::serving::{predict_static_batch, validate, ServingConfig, ServingConstants, ServingDerated};
use crate::op::{Collective, OpShape};

/// One measured static batch, ready to predict.
#[derive(Debug, Clone)]
pub struct BenchRow {
    pub hardware: String,
    pub system: String,
    pub framework: Engine,
    pub model: String,
    pub tp: u32,
    /// Input = output tokens.
    pub length: u32,
    pub batch: u32,
    pub measured_s: f64,
    pub cfg: ServingConfig,
}

impl BenchRow {
    /// The cross-validation group: framework × model.
    pub fn group(&self) -> String {
        format!("{} {}", self.framework.as_str(), self.model)
    }
}

/// One evaluated row.
#[derive(Debug, Clone, Serialize)]
pub struct RowResult {
    pub framework: &'static str,
    pub hardware: String,
    pub model: String,
    pub tp: u32,
    pub length: u32,
    pub batch: u32,
    pub waves: u32,
    pub measured_s: f64,
    pub predicted_s: f64,
    /// The predicted prefill step (the whole batch's prompts), s.
    pub prefill_s: f64,
    /// The predicted decode step, s.
    pub decode_step_s: f64,
    /// Fraction of the predicted latency spent in the prefill step (the rest decodes): the bench measures only
    /// the whole batch, so this is how rows are split into prefill-heavy (TTFT-like) and decode-heavy (TPOT-like).
    pub prefill_share: f64,
    /// The row's residual class ([`crate::llm::serving::interval::residual_class`]).
    pub class: String,
    /// The 10 %–90 % interval of the predicted latency, s: cross-conformal under cross-validation (quantiles of the
    /// other folds' out-of-fold residuals), the shipped quantiles otherwise.
    pub p10_s: f64,
    pub p90_s: f64,
}

pub use super::output::Summary;

/// The report.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub rows: Vec<RowResult>,
    pub summary: Vec<Summary>,
    /// (reason, rows) not evaluated.
    pub skipped: Vec<(String, u64)>,
    /// The constants used (fixed), or fitted on every row (cross-validation).
    pub constants: ServingConstants,
    /// Cross-validation: each fold's constants.
    pub folds: Vec<ServingConstants>,
    /// The learned models the predictions used (the bundle's version and size, or none).
    pub models: String,
    /// `held-out (cross-conformal)` or `in-sample (shipped quantiles)`.
    pub coverage_kind: &'static str,
    /// How often measured latencies fall inside their p10–p90 intervals, per subset.
    pub coverage: Vec<super::intervals::Coverage>,
    /// Cross-validation: the residual quantiles per class over every out-of-fold residual (to ship in
    /// `src/llm/serving/interval.rs`).
    pub quantiles: Vec<OwnedQuantiles>,
}

mod backends;
mod fit;
mod quantiles;
mod report;
mod rows;

pub use backends::{Backends, Cached};
pub use fit::{fit, folds, loss, start, FITTED};
use quantiles::*;
pub use quantiles::{fit_quantiles, rust_block, OwnedQuantiles};
use report::*;
pub use report::{markdown, write};
pub use rows::{decode_floor_s, load};

/// How to get the constants.
#[derive(Debug, Clone)]
pub enum Mode {
    /// Predict every row with these constants.
    Fixed(ServingConstants),
    /// Grouped k-fold cross-validation, then a fit on every row.
    CrossValidate { folds: usize, iterations: usize },
}

/// Evaluates every row with fixed constants or cross-validated, timing operators through the learned `models`
/// (`label` names them in the report; an empty registry: analytic operators only).
pub fn run(
    data: &Path,
    mode: &Mode,
    models: (&Arc<Registry>, &str),
    progress: &mut dyn FnMut(&str),
) -> Result<Report, String> {
    let (rows, skipped) = load(data)?;
    progress(&format!("{} measured static batches to predict with {}", rows.len(), models.1));
    let backends = Backends::new(&rows, models.0);
    let k = match mode {
        Mode::CrossValidate { folds, .. } => (*folds).max(1),
        Mode::Fixed(_) => 1,
    };
    let fold_of = folds(&rows, k);
    let (preds, fold_consts, constants): (Vec<Option<StaticBatch>>, _, _) = match mode {
        Mode::Fixed(c) => (rows.iter().map(|r| backends.predict(r, c)).collect(), Vec::new(), *c),
        Mode::CrossValidate { iterations, .. } => {
            let mut preds = vec![None; rows.len()];
            let mut fitted = Vec::new();
            for f in 0..k {
                let train: Vec<&BenchRow> = rows.iter().filter(|r| fold_of[&r.group()] != f).collect();
                let (c, l) = fit(&backends, &train, *iterations);
                progress(&format!("fold {}/{k}: {} rows, loss {l:.4}, {}", f + 1, train.len(), describe(&c)));
                for (i, r) in rows.iter().enumerate() {
                    if fold_of[&r.group()] == f {
                        preds[i] = backends.predict(r, &c);
                    }
                }
                fitted.push(c);
            }
            let all: Vec<&BenchRow> = rows.iter().collect();
            let (c, l) = fit(&backends, &all, *iterations);
            progress(&format!("all rows: loss {l:.4}, {}", describe(&c)));
            (preds, fitted, c)
        }
    };
    let class_of = |r: &BenchRow| residual_class(r.framework, &backends.system(&r.system).gpu);
    // Intervals: cross-conformal under cross-validation (each fold's rows get the quantiles of the other folds'
    // out-of-fold residuals), the shipped quantiles otherwise.
    let residual =
        |i: usize| preds[i].as_ref().filter(|b| b.latency_s > 0.0).map(|b| (rows[i].measured_s / b.latency_s).ln());
    let (per_fold, quantiles, coverage_kind) = if matches!(mode, Mode::CrossValidate { .. }) {
        let per_fold: Vec<Vec<OwnedQuantiles>> = (0..k)
            .map(|f| {
                let r: Vec<(String, f64)> = (0..rows.len())
                    .filter(|&i| fold_of[&rows[i].group()] != f)
                    .filter_map(|i| Some((class_of(&rows[i]), residual(i)?)))
                    .collect();
                fit_quantiles(&r)
            })
            .collect();
        let all: Vec<(String, f64)> =
            (0..rows.len()).filter_map(|i| Some((class_of(&rows[i]), residual(i)?))).collect();
        (per_fold, fit_quantiles(&all), "held-out (cross-conformal)")
    } else {
        (Vec::new(), Vec::new(), "in-sample (shipped quantiles)")
    };
    let mut skipped = skipped;
    let mut results = Vec::new();
    for (r, p) in rows.iter().zip(&preds) {
        let Some(b) = p else {
            *skipped.entry("not predictable".to_string()).or_default() += 1;
            continue;
        };
        let class = class_of(r);
        let t = b.latency_s;
        let (p10_s, p90_s) = if per_fold.is_empty() {
            let q = ServingQuantiles::of(&class);
            (t * q.q10.exp(), t * q.q90.exp())
        } else {
            match quantiles_of(&per_fold[fold_of[&r.group()]], &class) {
                Some(q) => (t * q.q10.exp(), t * q.q90.exp()),
                None => (t, t),
            }
        };
        results.push(RowResult {
            framework: r.framework.as_str(),
            hardware: r.hardware.clone(),
            model: r.model.clone(),
            tp: r.tp,
            length: r.length,
            batch: r.batch,
            waves: b.waves,
            measured_s: r.measured_s,
            predicted_s: t,
            prefill_s: b.prefill.time_s,
            decode_step_s: b.decode.time_s,
            prefill_share: if t > 0.0 { b.waves as f64 * b.prefill.time_s / t } else { 0.0 },
            class,
            p10_s,
            p90_s,
        });
    }
    let summary = summarize(&results);
    let mut coverage = Vec::new();
    let mut cover = |label: &str, f: &dyn Fn(&RowResult) -> bool| {
        let t: Vec<(f64, f64, f64)> =
            results.iter().filter(|r| f(r)).map(|r| (r.measured_s, r.p10_s, r.p90_s)).collect();
        coverage.extend(super::intervals::coverage(label, &t));
    };
    cover("all rows", &|_| true);
    let classes: std::collections::BTreeSet<String> = results.iter().map(|r| r.class.clone()).collect();
    for c in &classes {
        cover(c, &|r| &r.class == c);
    }
    Ok(Report {
        rows: results,
        summary,
        skipped: skipped.into_iter().collect(),
        constants,
        folds: fold_consts,
        models: models.1.to_string(),
        coverage_kind,
        coverage,
        quantiles,
    })
}

fn describe(c: &ServingConstants) -> String {
    format!(
        "stream {:.3}, memory {:.3}, kernel_us {:.2}, vLLM V0 {:.0} µs/step + {:.1} µs/sequence, TensorRT-LLM {:.0} \
         µs/step + {:.1} µs/sequence",
        c.stream,
        c.efficiency.memory,
        c.efficiency.kernel_us,
        c.vllm_v0.step_us,
        c.vllm_v0.seq_us,
        c.trtllm.step_us,
        c.trtllm.seq_us
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data() -> std::path::PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/data")
    }

    #[test]
    fn the_shipped_constants_are_not_worse_than_reported_and_folds_keep_groups_whole() {
        let bundle = crate::bundle::Bundle::embedded().unwrap();
        let models = Arc::new(crate::bundle::registry(&bundle).unwrap());
        let r = run(&data(), &Mode::Fixed(ServingConstants::CALIBRATED), (&models, "bundled"), &mut |_| {}).unwrap();
        let all = &r.summary.iter().find(|s| s.label == "all rows").unwrap().accuracy;
        // 1,230 NVIDIA vLLM / TensorRT-LLM rows of catalog models, 28 of them below the bandwidth floor.
        assert_eq!(all.rows, 1202);
        // In-sample guard (these rows fitted the constants; the README reports the cross-validated errors). With the
        // NCCL model's all-reduce they were fitted with, 8.4 % (−0.8 %); since each engine's tensor-parallel
        // all-reduce is its measured kernel (`comm::engine_allreduce`, 2026-11-27) 11.1 % (−5.8 %): the bench's
        // 2024 engines ran tp > 1 slower than today's all-reduce tables say, which the constants kept absorbing. A
        // refit with the measured all-reduce moves that time into `kernel_us` (7.40 → 14.60 µs), which every row
        // pays, and undoes the gain on today's engines (Blackwell TPOT with the whole source left out 44.8 → 54.2 %,
        // docs/src/accuracy/serving.md), so the constants stay. Since a decode step's analytic kernels replayed
        // from a CUDA graph cost the measured `graph_kernel_us` 1.75 µs instead of the fitted 7.4 µs (2026-11-27,
        // `servacc`): 13.3 % (−9.2 %). The bench's vLLM V0 decode steps replay graphs too, and its 7.4 µs had been
        // absorbing time the step model does not count; on today's engines the same change brings Blackwell TPOT
        // with the whole source left out from 44.8 to 40.2 % (Llama-3.1-70B fp8 median ratio 1.1–1.3 → 0.93–1.06).
        // The guard is the measured value with a little headroom: a change that makes the bench worse still fails.
        assert!(all.mape < 0.135 && all.signed.abs() < 0.095, "{all:?}");
        let floor = r.skipped.iter().find(|(w, _)| w.starts_with("measured faster")).unwrap();
        assert_eq!(floor.1, 28);
        let (rows, _) = load(&data()).unwrap();
        let f = folds(&rows, 5);
        assert_eq!(f.values().copied().collect::<std::collections::BTreeSet<_>>().len(), 5);
        // 10 catalog models under vLLM, 8 under TensorRT-LLM (no LLaMA-7B or Qwen1.5-7B rows): 18 groups.
        assert_eq!(f.len(), 18);
    }
}
