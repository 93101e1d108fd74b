//! `perfcast eval serving`: the measured serving runs of `aiconfigurator/serving_runs_blackwell.csv` (B200, B300,
//! GB200, GB300; vLLM, SGLang, TensorRT-LLM; aggregated and disaggregated; one TTFT and one TPOT per closed-loop
//! run of `silicon_concurrency` clients with fixed input and output lengths) predicted by the simulated benchmark
//! ([`crate::llm::serving::benchmark`]) through the learned models a fresh install serves.
//!
//! **What is fitted, and on what.** One constant pair per engine and physical effect: the host time per step and
//! per sequence ([`crate::llm::serving::engine::HostCost`]: scheduling, input preparation, sampling and output
//! processing on the CPU, hidden behind the GPU's step by async scheduling until it is the longer of the two).
//! They are fitted on the TPOT of the *training* rows' steady state (the simulation's TPOT follows the mean step,
//! which the steady state gives in microseconds instead of milliseconds), aggregated rows only (a disaggregated
//! decode worker has no steady state with prefill). Nothing else is fitted here.
//!
//! **Held out twice** (no row predicted by constants fitted on its own model or GPU): *leave-model-out* — for each
//! model, the constants are fitted on every other model's rows and predict its rows; *leave-GPU-out* — the same by
//! GPU (`system`). The report gives TTFT and TPOT MAPE and mean signed error per engine, mode and GPU under each.
//! DATA.md's traps: the 668 exact copies are dropped ([`rows::load`]), the measured value may be a mean or a median
//! (the simulated mean is compared), and disaggregated rows without worker counts are predicted with one prefill and
//! one decode worker and reported apart. LLM-Inference-Bench stays the second serving source (`perfcast eval
//! inference`).

pub mod rows;

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::Arc;

use serde::Serialize;

use super::efficiency_fit::nelder_mead;
use super::inference::Backends;
use crate::cost::CostBackend;
use crate::learn::fit::{accuracy, Accuracy};
use crate::learn::Registry;
use crate::llm::serving::engine::HostCost;
use crate::llm::serving::memory::serving_memory;
use crate::llm::serving::request::Engine;
use crate::llm::serving::steady::Solver;
use crate::llm::serving::{predict_with, validate, ServingConfig, ServingConstants, ServingDerated, SimLimits};
pub use rows::{load, RowResult, RunRow};

/// Accuracy of TTFT and TPOT over one subset.
#[derive(Debug, Clone, Serialize)]
pub struct Subset {
    pub label: String,
    pub ttft: Accuracy,
    pub tpot: Accuracy,
}

/// The constants one fit gave.
#[derive(Debug, Clone, Serialize)]
pub struct FoldConstants {
    /// `model` or `gpu`.
    pub split: &'static str,
    /// The held-out model or GPU.
    pub held_out: String,
    pub vllm: HostCost,
    pub sglang: HostCost,
    pub trtllm: HostCost,
}

/// The report.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub rows: Vec<RowResult>,
    /// Per split (`leave model out`, `leave GPU out`): accuracy per subset.
    pub leave_model_out: Vec<Subset>,
    pub leave_gpu_out: Vec<Subset>,
    pub folds: Vec<FoldConstants>,
    /// Fitted on every training row (what would ship).
    pub all_rows: FoldConstants,
    pub skipped: Vec<(String, u64)>,
    pub models: String,
}

/// The evaluation's limits: wide enough for its largest run (512 clients × 10 requests × 8,192 tokens is capped by
/// the request count in [`rows::load`]).
const LIMITS: SimLimits =
    SimLimits { max_requests: 20_000, max_concurrency: 10_000, max_tokens: 50_000_000, max_steps: 5_000_000 };

/// A row with its validated configuration.
struct Ready {
    row: RunRow,
    cfg: ServingConfig,
}

