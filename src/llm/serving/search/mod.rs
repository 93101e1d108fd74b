//! The serving configuration search (`POST /v1/predictions/inference/search`): given a model, a system, a GPU
//! budget, a workload and a latency target (TTFT, TPOT and/or end-to-end latency on a percentile, p90 by default),
//! the configurations — tensor, pipeline, expert and attention-data parallel degrees, precision and concurrency per
//! instance — that meet it in the simulated benchmark, ranked by goodput per GPU (generated tokens per second per
//! GPU of the requests that met the target; replicas of an instance fill the budget, per GPU they do not change the
//! rate), and the Pareto front of tokens/s per GPU against tokens/s per user ([`super::pareto`]).
//!
//! **Bound, then simulate.** For each (tp, pp, ep, attention DP, precision) that validates, every concurrency
//! level up to what the engine and the KV cache admit is solved in the steady state on one [`Solver`] (operator
//! times and steps shared; microseconds each): these points make the Pareto front. A level whose steady-state
//! TTFT, TPOT or latency already misses the target is ruled out — the simulated percentiles are at least the
//! steady state's means (a closed loop of clients that start together queues more, not less) — and the others are
//! candidates, bounded above by their steady-state tokens/s per GPU. Candidates are simulated best bound first
//! (branch and bound): the search stops once `top_k` configurations meet the target and no remaining bound can beat
//! the k-th best goodput, or after [`MAX_SIMULATIONS`] simulations (a warning says so). A configuration's first
//! candidate that meets the target is its hit.
//!
//! **One operator table.** Operator times depend on the operator's work, not on the configuration, so every
//! configuration's solver and every simulated candidate's prediction share one [`OpTimes`] table: each distinct
//! operator is timed through the backend once per search. The answers are those of a fresh solver per candidate,
//! to the bit (`sharing_operator_times_among_candidates_changes_no_answer`).

mod types;

pub use types::{
    search_requests, InferenceSearchRequest, InferenceSearchResult, SearchConstraints, SearchHit, SearchWorkload,
    CONCURRENCY, MAX_SIMULATIONS,
};

use std::time::Instant;

use super::engine::ServingConstants;
use super::memory::serving_memory;
use super::model::ServingModel;
use super::pareto::{front, ParetoPoint};
pub use super::request::Slo;
use super::request::{InferenceRequest, ModelRef, ServingParallelism, ServingPrecision, Workload};
use super::sim::SimLimits;
use super::steady::{OpTimes, Solver};
use super::validate::{resolve_model, validate};
use crate::cost::CostBackend;
use crate::hw::Precision;
use crate::llm::config::{bad, ConfigError};

fn powers_of_two(max: u32) -> Vec<u32> {
    (0..31).map(|i| 1u32 << i).take_while(|v| *v <= max.max(1)).collect()
}

/// The latency target's limits, ms (`f64::INFINITY` where the SLO leaves one open), and its percentile.
#[derive(Clone, Copy)]
struct Target {
    ttft_max: f64,
    tpot_max: f64,
    e2e_max: f64,
    percentile: f64,
}

impl Target {
    /// Whether a TTFT, TPOT and end-to-end latency (ms) all meet the target.
    fn met(&self, ttft: f64, tpot: f64, e2e: f64) -> bool {
        ttft <= self.ttft_max && tpot <= self.tpot_max && e2e <= self.e2e_max
    }
}

/// Checks the request's own fields against `system` (the GPU budget, the SLO and its percentile — p90 unless
/// given, one of 50/90/99 —, `top_k`, `workload.num_requests`) and returns the latency target. Errors name the field.
fn check_request(req: &InferenceSearchRequest, system: &crate::hw::System) -> Result<Target, ConfigError> {
    if req.gpus == 0 || req.gpus as u64 > system.total_gpus() {
        return Err(bad("gpus", format!("must be 1–{} (the system's GPUs), got {}", system.total_gpus(), req.gpus)));
    }
    let bounded = |v: Option<f64>| v.is_some_and(|x| !(x > 0.0 && x.is_finite()));
    let slo = req.slo;
    if (slo.ttft_ms.is_none() && slo.tpot_ms.is_none() && slo.e2e_latency_ms.is_none())
        || bounded(slo.ttft_ms)
        || bounded(slo.tpot_ms)
        || bounded(slo.e2e_latency_ms)
    {
        return Err(bad("slo", "give ttft_ms, tpot_ms and/or e2e_latency_ms, positive"));
    }
    let percentile = slo.percentile.unwrap_or(90.0);
    if ![50.0, 90.0, 99.0].contains(&percentile) {
        return Err(bad("slo.percentile", format!("must be 50, 90 or 99, got {percentile}")));
    }
    if req.top_k == 0 || req.top_k > 100 {
        return Err(bad("top_k", format!("must be 1–100, got {}", req.top_k)));
    }
    if req.workload.num_requests == Some(0) {
        return Err(bad("workload.num_requests", "must be at least 1"));
    }
    Ok(Target {
        ttft_max: slo.ttft_ms.unwrap_or(f64::INFINITY),
        tpot_max: slo.tpot_ms.unwrap_or(f64::INFINITY),
        e2e_max: slo.e2e_latency_ms.unwrap_or(f64::INFINITY),
        percentile,
    })
}

