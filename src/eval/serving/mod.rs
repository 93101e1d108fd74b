//! `perfcast eval serving`: the measured serving runs of `aiconfigurator/serving_runs_blackwell.csv` (B200, B300,
//! GB200, GB300; vLLM, SGLang, TensorRT-LLM; aggregated and disaggregated; one TTFT and one TPOT per closed-loop
//! run of `silicon_concurrency` clients with fixed input and output lengths) predicted by the simulated benchmark
//! ([`crate::llm::serving::benchmark`]) through the learned models a fresh install serves.
//!
//! **What is fitted, and on what.** One constant per engine and physical effect: the front end's time per request
//! ([`crate::llm::serving::engine::HostCost::request_us`]: the HTTP request, tokenization and hand-off to the engine,
//! and the first token's way back), which every TTFT carries. It is fitted on the *training* rows of each split as
//! the offset minimizing the mean |ln((TTFT₀ + f)/measured TTFT)|, TTFT₀ being each row's simulated TTFT without it
//! (first order: the offset also delays the clients' next requests a little, which the final, re-simulated
//! prediction includes). The host time per step and per sequence are not fitted here: every engine of these runs
//! schedules asynchronously, so the host's time hides behind the GPU's step and leaves the TPOT unchanged — fitted
//! freely they did not move from their start (2026-11-26). Nothing else is fitted.
//!
//! **Held out twice** (no row predicted by constants fitted on its own model or GPU): *leave-model-out* — for each
//! model, the constants are fitted on every other model's rows and predict its rows; *leave-GPU-out* — the same by
//! GPU (`system`). The report gives TTFT and TPOT MAPE and mean signed error per engine, mode and GPU under each.
//! DATA.md's traps: the 668 exact copies are dropped ([`rows::load`]), and so is a measurement filed again under
//! other labels ([`rows::one_per_measurement`]); the measured value may be a mean or a median
//! (the simulated mean is compared), and disaggregated rows without worker counts are predicted with one prefill and
//! one decode worker and reported apart; InferenceX's speculative-decoding (MTP) runs ([`speculative::speculative`]),
//! simulated with their scripts' speculative decoding ([`speculative::inferencex_mtp`]), are reported apart too; rows
//! whose `tp_size` is a disaggregated deployment's GPU count ([`gpus_as_tp::gpus_as_tp`]) are predicted as the
//! InferenceMAX recipe entry they ran ([`dynamo_trt`]: once, under their `disagg` label; MTP entries apart), and left
//! out, counted in the skipped table, where the recipe has two entries for the row. LLM-Inference-Bench stays the second serving source
//! (`perfcast eval inference`).
//!
//! **The client** ([`Client`], `--client`): by default every run is simulated with its fixed lengths, so the clients
//! of a run stay in step. The runs in InferenceX's shapes were measured by InferenceX's client, whose lengths are
//! uniform in [⌊0.8·L⌋, L] ([`rows::INFERENCEX_MIN_LENGTH_RATIO`]); `--client inferencex` predicts them so.

#[cfg(test)]
mod allreduce_tests;
#[cfg(test)]
mod decode_tests;
pub mod dynamo_trt;
mod fit;
pub mod gpus_as_tp;
pub mod intervals;
#[cfg(test)]
mod moe_source_tests;
pub mod recipes;
mod report;
pub mod rows;
pub mod speculative;

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::Arc;

use serde::Serialize;

use super::inference::Backends;
use crate::learn::Registry;
use crate::llm::serving::memory::serving_memory;
use crate::llm::serving::{predict_with, validate, ServingConfig, ServingConstants, ServingDerated, SimLimits};
use fit::{constants, fit_fold};
use report::subsets;
pub use report::{markdown, write, Subset};
pub use rows::{load, Client, RowResult, RunRow};
/// The constants one fit gave: each engine's front-end time per request, µs.
#[derive(Debug, Clone, Serialize)]
pub struct FoldConstants {
    /// `model`, `gpu` or `all`.
    pub split: &'static str,
    /// The held-out model or GPU.
    pub held_out: String,
    pub vllm_request_us: f64,
    pub sglang_request_us: f64,
    pub trtllm_request_us: f64,
}

/// The report.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub rows: Vec<RowResult>,
    /// The shipped constants (their front-end time per request: vLLM V1 10 ms, the others 0) on every run: nothing
    /// is fitted on this source, so the whole source is left out. The headline.
    pub whole_source_out: Vec<Subset>,
    /// Per split (`leave model out`, `leave GPU out`): accuracy per subset.
    pub leave_model_out: Vec<Subset>,
    pub leave_gpu_out: Vec<Subset>,
    pub folds: Vec<FoldConstants>,
    /// Fitted on every training row (what would ship).
    pub all_rows: FoldConstants,
    pub skipped: Vec<(String, u64)>,
    pub models: String,
    /// The benchmark client the runs were predicted with (`--client`).
    pub client: Client,
}

