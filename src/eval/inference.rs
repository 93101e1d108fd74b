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
use crate::cost::{CostBackend, Timed};
use crate::hw::{presets, Precision, System};
use crate::learn::backend::LearnedBackend;
use crate::learn::fit::{accuracy, Accuracy};
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

/// Accuracy of one subset.
#[derive(Debug, Clone, Serialize)]
pub struct Summary {
    pub label: String,
    pub accuracy: Accuracy,
}

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

/// One class's residual quantiles, owned (for the report).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct OwnedQuantiles {
    pub class: String,
    pub q10: f64,
    pub q90: f64,
    pub rows: u32,
}

/// Per-class quantiles of `(class, residual)` pairs for classes with at least [`MIN_CLASS_ROWS`] rows, and the
/// pooled ones (class `pooled`, last); empty without residuals.
pub fn fit_quantiles(residuals: &[(String, f64)]) -> Vec<OwnedQuantiles> {
    let all: Vec<f64> = residuals.iter().map(|(_, r)| *r).collect();
    let Some((q10, q90)) = conformal_quantiles(&all) else { return Vec::new() };
    let mut by: BTreeMap<&str, Vec<f64>> = BTreeMap::new();
    for (c, r) in residuals {
        by.entry(c).or_default().push(*r);
    }
    let mut out: Vec<OwnedQuantiles> = by
        .into_iter()
        .filter(|(_, r)| r.len() >= MIN_CLASS_ROWS)
        .filter_map(|(c, r)| {
            let (q10, q90) = conformal_quantiles(&r)?;
            Some(OwnedQuantiles { class: c.to_string(), q10, q90, rows: r.len() as u32 })
        })
        .collect();
    out.push(OwnedQuantiles { class: "pooled".into(), q10, q90, rows: all.len() as u32 });
    out
}

/// The Rust block to paste between the `BEGIN generated` and `END generated` lines of
/// `src/llm/serving/interval.rs`, stamped with `stamp` (date and commit); `table` from [`fit_quantiles`].
pub fn rust_block(table: &[OwnedQuantiles], stamp: &str) -> String {
    let item = |q: &OwnedQuantiles| {
        format!("ServingQuantiles {{ class: {:?}, q10: {:.4}, q90: {:.4}, rows: {} }}", q.class, q.q10, q.q90, q.rows)
    };
    let classes: Vec<&OwnedQuantiles> = table.iter().filter(|q| q.class != "pooled").collect();
    let mut s = String::from("// BEGIN generated by `perfcast eval inference --cross-validate`\n");
    s.push_str(
        "/// Per-class quantiles of the cross-validated residuals ln(measured / predicted) of LLM-Inference-Bench\n",
    );
    s.push_str(&format!("/// (`perfcast eval inference --cross-validate`, bundled models, {stamp}).\n"));
    s.push_str(&format!("pub const QUANTILES: [ServingQuantiles; {}] = [\n", classes.len()));
    for q in classes {
        s.push_str(&format!("    {},\n", item(q)));
    }
    s.push_str("];\n/// The quantiles over every held-out row, for classes without enough rows of their own.\n");
    if let Some(p) = table.iter().find(|q| q.class == "pooled") {
        s.push_str(&format!("pub const POOLED: ServingQuantiles = {};\n", item(p)));
    }
    s.push_str("// END generated\n");
    s
}

/// The quantiles of `class` in `table` (from [`fit_quantiles`]): its own, else the pooled ones.
fn quantiles_of<'a>(table: &'a [OwnedQuantiles], class: &str) -> Option<&'a OwnedQuantiles> {
    table.iter().find(|q| q.class == class).or_else(|| table.iter().find(|q| q.class == "pooled"))
}

/// How to get the constants.
#[derive(Debug, Clone)]
pub enum Mode {
    /// Predict every row with these constants.
    Fixed(ServingConstants),
    /// Grouped k-fold cross-validation, then a fit on every row.
    CrossValidate { folds: usize, iterations: usize },
}

fn system_of(hardware: &str) -> Option<&'static str> {
    match hardware {
        "Nvidia A100 GPU" => Some("perlmutter-a100-40g"),
        "Nvidia H100 GPU" => Some("dgx-h100"),
        "Nvidia GH200 GPU" => Some("vista-gh200"),
        _ => None,
    }
}