/// The degrees, precisions and concurrency levels the search tries.
struct Space {
    tps: Vec<u32>,
    pps: Vec<u32>,
    precisions: Vec<ServingPrecision>,
    /// Sorted, without repeats.
    levels: Vec<u32>,
}

/// The search space from the request's constraints, else the defaults: tp the powers of two up to a node (and the
/// budget), pp 1/2/4/8, every precision the GPU's datasheet gives a matmul peak for (BF16, FP8, NVFP4), and
/// [`CONCURRENCY`]. Errors (`constraints`): an empty or zero tp, pp or concurrency list.
fn search_space(req: &InferenceSearchRequest, system: &crate::hw::System) -> Result<Space, ConfigError> {
    let c = &req.constraints;
    let gpn = system.gpus_per_node;
    let tps = c.tp.clone().unwrap_or_else(|| powers_of_two(gpn.min(req.gpus)));
    let pps = c.pp.clone().unwrap_or_else(|| vec![1, 2, 4, 8]);
    let has_fp8 = system.gpu.peak_matmul_flops(Precision::Fp8).is_some();
    let has_fp4 = system.gpu.peak_matmul_flops(Precision::Nvfp4).is_some();
    let precisions = c.precisions.clone().unwrap_or_else(|| {
        let mut p = vec![ServingPrecision::Bf16];
        p.extend(has_fp8.then_some(ServingPrecision::Fp8));
        p.extend(has_fp4.then_some(ServingPrecision::Fp4));
        p
    });
    let mut levels = c.concurrency.clone().unwrap_or_else(|| CONCURRENCY.to_vec());
    levels.sort_unstable();
    levels.dedup();
    if levels.is_empty() || levels[0] == 0 || [&tps, &pps].iter().any(|v| v.is_empty() || v.contains(&0)) {
        return Err(bad("constraints", "tp, pp and concurrency lists must be non-empty and positive"));
    }
    Ok(Space { tps, pps, precisions, levels })
}

/// The (ep, data-parallel attention) layouts tried at `tp`: ep 1 for dense models; for MoE models the constrained
/// ep list, else the powers of two up to tp that divide the expert count, plus ep = tp with data-parallel attention
/// (unless `dp_attention` is false; only that one if it is true).
fn layouts(model: &ServingModel, c: &SearchConstraints, tp: u32) -> Vec<(u32, bool)> {
    let eps: Vec<u32> = match (&model.moe, &c.ep) {
        (None, _) => vec![1],
        (Some(_), Some(list)) => list.clone(),
        (Some(m), None) => powers_of_two(tp).into_iter().filter(|e| m.experts % e == 0).collect(),
    };
    // (ep, data-parallel attention): MoE models also try ep = tp with data-parallel attention.
    let mut layouts: Vec<(u32, bool)> = eps.iter().map(|&e| (e, false)).collect();
    if model.moe.is_some() && tp > 1 && eps.contains(&tp) && c.dp_attention != Some(false) {
        layouts.push((tp, true));
    }
    if c.dp_attention == Some(true) {
        layouts.retain(|l| l.1);
    }
    layouts
}

/// One configuration of the search as an aggregated request of the search's system, model, engine and workload
/// (one closed-loop client; the levels set the concurrency later).
fn configuration(
    req: &InferenceSearchRequest,
    (tp, pp, ep, dp_attention): (u32, u32, u32, bool),
    precision: ServingPrecision,
) -> InferenceRequest {
    InferenceRequest {
        system: req.system.clone(),
        model: req.model.clone(),
        parallelism: ServingParallelism { tp, pp, ep, dp_attention, attention_dp_size: None },
        precision,
        kv_cache_dtype: req.kv_cache_dtype,
        engine: req.engine,
        engine_options: req.engine_options.clone(),
        workload: Workload::closed(req.workload.input_tokens, req.workload.output_tokens, 1),
        slo: Some(req.slo),
        mode: Default::default(),
        prefill: None,
        decode: None,
        speculative: None,
        frontend: None,
    }
}