/// The evaluation's limits: wide enough for its largest run (512 clients × 10 requests × 8,192 tokens is capped by
/// the request count in [`rows::load`]).
const LIMITS: SimLimits =
    SimLimits { max_requests: 20_000, max_concurrency: 10_000, max_tokens: 50_000_000, max_steps: 5_000_000 };

/// A row with its validated configuration.
struct Ready {
    row: RunRow,
    cfg: ServingConfig,
    /// The engine's memory fraction was raised to 0.95 for the model to fit (the run did run).
    raised: bool,
    /// [`kv_max_requests`] of `cfg`.
    kv_max_requests: u64,
}

/// Whether `cfg`'s workers hold one request's KV cache on `system` in perfcast's memory model.
fn fits(cfg: &ServingConfig, system: &crate::hw::System) -> bool {
    let one = |c: &ServingConfig| serving_memory(c, &system.gpu).fits;
    match &cfg.pools {
        None => one(cfg),
        Some(p) => one(&cfg.for_pool(&p.prefill)) && one(&cfg.for_pool(&p.decode)),
    }
}

/// Predicts `r` with `consts`: the simulated means and the steady state's values, ms (`None` if refused).
fn predict_row(backends: &Backends, r: &Ready, consts: ServingConstants) -> Option<(f64, f64, f64, f64)> {
    let b = backends.backend(&r.row.request.system, r.row.request.engine)?;
    let backend = ServingDerated::new(b, consts);
    let p = predict_with(&r.cfg, &backend, consts, &LIMITS).ok()?;
    Some((p.ttft_ms, p.tpot_ms, p.steady_state.ttft_ms, p.steady_state.tpot_ms))
}

/// Evaluates every row of `data/aiconfigurator/serving_runs_blackwell.csv` held out by model and by GPU, timing
/// operators through the learned `models` (`label` names them).
pub fn run(
    data: &Path,
    models: (&Arc<Registry>, &str),
    client: Client,
    progress: &mut dyn FnMut(&str),
) -> Result<Report, String> {
    let (rows, mut skipped) = load(&data.join("aiconfigurator/serving_runs_blackwell.csv"), client)?;
    let systems: Vec<crate::hw::System> =
        rows::systems().into_iter().map(|(_, s)| s.resolve().expect("the eval's systems resolve")).collect();
    let backends = Backends::for_systems(systems.clone(), models.0);
    let mut ready = Vec::new();
    for row in rows {
        let system = systems.iter().find(|s| s.name == row.request.system).expect("a known system");
        let cfg = match validate(&row.request, system) {
            Ok(cfg) => cfg,
            Err(e) => {
                *skipped.entry(format!("refused by perfcast: {}", e.field)).or_default() += 1;
                continue;
            }
        };
        if fits(&cfg, system) {
            let kv_max_requests = kv_max_requests(&cfg, system);
            ready.push(Ready { row, cfg, raised: false, kv_max_requests });
            continue;
        }
        // The deployment ran, so its engine was given more memory than its default (SGLang's
        // --mem-fraction-static, vLLM's --gpu-memory-utilization): try 0.95.
        let mut row = row;
        row.request.engine_options.gpu_memory_utilization = Some(0.95);
        for p in [&mut row.request.prefill, &mut row.request.decode].into_iter().flatten() {
            let o = p.engine_options.get_or_insert_with(Default::default);
            o.gpu_memory_utilization = Some(0.95);
        }
        match validate(&row.request, system) {
            Ok(cfg) if fits(&cfg, system) => {
                let kv_max_requests = kv_max_requests(&cfg, system);
                ready.push(Ready { row, cfg, raised: true, kv_max_requests })
            }
            _ => {
                *skipped.entry("does not fit perfcast's memory model even at 0.95 of the memory".into()).or_default() +=
                    1
            }
        }
    }
    progress(&format!("{} runs to predict with {}", ready.len(), models.1));
    // Each row's simulated TTFT without a front end: what the per-engine offsets are fitted on.
    let zero = FoldConstants {
        split: "none",
        held_out: String::new(),
        vllm_request_us: 0.0,
        sglang_request_us: 0.0,
        trtllm_request_us: 0.0,
    };
    // The shipped constants' front end (vLLM V1's cited 10 ms; the others 0): the whole-source-left-out figure.
    let cal = ServingConstants::CALIBRATED;
    let shipped_front = FoldConstants {
        split: "source",
        held_out: String::new(),
        vllm_request_us: cal.vllm.request_us,
        sglang_request_us: cal.sglang.request_us,
        trtllm_request_us: cal.trtllm.request_us,
    };
    let mut base: Vec<(&Ready, f64)> = Vec::new();
    let mut shipped = Vec::new();
    for r in &ready {
        match predict_row(&backends, r, constants(&zero)) {
            Some((t, p, st, sp)) => {
                base.push((r, t));
                let front = constants(&shipped_front).host(r.cfg.engine, &r.cfg.settings).request_us;
                let pred = if front == 0.0 {
                    Some((t, p, st, sp))
                } else {
                    predict_row(&backends, r, constants(&shipped_front))
                };
                if let Some(pred) = pred {
                    shipped.push(row_result(r, "source", pred));
                }
            }
            None => *skipped.entry("not predictable".to_string()).or_default() += 1,
        }
    }
    progress(&format!("{} runs simulated without a front end", base.len()));
    let mut results = Vec::new();
    let mut folds = Vec::new();
    for (split, key) in [("model", 0usize), ("gpu", 1)] {
        let of = |r: &Ready| if key == 0 { r.row.model.clone() } else { r.row.gpu.clone() };
        let groups: BTreeSet<String> = base.iter().map(|(r, _)| of(r)).collect();
        for g in groups {
            let f = fit_fold(&base, split, &g, &|r| of(r) != g);
            let consts = constants(&f);
            let held: Vec<&Ready> = base.iter().map(|(r, _)| *r).filter(|r| of(r) == g).collect();
            progress(&format!(
                "leave {split} out: {g} ({} rows; front end vLLM {:.1}, SGLang {:.1}, TRT-LLM {:.1} ms)",
                held.len(),
                f.vllm_request_us / 1e3,
                f.sglang_request_us / 1e3,
                f.trtllm_request_us / 1e3
            ));
            for r in held {
                let Some(pred) = predict_row(&backends, r, consts) else { continue };
                results.push(row_result(r, if split == "model" { "model" } else { "gpu" }, pred));
            }
            folds.push(f);
        }
    }
    let all_rows = fit_fold(&base, "all", "none", &|_| true);
    let by = |s: &str| results.iter().filter(|r| r.split == s).cloned().collect::<Vec<_>>();
    let (leave_model_out, leave_gpu_out) = (subsets(&by("model")), subsets(&by("gpu")));
    let whole_source_out = subsets(&shipped);
    // The rows CSV carries every row under all three splits (`source`: the shipped constants, the headline).
    shipped.extend(results);
    Ok(Report {
        whole_source_out,
        leave_model_out,
        leave_gpu_out,
        rows: shipped,
        folds,
        all_rows,
        skipped: skipped.into_iter().collect(),
        models: models.1.to_string(),
        client,
    })
}