fn with_host(base: &ServingConstants, engine: Engine, h: HostCost) -> ServingConstants {
    let mut c = *base;
    match engine {
        Engine::Vllm => c.vllm = h,
        Engine::Sglang => c.sglang = h,
        Engine::Trtllm => c.trtllm = h,
    }
    c
}

/// Mean |ln(steady TPOT / measured TPOT)| of the aggregated `rows` of `engine` under host cost `h`.
fn loss(backends: &Backends, rows: &[&Ready], engine: Engine, h: HostCost) -> f64 {
    let consts = with_host(&ServingConstants::CALIBRATED, engine, h);
    let (mut sum, mut n) = (0.0, 0.0);
    for r in rows.iter().filter(|r| r.row.engine == engine && r.cfg.pools.is_none()) {
        let Some(b) = backends.backend(&r.cfg_system()) else { continue };
        let backend = ServingDerated::new(b, consts);
        let memory = serving_memory(&r.cfg, &b.system().gpu);
        let mut solver = Solver::new(&r.cfg, &backend, consts, memory.max_concurrency);
        sum += match solver.concurrency(r.row.concurrency) {
            Ok(s) if s.tpot_s > 0.0 => (s.tpot_s * 1e3 / r.row.tpot_ms).ln().abs(),
            _ => 3.0,
        };
        n += 1.0;
    }
    if n > 0.0 {
        sum / n
    } else {
        0.0
    }
}

impl Ready {
    fn cfg_system(&self) -> String {
        self.row.request.system.clone()
    }
}

/// Fits `engine`'s host cost on `rows` (Nelder–Mead over the logarithms from the shipped values).
fn fit_engine(backends: &Backends, rows: &[&Ready], engine: Engine, iterations: usize) -> HostCost {
    let c = ServingConstants::CALIBRATED;
    let start = match engine {
        Engine::Vllm => c.vllm,
        Engine::Sglang => c.sglang,
        Engine::Trtllm => c.trtllm,
    };
    if !rows.iter().any(|r| r.row.engine == engine && r.cfg.pools.is_none()) {
        return start;
    }
    let to = |x: &[f64]| HostCost { step_us: x[0].exp(), seq_us: x[1].exp() };
    let mut f = |x: &[f64]| loss(backends, rows, engine, to(x));
    let (x, _) = nelder_mead(&mut f, &[start.step_us.max(1.0).ln(), start.seq_us.max(0.1).ln()], 0.7, iterations);
    to(&x)
}

fn fit_all(backends: &Backends, rows: &[&Ready], split: &'static str, held_out: &str, it: usize) -> FoldConstants {
    FoldConstants {
        split,
        held_out: held_out.to_string(),
        vllm: fit_engine(backends, rows, Engine::Vllm, it),
        sglang: fit_engine(backends, rows, Engine::Sglang, it),
        trtllm: fit_engine(backends, rows, Engine::Trtllm, it),
    }
}

fn constants(f: &FoldConstants) -> ServingConstants {
    ServingConstants { vllm: f.vllm, sglang: f.sglang, trtllm: f.trtllm, ..ServingConstants::CALIBRATED }
}

/// Predicts `r` with `consts`: the simulated means and the steady state's values, ms (`None` if refused).
fn predict_row(backends: &Backends, r: &Ready, consts: ServingConstants) -> Option<(f64, f64, f64, f64)> {
    let b = backends.backend(&r.cfg_system())?;
    let backend = ServingDerated::new(b, consts);
    let p = predict_with(&r.cfg, &backend, consts, &LIMITS).ok()?;
    Some((p.ttft_ms, p.tpot_ms, p.steady_state.ttft_ms, p.steady_state.tpot_ms))
}