/// The bound phase's outcome: every configuration that validated and fits, every solved (configuration,
/// concurrency) point, and the candidates not ruled out.
#[derive(Default)]
struct Bounds {
    configs: Vec<InferenceRequest>,
    points: Vec<ParetoPoint>,
    /// (steady-state tokens/s per GPU: the bound, index in `configs`, concurrency) of the levels not ruled out.
    candidates: Vec<(f64, usize, u32)>,
    /// (configuration, concurrency) pairs considered, and those solved in the steady state.
    evaluated: u64,
    solved: u64,
}

/// The bound phase: solves every level of every configuration of `space` that validates and fits the memory in the
/// steady state ([`Solver::closed_loop`], sharing `ops`), up to the solver's capacity; a level whose steady state
/// meets `target` becomes a candidate. Errors: a solver's (a precision the GPU cannot compute in).
fn bound(
    req: &InferenceSearchRequest,
    model: &ServingModel,
    space: &Space,
    target: Target,
    backend: &dyn CostBackend,
    consts: ServingConstants,
    ops: &mut OpTimes,
) -> Result<Bounds, ConfigError> {
    let system = backend.system();
    let levels = &space.levels;
    let mut b = Bounds::default();
    for &tp in &space.tps {
        for &pp in &space.pps {
            if tp as u64 * pp as u64 > req.gpus as u64 {
                continue;
            }
            for &(ep, dp_attention) in &layouts(model, &req.constraints, tp) {
                for &precision in &space.precisions {
                    let candidate = configuration(req, (tp, pp, ep, dp_attention), precision);
                    let Ok(cfg) = validate(&candidate, system) else {
                        b.evaluated += levels.len() as u64;
                        continue;
                    };
                    let memory = serving_memory(&cfg, &system.gpu);
                    if !memory.fits {
                        b.evaluated += levels.len() as u64;
                        continue;
                    }
                    let mut solver =
                        Solver::with_op_times(&cfg, backend, consts, memory.max_concurrency, std::mem::take(ops));
                    let k = b.configs.len();
                    for (i, &n) in levels.iter().enumerate() {
                        if n > solver.capacity {
                            b.evaluated += (levels.len() - i) as u64;
                            break;
                        }
                        b.evaluated += 1;
                        b.solved += 1;
                        let s = solver.closed_loop(n as f64)?;
                        let per_gpu = s.throughput_rps * cfg.output_tokens as f64 / cfg.gpus() as f64;
                        let (ttft, tpot) = (s.ttft_s * 1e3, s.tpot_s * 1e3);
                        b.points.push(ParetoPoint {
                            tp,
                            pp,
                            ep,
                            attention_dp: cfg.attention_dp,
                            precision: cfg.precision,
                            concurrency: n,
                            tokens_per_s_per_user: if tpot > 0.0 { 1e3 / tpot } else { 0.0 },
                            output_tokens_per_s_per_gpu: per_gpu,
                            ttft_ms: ttft,
                            tpot_ms: tpot,
                        });
                        if target.met(ttft, tpot, s.request_latency_s * 1e3) {
                            b.candidates.push((per_gpu, k, n));
                        }
                    }
                    *ops = solver.into_op_times();
                    b.configs.push(candidate);
                }
            }
        }
    }
    Ok(b)
}

/// The `top_k`-th best goodput among `hits` (−∞ while fewer): a candidate whose bound does not beat it cannot
/// enter the ranking.
fn kth_goodput(hits: &[(f64, SearchHit)], top_k: usize) -> f64 {
    if hits.len() >= top_k {
        let mut g: Vec<f64> = hits.iter().map(|h| h.0).collect();
        g.sort_by(|a, b| b.total_cmp(a));
        g[top_k - 1]
    } else {
        f64::NEG_INFINITY
    }
}