/// One evaluated row from its prediction (TTFT, TPOT, steady-state TTFT, steady-state TPOT; ms), with the shipped
/// interval of the prediction.
fn row_result(r: &Ready, split: &'static str, (t, p, st, sp): (f64, f64, f64, f64)) -> RowResult {
    let iv = crate::llm::serving::interval::interval(t, p, t + p * r.row.osl.saturating_sub(1) as f64);
    RowResult {
        id: r.row.id.clone(),
        engine: r.row.engine.as_str(),
        mode: r.row.mode.clone(),
        gpu: r.row.gpu.clone(),
        model: r.row.model.clone(),
        precision: r.row.precision.clone(),
        isl: r.row.isl,
        osl: r.row.osl,
        concurrency: r.row.concurrency,
        replicas: r.row.replicas,
        workers_known: r.row.workers_known,
        speculative: r.row.speculative,
        memory_fraction_raised: r.raised,
        split,
        measured_ttft_ms: r.row.ttft_ms,
        predicted_ttft_ms: t,
        measured_tpot_ms: r.row.tpot_ms,
        predicted_tpot_ms: p,
        ttft_p10_ms: iv.ttft_ms.p10,
        ttft_p90_ms: iv.ttft_ms.p90,
        tpot_p10_ms: iv.tpot_ms.p10,
        tpot_p90_ms: iv.tpot_ms.p90,
        steady_ttft_ms: st,
        steady_tpot_ms: sp,
        kv_cache_dtype: format!("{:?}", r.cfg.kv_cache_dtype).to_ascii_lowercase(),
        kv_max_requests: r.kv_max_requests,
    }
}

/// Whole requests the KV caches of `cfg` hold on `system` (aggregated: the instance; disaggregated: every decode
/// worker).
fn kv_max_requests(cfg: &ServingConfig, system: &crate::hw::System) -> u64 {
    match &cfg.pools {
        None => serving_memory(cfg, &system.gpu).max_concurrency,
        Some(p) => serving_memory(&cfg.for_pool(&p.decode), &system.gpu).max_concurrency * p.decode.workers as u64,
    }
}