fn engine_of(framework: &str) -> Option<Engine> {
    match framework {
        "vLLM" => Some(Engine::Vllm),
        "TensorRT-LLM" => Some(Engine::Trtllm),
        _ => None,
    }
}

/// The rows that can be predicted, and how many were skipped per reason.
pub fn load(data: &Path) -> Result<(Vec<BenchRow>, BTreeMap<String, u64>), String> {
    let path = data.join("llm_inference_bench/all_results.csv.gz");
    let file = std::fs::File::open(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut text = String::new();
    flate2::read::GzDecoder::new(file).read_to_string(&mut text).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut reader = csv::Reader::from_reader(text.as_bytes());
    let systems: HashMap<String, System> = presets()
        .into_iter()
        .filter(|p| ["perlmutter-a100-40g", "dgx-h100", "vista-gh200"].contains(&p.name.as_str()))
        .map(|p| (p.name.clone(), p.resolve().expect("presets resolve")))
        .collect();
    let (mut rows, mut skipped) = (Vec::new(), BTreeMap::new());
    let mut skip = |why: String| *skipped.entry(why).or_insert(0u64) += 1;
    for rec in reader.records() {
        let rec = rec.map_err(|e| e.to_string())?;
        let field = |i: usize| rec.get(i).unwrap_or("").trim().to_string();
        let (hardware, framework, model) = (field(0), field(2), field(3));
        let (Some(engine), Some(system)) = (engine_of(&framework), system_of(&hardware)) else {
            skip(format!("{framework} on {hardware}: not in scope (vLLM / TensorRT-LLM on NVIDIA A100, H100, GH200)"));
            continue;
        };
        let nums = (field(1).parse::<u32>(), field(4).parse::<u32>(), field(5).parse::<u32>(), field(6).parse::<f64>());
        let (Ok(tp), Ok(length), Ok(batch), Ok(measured_s)) = nums else {
            skip("unreadable numbers".to_string());
            continue;
        };
        // The bench's vLLM is a 2024 release: the V0 engine.
        let options = match engine {
            Engine::Vllm => serde_json::json!({"vllm_engine": "v0"}),
            _ => serde_json::json!({}),
        };
        let req: InferenceRequest = match serde_json::from_value(serde_json::json!({
            "system": system, "model": model, "parallelism": {"tp": tp}, "engine": engine,
            "engine_options": options,
            "workload": {"input_tokens": length, "output_tokens": length, "concurrency": batch}}))
        {
            Ok(r) => r,
            Err(e) => {
                skip(format!("request: {e}"));
                continue;
            }
        };
        match validate(&req, &systems[system]) {
            Ok(cfg) if measured_s < decode_floor_s(&cfg, &systems[system], batch) => skip(
                "measured faster than its decode steps can read the weights at the GPU's peak bandwidth \
                      (tokens not all generated, or not 16-bit)"
                    .to_string(),
            ),
            Ok(cfg) => rows.push(BenchRow {
                hardware: hardware.trim_start_matches("Nvidia ").trim_end_matches(" GPU").to_string(),
                system: system.to_string(),
                framework: engine,
                model: cfg.model.name.clone(),
                tp,
                length,
                batch,
                measured_s,
                cfg,
            }),
            Err(e) if e.field == "model" => skip(format!("{model}: not in the catalog")),
            Err(e) => skip(format!("not representable: {e}")),
        }
    }
    Ok((rows, skipped))
}

/// The least time the L − 1 decode steps of a static batch can take: each reads the weights it multiplies by
/// ([`decode_weight_bytes`]) at the GPU's peak memory bandwidth. A measurement below it did not run what the row
/// says (it stopped early, or ran in another precision): such rows are not evaluated.
pub fn decode_floor_s(cfg: &ServingConfig, system: &System, batch: u32) -> f64 {
    let steps = cfg.output_tokens.saturating_sub(1) as f64;
    steps * decode_weight_bytes(cfg, batch) / system.gpu.memory_bandwidth_bps()
}

/// A backend with every answer remembered: the fit re-derates the same shapes thousands of times (a learned
/// answer is one LightGBM evaluation; the cache makes it one lookup).
struct Cached {
    inner: LearnedBackend,
    compute: Mutex<HashMap<(OpShape, Precision), Timed>>,
    collective: Mutex<HashMap<(Collective, u64, Group, u32), Timed>>,
}

impl CostBackend for Cached {
    fn system(&self) -> &System {
        self.inner.system()
    }

    fn compute(&self, op: &OpShape, dtype: Precision) -> Result<Timed, UnsupportedPrecision> {
        if let Some(t) = self.compute.lock().expect("cache lock").get(&(*op, dtype)) {
            return Ok(t.clone());
        }
        let t = self.inner.compute(op, dtype)?;
        self.compute.lock().expect("cache lock").insert((*op, dtype), t.clone());
        Ok(t)
    }

    fn collective(&self, c: Collective, bytes: f64, group: Group, active_per_node: u32) -> Timed {
        let key = (c, bytes.to_bits(), group, active_per_node);
        if let Some(t) = self.collective.lock().expect("cache lock").get(&key) {
            return t.clone();
        }
        let t = self.inner.collective(c, bytes, group, active_per_node);
        self.collective.lock().expect("cache lock").insert(key, t.clone());
        t
    }
}

/// The three systems' cached backends.
pub struct Backends(HashMap<String, Cached>);

impl Backends {
    /// A cached backend per system of `rows` over the learned `models` (an empty registry: every operator and
    /// collective analytic). No communication calibration: a fresh install has none until one is run.
    pub fn new(rows: &[BenchRow], models: &Arc<Registry>) -> Backends {
        let mut m = HashMap::new();
        for p in presets() {
            if rows.iter().any(|r| r.system == p.name) {
                let s = p.resolve().expect("presets resolve");
                m.insert(
                    p.name.clone(),
                    Cached {
                        inner: LearnedBackend::new(s, models.clone()),
                        compute: Mutex::new(HashMap::new()),
                        collective: Mutex::new(HashMap::new()),
                    },
                );
            }
        }
        Backends(m)
    }

    /// The predicted seconds and waves of `row` under `consts` (`None` when the predictor refuses it).
    pub fn predict(&self, row: &BenchRow, consts: &ServingConstants) -> Option<StaticBatch> {
        let backend = ServingDerated::new(&self.0[&row.system], *consts);
        predict_static_batch(&row.cfg, &backend, *consts, row.batch).ok()
    }
}

impl CostBackend for &Cached {
    fn system(&self) -> &System {
        (*self).system()
    }
    fn compute(&self, op: &OpShape, dtype: Precision) -> Result<Timed, UnsupportedPrecision> {
        (*self).compute(op, dtype)
    }
    fn collective(&self, c: Collective, bytes: f64, group: Group, active_per_node: u32) -> Timed {
        (*self).collective(c, bytes, group, active_per_node)
    }
}

/// The constants the fit adjusts: `kernel_us` (the GPU cost per kernel of what stays analytic), and vLLM V0's
/// and TensorRT-LLM's host costs per step and per sequence. vLLM V1's and SGLang's host costs take TensorRT-LLM's
/// fitted ones (engines whose host path is compiled or off the critical path; no rows of theirs exist here, see
/// [`crate::llm::serving::engine`]). `memory` (element-wise kernels) and `stream` (memory-bound matrix kernels)
/// stay at their shipped 0.8: with the bundled learned models every dense matrix operator of these rows is
/// learned, so `stream` is not identified — fitted freely it wandered 0.20–0.81 over the five folds (2026-11-24),
/// a value that would then time analytic GEMVs (fp8 on GPUs without models) at a fifth of the bandwidth.
pub const FITTED: [&str; 5] = ["kernel_us", "vllm_v0.step_us", "vllm_v0.seq_us", "trtllm.step_us", "trtllm.seq_us"];

fn to_consts(x: &[f64], base: &ServingConstants) -> ServingConstants {
    let efficiency = crate::cost::Efficiency { kernel_us: x[0].exp(), ..base.efficiency };
    let trtllm = HostCost { step_us: x[3].exp(), seq_us: x[4].exp() };
    ServingConstants {
        efficiency,
        vllm_v0: HostCost { step_us: x[1].exp(), seq_us: x[2].exp() },
        vllm: trtllm,
        trtllm,
        sglang: trtllm,
        ..*base
    }
}

fn from_consts(c: &ServingConstants) -> Vec<f64> {
    vec![
        c.efficiency.kernel_us.ln(),
        c.vllm_v0.step_us.ln(),
        c.vllm_v0.seq_us.max(1e-3).ln(),
        c.trtllm.step_us.ln(),
        c.trtllm.seq_us.max(1e-3).ln(),
    ]
}

/// Where every fit starts: the shipped constants' fixed fields (`stream` and `memory` 0.8), neutral values for
/// the fitted ones (5 µs per kernel, 500 µs per step, 10 µs per sequence), so no fold starts from a fit that saw
/// it.
pub fn start() -> ServingConstants {
    let c = ServingConstants::CALIBRATED;
    let host = HostCost { step_us: 500.0, seq_us: 10.0 };
    ServingConstants {
        efficiency: crate::cost::Efficiency { kernel_us: 5.0, ..c.efficiency },
        stream: 0.8,
        vllm: host,
        vllm_v0: host,
        trtllm: host,
        sglang: host,
        ..c
    }
}

/// Mean over frameworks of the mean |ln(predicted/measured)| of `rows` (each framework weighted equally).
pub fn loss(backends: &Backends, rows: &[&BenchRow], consts: &ServingConstants) -> f64 {
    let mut by: BTreeMap<&str, (f64, f64)> = BTreeMap::new();
    for r in rows {
        let e = by.entry(r.framework.as_str()).or_default();
        e.0 += match backends.predict(r, consts) {
            Some(b) if b.latency_s > 0.0 => (b.latency_s / r.measured_s).ln().abs(),
            _ => 10.0,
        };
        e.1 += 1.0;
    }
    by.values().map(|(s, n)| s / n).sum::<f64>() / by.len().max(1) as f64
}

/// Fits the constants on `rows` from [`start`].
pub fn fit(backends: &Backends, rows: &[&BenchRow], iterations: usize) -> (ServingConstants, f64) {
    let base = start();
    let mut f = |x: &[f64]| loss(backends, rows, &to_consts(x, &base));
    let (x, v) = nelder_mead(&mut f, &from_consts(&base), 0.3, iterations);
    (to_consts(&x, &base), v)
}

/// The fold of each group: groups sorted and dealt round-robin into `k` folds.
pub fn folds(rows: &[BenchRow], k: usize) -> BTreeMap<String, usize> {
    let mut groups: Vec<String> = rows.iter().map(BenchRow::group).collect();
    groups.sort();
    groups.dedup();
    groups.into_iter().enumerate().map(|(i, g)| (g, i % k.max(1))).collect()
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
    let class_of = |r: &BenchRow| residual_class(r.framework, &backends.0[&r.system].inner.system().gpu);
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

fn summarize(results: &[RowResult]) -> Vec<Summary> {
    let mut summary = Vec::new();
    let mut add = |label: String, f: &dyn Fn(&RowResult) -> bool| {
        let (p, m): (Vec<f64>, Vec<f64>) =
            results.iter().filter(|r| f(r)).map(|r| (r.predicted_s, r.measured_s)).unzip();
        if !m.is_empty() {
            summary.push(Summary { label, accuracy: accuracy(&p, &m) });
        }
    };
    add("all rows".to_string(), &|_| true);
    for fw in ["vllm", "trtllm"] {
        add(fw.to_string(), &|r| r.framework == fw);
    }
    for hw in ["A100", "H100", "GH200"] {
        add(hw.to_string(), &|r| r.hardware == hw);
        for fw in ["vllm", "trtllm"] {
            add(format!("{fw} {hw}"), &|r| r.hardware == hw && r.framework == fw);
        }
    }
    // The bench times whole batches: prefill-heavy rows stand for TTFT (the prompt's prefill), decode-heavy rows
    // for TPOT (the decode steps), by the predicted share of the latency in the prefill.
    add("prefill-heavy (prefill ≥ 8 % of the latency, the most there are; TTFT-like)".to_string(), &|r| {
        r.prefill_share >= 0.08
    });
    add("decode-heavy (prefill < 2 % of the latency; TPOT-like)".to_string(), &|r| r.prefill_share < 0.02);
    for hw in ["A100", "H100", "GH200"] {
        for fw in ["vllm", "trtllm"] {
            add(format!("{fw} {hw} prefill-heavy"), &|r| {
                r.hardware == hw && r.framework == fw && r.prefill_share >= 0.08
            });
            add(format!("{fw} {hw} decode-heavy"), &|r| {
                r.hardware == hw && r.framework == fw && r.prefill_share < 0.02
            });
        }
    }
    for b in [1, 16, 32, 64] {
        add(format!("batch {b}"), &|r| r.batch == b);
    }
    for l in [128, 256, 512, 1024, 2048] {
        add(format!("length {l}"), &|r| r.length == l);
    }
    add("needs waves (batch above the KV cache)".to_string(), &|r| r.waves > 1);
    let models: std::collections::BTreeSet<&str> = results.iter().map(|r| r.model.as_str()).collect();
    for m in models {
        add(format!("model {m}"), &|r| r.model == m);
    }
    summary
}

fn pct(v: f64) -> String {
    format!("{:.1} %", v * 100.0)
}

/// The report as markdown.
pub fn markdown(r: &Report) -> String {
    let mut s = String::from("| subset | rows | MAPE | signed error |\n|---|---:|---:|---:|\n");
    for x in &r.summary {
        s.push_str(&format!(
            "| {} | {} | {} | {:+.1} % |\n",
            x.label,
            x.accuracy.rows,
            pct(x.accuracy.mape),
            x.accuracy.signed * 100.0
        ));
    }
    s.push_str(&format!("\nModels: {}\n\nConstants: {}\n", r.models, describe(&r.constants)));
    for (i, f) in r.folds.iter().enumerate() {
        s.push_str(&format!("fold {}: {}\n", i + 1, describe(f)));
    }
    s.push_str(&format!(
        "\nIntervals ({}): how often the measured latency falls in [p10, p90] (target 80 %)\n\n| subset | rows | \
         inside | below p10 | above p90 |\n|---|---:|---:|---:|---:|\n",
        r.coverage_kind
    ));
    for c in &r.coverage {
        s.push_str(&format!(
            "| {} | {} | {} | {} | {} |\n",
            c.label,
            c.rows,
            pct(c.inside),
            pct(c.below),
            pct(c.above)
        ));
    }
    if !r.quantiles.is_empty() {
        s.push_str("\nResidual quantiles ln(measured / predicted) over every out-of-fold row:\n\n");
        for q in &r.quantiles {
            s.push_str(&format!("- {}: q10 {:+.4}, q90 {:+.4} ({} rows)\n", q.class, q.q10, q.q90, q.rows));
        }
    }
    s.push_str("\nNot evaluated:\n\n| reason | rows |\n|---|---:|\n");
    for (why, n) in &r.skipped {
        s.push_str(&format!("| {why} | {n} |\n"));
    }
    s
}

/// Writes inference.md, inference.json and inference_rows.csv under `out`.
pub fn write(r: &Report, out: &Path) -> Result<(), String> {
    std::fs::create_dir_all(out).map_err(|e| format!("{}: {e}", out.display()))?;
    std::fs::write(out.join("inference.md"), markdown(r)).map_err(|e| e.to_string())?;
    std::fs::write(out.join("inference.json"), serde_json::to_vec_pretty(r).unwrap_or_default())
        .map_err(|e| e.to_string())?;
    let mut w = csv::Writer::from_writer(Vec::new());
    for row in &r.rows {
        w.serialize(row).map_err(|e| e.to_string())?;
    }
    std::fs::write(out.join("inference_rows.csv"), w.into_inner().map_err(|e| e.to_string())?)
        .map_err(|e| e.to_string())
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
        // In-sample guard (these rows fitted the constants; the README reports the cross-validated errors).
        assert!(all.mape < 0.11 && all.signed.abs() < 0.03, "{all:?}");
        let floor = r.skipped.iter().find(|(w, _)| w.starts_with("measured faster")).unwrap();
        assert_eq!(floor.1, 28);
        let (rows, _) = load(&data()).unwrap();
        let f = folds(&rows, 5);
        assert_eq!(f.values().copied().collect::<std::collections::BTreeSet<_>>().len(), 5);
        // 10 catalog models under vLLM, 8 under TensorRT-LLM (no LLaMA-7B or Qwen1.5-7B rows): 18 groups.
        assert_eq!(f.len(), 18);
    }
}