fn subsets(rows: &[RowResult]) -> Vec<Subset> {
    let mut out = Vec::new();
    let mut add = |label: String, f: &dyn Fn(&RowResult) -> bool| {
        let sel: Vec<&RowResult> = rows.iter().filter(|r| f(r)).collect();
        if sel.is_empty() {
            return;
        }
        let acc = |p: &dyn Fn(&RowResult) -> (f64, f64)| {
            let (a, b): (Vec<f64>, Vec<f64>) = sel.iter().map(|r| p(r)).unzip();
            accuracy(&a, &b)
        };
        out.push(Subset {
            label,
            ttft: acc(&|r| (r.predicted_ttft_ms, r.measured_ttft_ms)),
            tpot: acc(&|r| (r.predicted_tpot_ms, r.measured_tpot_ms)),
        });
    };
    add("all rows".into(), &|_| true);
    add("worker counts known (agg, or disagg with counts)".into(), &|r| r.workers_known);
    let engines: BTreeSet<&str> = rows.iter().map(|r| r.engine).collect();
    let modes: BTreeSet<&str> = rows.iter().map(|r| r.mode.as_str()).collect();
    let gpus: BTreeSet<&str> = rows.iter().map(|r| r.gpu.as_str()).collect();
    let models: BTreeSet<&str> = rows.iter().map(|r| r.model.as_str()).collect();
    for e in &engines {
        add(e.to_string(), &|r| r.engine == *e);
    }
    for m in &modes {
        add(m.to_string(), &|r| r.mode == *m);
    }
    for g in &gpus {
        add(g.to_string(), &|r| r.gpu == *g);
    }
    for e in &engines {
        for m in &modes {
            for g in &gpus {
                add(format!("{e} {m} {g}"), &|r| r.engine == *e && r.mode == *m && r.gpu == *g);
            }
        }
    }
    for m in &models {
        add(format!("model {m}"), &|r| r.model == *m);
    }
    for (lo, hi) in [(1, 8), (9, 64), (65, 4096)] {
        add(format!("concurrency {lo}–{hi}"), &|r| (lo..=hi).contains(&r.concurrency));
    }
    out
}

/// Evaluates every row of `data/aiconfigurator/serving_runs_blackwell.csv` held out by model and by GPU, timing
/// operators through the learned `models` (`label` names them); `iterations` per Nelder–Mead fit.
pub fn run(
    data: &Path,
    models: (&Arc<Registry>, &str),
    iterations: usize,
    progress: &mut dyn FnMut(&str),
) -> Result<Report, String> {
    let (rows, mut skipped) = load(&data.join("aiconfigurator/serving_runs_blackwell.csv"))?;
    let systems: Vec<crate::hw::System> =
        rows::systems().into_iter().map(|(_, s)| s.resolve().expect("the eval's systems resolve")).collect();
    let backends = Backends::for_systems(systems.clone(), models.0);
    let mut ready = Vec::new();
    for row in rows {
        let system = systems.iter().find(|s| s.name == row.request.system).expect("a known system");
        match validate(&row.request, system) {
            Ok(cfg) => ready.push(Ready { row, cfg }),
            Err(e) => *skipped.entry(format!("refused by perfcast: {}", e.field)).or_default() += 1,
        }
    }
    progress(&format!("{} runs to predict with {}", ready.len(), models.1));
    let mut results = Vec::new();
    let mut folds = Vec::new();
    for (split, key) in [("model", 0usize), ("gpu", 1)] {
        let of = |r: &Ready| if key == 0 { r.row.model.clone() } else { r.row.gpu.clone() };
        let groups: BTreeSet<String> = ready.iter().map(of).collect();
        for g in groups {
            let train: Vec<&Ready> = ready.iter().filter(|r| of(r) != g).collect();
            let f = fit_all(&backends, &train, split, &g, iterations);
            let consts = constants(&f);
            let held: Vec<&Ready> = ready.iter().filter(|r| of(r) == g).collect();
            progress(&format!(
                "leave {split} out: {g} ({} rows; vLLM {:.0}+{:.1}, SGLang {:.0}+{:.1}, TRT-LLM {:.0}+{:.1} µs)",
                held.len(),
                f.vllm.step_us,
                f.vllm.seq_us,
                f.sglang.step_us,
                f.sglang.seq_us,
                f.trtllm.step_us,
                f.trtllm.seq_us
            ));
            for r in held {
                let Some((t, p, st, sp)) = predict_row(&backends, r, consts) else {
                    *skipped.entry(format!("not predictable ({split} split)")).or_default() += 1;
                    continue;
                };
                results.push(RowResult {
                    id: r.row.id.clone(),
                    engine: r.row.engine.as_str(),
                    mode: r.row.mode.clone(),
                    gpu: r.row.gpu.clone(),
                    model: r.row.model.clone(),
                    precision: r.row.precision.clone(),
                    isl: r.row.isl,
                    osl: r.row.osl,
                    concurrency: r.row.concurrency,
                    workers_known: r.row.workers_known,
                    split: if split == "model" { "model" } else { "gpu" },
                    measured_ttft_ms: r.row.ttft_ms,
                    predicted_ttft_ms: t,
                    measured_tpot_ms: r.row.tpot_ms,
                    predicted_tpot_ms: p,
                    steady_ttft_ms: st,
                    steady_tpot_ms: sp,
                });
            }
            folds.push(f);
        }
    }
    let all: Vec<&Ready> = ready.iter().collect();
    let all_rows = fit_all(&backends, &all, "all", "none", iterations);
    let by = |s: &str| results.iter().filter(|r| r.split == s).cloned().collect::<Vec<_>>();
    Ok(Report {
        leave_model_out: subsets(&by("model")),
        leave_gpu_out: subsets(&by("gpu")),
        rows: results,
        folds,
        all_rows,
        skipped: skipped.into_iter().collect(),
        models: models.1.to_string(),
    })
}