/// The branch-and-bound phase: simulates the candidates best bound first (each configuration until its first
/// candidate meets `target` at its percentile), stopping once no bound beats the `top_k`-th goodput or after
/// [`MAX_SIMULATIONS`]. Returns the hits (goodput per GPU, hit), the simulations run and whether the cap stopped it.
fn branch_and_bound(
    req: &InferenceSearchRequest,
    b: &Bounds,
    target: Target,
    backend: &dyn CostBackend,
    consts: ServingConstants,
    ops: &mut OpTimes,
) -> Result<(Vec<(f64, SearchHit)>, u64, bool), ConfigError> {
    let system = backend.system();
    let mut candidates = b.candidates.clone();
    candidates.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)).then(b.2.cmp(&a.2)));
    let limits = SimLimits::DEFAULT;
    let mut hits: Vec<(f64, SearchHit)> = Vec::new();
    let mut done = vec![false; b.configs.len()];
    let (mut simulated, mut capped) = (0u64, false);
    for &(bound, k, n) in &candidates {
        if bound <= kth_goodput(&hits, req.top_k as usize) {
            break;
        }
        if done[k] {
            continue;
        }
        if simulated >= MAX_SIMULATIONS {
            capped = true;
            break;
        }
        simulated += 1;
        let mut r = b.configs[k].clone();
        r.workload.concurrency = Some(n);
        r.workload.num_requests = Some(search_requests(&req.workload, n));
        let cfg = validate(&r, system)?;
        let p = super::predict_sharing(&cfg, backend, consts, &limits, ops)?;
        let Some(sim) = &p.simulation else { continue };
        let percentile = target.percentile;
        let (t, o, e) = (sim.ttft.at(percentile), sim.tpot.at(percentile), sim.e2e_latency.at(percentile));
        if !target.met(t, o, e) {
            continue;
        }
        done[k] = true;
        let goodput = sim.goodput.map_or(0.0, |g| g.output_tokens_per_s_per_gpu);
        let replicas = req.gpus / cfg.gpus();
        hits.push((
            goodput,
            SearchHit {
                tp: cfg.tp,
                pp: cfg.pp,
                ep: cfg.ep,
                dp_attention: cfg.dp_attention,
                attention_dp: cfg.attention_dp,
                precision: cfg.precision,
                concurrency: n,
                replicas,
                ttft_ms: p.ttft_ms,
                tpot_ms: p.tpot_ms,
                ttft_percentile_ms: t,
                tpot_percentile_ms: o,
                goodput_per_gpu: goodput,
                tokens_per_s_per_gpu: p.throughput.per_gpu,
                output_tokens_per_s: p.throughput.output_tokens_per_s * replicas as f64,
                prediction: Box::new(p),
            },
        ));
    }
    Ok((hits, simulated, capped))
}

/// Searches (see the module doc) with `backend` and `consts`. Errors: the request's fields (`gpus`, `slo`,
/// `model…`, `top_k`), or a candidate's precision the GPU cannot compute in.
pub fn search(
    req: &InferenceSearchRequest,
    backend: &dyn CostBackend,
    consts: ServingConstants,
) -> Result<InferenceSearchResult, ConfigError> {
    let start = Instant::now();
    let system = backend.system();
    let model = resolve_model(&req.model)?;
    let target = check_request(req, system)?;
    let space = search_space(req, system)?;
    // Operator times depend on the operator's work, not on the configuration: one table for every candidate's
    // solver and simulation (each distinct operator goes to the backend once per search).
    let mut ops = OpTimes::default();
    let bounds = bound(req, &model, &space, target, backend, consts, &mut ops)?;
    let (mut hits, simulated, capped) = branch_and_bound(req, &bounds, target, backend, consts, &mut ops)?;
    let Bounds { points, evaluated, solved, .. } = bounds;
    let percentile = target.percentile;
    let slo = req.slo;
    let mut warnings = Vec::new();
    if capped {
        warnings.push(format!(
            "stopped after {MAX_SIMULATIONS} simulated candidates: the ranking may miss configurations whose \
             steady-state bound was lower; narrow the constraints to search them"
        ));
    }
    hits.sort_by(|a, b| b.0.total_cmp(&a.0));
    let feasible = hits.len() as u64;
    let best: Vec<SearchHit> = hits.into_iter().take(req.top_k as usize).map(|h| h.1).collect();
    if best.is_empty() {
        warnings.push(format!(
            "no configuration of at most {} GPUs meets the target (p{percentile} of ttft_ms {:?}, tpot_ms {:?}, \
             e2e_latency_ms {:?}) at any tried concurrency: relax it, raise the budget or try fp8",
            req.gpus, slo.ttft_ms, slo.tpot_ms, slo.e2e_latency_ms
        ));
    }
    let elapsed_s = start.elapsed().as_secs_f64();
    Ok(InferenceSearchResult {
        evaluated,
        solved,
        simulated,
        feasible,
        percentile,
        elapsed_ms: elapsed_s * 1e3,
        configurations_per_s: evaluated as f64 / elapsed_s.max(1e-9),
        best,
        pareto_front: front(&points),
        points,
        warnings,
    })
}

/// The search's Pareto chart: every solved pair and the front ([`super::pareto::svg`]).
pub fn pareto_svg(req: &InferenceSearchRequest, r: &InferenceSearchResult) -> Result<String, super::pareto::PlotError> {
    let title = format!(
        "{} on {} GPUs of {}: {} in / {} out tokens",
        match &req.model {
            ModelRef::Name(n) => n.clone(),
            ModelRef::Spec(s) => s.name.clone().unwrap_or_else(|| "custom model".into()),
        },
        req.gpus,
        req.system,
        req.workload.input_tokens,
        req.workload.output_tokens
    );
    super::pareto::svg(&title, &r.points, &r.pareto_front)
}

#[cfg(test)]
mod tests;