fn table(subsets: &[Subset]) -> String {
    let pct = super::output::pct;
    let mut s = String::from(
        "| subset | rows | TTFT MAPE | TTFT signed | TPOT MAPE | TPOT signed |\n|---|---:|---:|---:|---:|---:|\n",
    );
    for x in subsets {
        s.push_str(&format!(
            "| {} | {} | {} | {:+.1} % | {} | {:+.1} % |\n",
            x.label,
            x.ttft.rows,
            pct(x.ttft.mape),
            x.ttft.signed * 100.0,
            pct(x.tpot.mape),
            x.tpot.signed * 100.0
        ));
    }
    s
}

/// The report as markdown.
pub fn markdown(r: &Report) -> String {
    let mut s = format!("Models: {}\n\n### Leave model out\n\n", r.models);
    s.push_str(&table(&r.leave_model_out));
    s.push_str("\n### Leave GPU out\n\n");
    s.push_str(&table(&r.leave_gpu_out));
    s.push_str("\n### Host constants per fold (step µs + per-sequence µs)\n\n| split | held out | vLLM | SGLang | TensorRT-LLM |\n|---|---|---|---|---|\n");
    for f in r.folds.iter().chain([&r.all_rows]) {
        s.push_str(&format!(
            "| {} | {} | {:.0} + {:.1} | {:.0} + {:.1} | {:.0} + {:.1} |\n",
            f.split,
            f.held_out,
            f.vllm.step_us,
            f.vllm.seq_us,
            f.sglang.step_us,
            f.sglang.seq_us,
            f.trtllm.step_us,
            f.trtllm.seq_us
        ));
    }
    s.push_str("\n### Not evaluated\n\n| reason | rows |\n|---|---:|\n");
    for (why, n) in &r.skipped {
        s.push_str(&format!("| {why} | {n} |\n"));
    }
    s
}

/// Writes `serving.md`, `serving.json` and `serving_rows.csv` under `out`.
pub fn write(r: &Report, out: &Path) -> Result<(), String> {
    super::output::write_files(out, "serving", &markdown(r), r, Some(&r.rows)).map(|_| ())
}
