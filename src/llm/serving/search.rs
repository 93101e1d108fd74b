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

use std::time::Instant;

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::engine::ServingConstants;
use super::memory::serving_memory;
use super::pareto::{front, ParetoPoint};
use super::report::InferencePrediction;
pub use super::request::Slo;
use super::request::{
    Engine, EngineOptions, InferenceRequest, ModelRef, ServingParallelism, ServingPrecision, Workload,
};
use super::sim::SimLimits;
use super::steady::{OpTimes, Solver};
use super::validate::{resolve_model, validate};
use crate::cost::CostBackend;
use crate::hw::Precision;
use crate::llm::config::{bad, ConfigError};

/// The traffic shape searched for (the concurrency is searched).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SearchWorkload {
    /// Prompt tokens per request.
    pub input_tokens: u32,
    /// Generated tokens per request.
    pub output_tokens: u32,
    /// Requests each simulated candidate sends. Default 4 × its concurrency, at least 64 and at most 1,000 (a
    /// closed loop reaches its steady waves within a few rounds of clients).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub num_requests: Option<u32>,
}

/// Most candidates one search simulates.
pub const MAX_SIMULATIONS: u64 = 48;

/// Requests a simulated candidate of `concurrency` clients sends (see [`SearchWorkload::num_requests`]).
pub fn search_requests(w: &SearchWorkload, concurrency: u32) -> u32 {
    w.num_requests.unwrap_or_else(|| (4 * concurrency).clamp(64, 1000))
}

/// Limits of the searched space (each absent field: the default).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema, Default)]
#[serde(deny_unknown_fields)]
pub struct SearchConstraints {
    /// Tensor-parallel degrees to try. Default powers of two up to the GPUs per node (and the budget).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tp: Option<Vec<u32>>,
    /// Pipeline degrees to try. Default 1, 2, 4, 8 within the budget.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pp: Option<Vec<u32>>,
    /// Expert-parallel degrees to try (MoE models). Default every power of two dividing tp and the experts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ep: Option<Vec<u32>>,
    /// Precisions to try. Default bf16, fp8 where the GPU has FP8 tensor cores and fp4 where it has FP4 ones.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub precisions: Option<Vec<ServingPrecision>>,
    /// Concurrency levels per instance to try. Default 1, 2, 4, 8, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512,
    /// 768, 1024.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub concurrency: Option<Vec<u32>>,
    /// Data-parallel attention (MoE models): `true` tries only it, `false` never; default both (ep = tp).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dp_attention: Option<bool>,
}

fn five() -> u32 {
    5
}

/// `POST /v1/predictions/inference/search`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"system": "dgx-h100", "model": "Llama-3.1-70B", "gpus": 8,
    "workload": {"input_tokens": 1024, "output_tokens": 256}, "slo": {"ttft_ms": 500, "tpot_ms": 30},
    "engine": "vllm", "top_k": 3}))]
pub struct InferenceSearchRequest {
    /// Name of a stored system.
    pub system: String,
    /// A catalog name, `{"hf_config": {…}}`, or the architecture.
    pub model: ModelRef,
    /// GPU budget: instances of tp·pp GPUs, as many as fit.
    pub gpus: u32,
    pub workload: SearchWorkload,
    /// The latency target: give at least one bound; `percentile` (50, 90 or 99; default 90) of the simulated TTFT and
    /// TPOT must meet it.
    pub slo: Slo,
    /// Default `vllm`.
    #[serde(default)]
    pub engine: Engine,
    /// Overrides of the engine's scheduling defaults, for every candidate.
    #[serde(default)]
    pub engine_options: EngineOptions,
    /// KV-cache precision for every candidate. Default: each candidate's `precision` (bf16 under fp8).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kv_cache_dtype: Option<ServingPrecision>,
    #[serde(default)]
    pub constraints: SearchConstraints,
    /// How many configurations to return (each with its full prediction). Default 5.
    #[serde(default = "five")]
    pub top_k: u32,
}

/// One configuration that meets the target.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct SearchHit {
    pub tp: u32,
    pub pp: u32,
    pub ep: u32,
    /// Data-parallel attention with all-to-all expert dispatch.
    pub dp_attention: bool,
    /// Attention data-parallel ranks.
    pub attention_dp: u32,
    pub precision: Precision,
    /// Clients per instance (the level with the best goodput that met the target).
    pub concurrency: u32,
    /// Instances of tp·pp GPUs in the budget.
    pub replicas: u32,
    /// Mean simulated TTFT and TPOT, ms.
    pub ttft_ms: f64,
    pub tpot_ms: f64,
    /// The target's percentile of the simulated TTFT and TPOT, ms (what met it).
    pub ttft_percentile_ms: f64,
    pub tpot_percentile_ms: f64,
    /// Generated tokens per second per GPU of the requests that met the target (the ranking).
    pub goodput_per_gpu: f64,
    /// Generated tokens per second per GPU, every request.
    pub tokens_per_s_per_gpu: f64,
    /// Generated tokens per second of all replicas.
    pub output_tokens_per_s: f64,
    /// The instance's full prediction at that concurrency.
    pub prediction: Box<InferencePrediction>,
}

/// The answer.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct InferenceSearchResult {
    /// (configuration, concurrency) pairs considered, solved or bounded.
    pub evaluated: u64,
    /// Of them, solved in the steady state.
    pub solved: u64,
    /// Of them, simulated (the candidates the steady-state bound could not rule out, best bound first).
    pub simulated: u64,
    /// Configurations with a simulated concurrency meeting the target.
    pub feasible: u64,
    /// The percentile the target applied to.
    pub percentile: f64,
    /// Wall time of the search, ms.
    pub elapsed_ms: f64,
    /// evaluated / elapsed, per second.
    pub configurations_per_s: f64,
    /// The best `top_k`, by goodput per GPU.
    pub best: Vec<SearchHit>,
    /// The Pareto front of tokens/s per GPU against tokens/s per user over every solved pair (steady state),
    /// whatever the target; sorted by tokens/s per user.
    pub pareto_front: Vec<ParetoPoint>,
    /// Every solved pair (steady state), for the chart (`?format=svg`).
    pub points: Vec<ParetoPoint>,
    pub warnings: Vec<String>,
}

/// Default concurrency levels.
pub const CONCURRENCY: [u32; 17] = [1, 2, 4, 8, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512, 768, 1024];

fn powers_of_two(max: u32) -> Vec<u32> {
    (0..31).map(|i| 1u32 << i).take_while(|v| *v <= max.max(1)).collect()
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
    let (ttft_max, tpot_max, e2e_max) = (
        slo.ttft_ms.unwrap_or(f64::INFINITY),
        slo.tpot_ms.unwrap_or(f64::INFINITY),
        slo.e2e_latency_ms.unwrap_or(f64::INFINITY),
    );
    let (mut evaluated, mut solved) = (0u64, 0u64);
    let mut configs: Vec<InferenceRequest> = Vec::new();
    let mut points: Vec<ParetoPoint> = Vec::new();
    // (steady-state tokens/s per GPU: the bound, configuration, concurrency) of the levels not ruled out.
    let mut candidates: Vec<(f64, usize, u32)> = Vec::new();
    // Operator times depend on the operator's work, not on the configuration: one table for every candidate's
    // solver and simulation (each distinct operator goes to the backend once per search).
    let mut ops = OpTimes::default();
    for &tp in &tps {
        for &pp in &pps {
            if tp as u64 * pp as u64 > req.gpus as u64 {
                continue;
            }
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
            for &(ep, dp_attention) in &layouts {
                for &precision in &precisions {
                    let candidate = InferenceRequest {
                        system: req.system.clone(),
                        model: req.model.clone(),
                        parallelism: ServingParallelism { tp, pp, ep, dp_attention, attention_dp_size: None },
                        precision,
                        kv_cache_dtype: req.kv_cache_dtype,
                        engine: req.engine,
                        engine_options: req.engine_options,
                        workload: Workload::closed(req.workload.input_tokens, req.workload.output_tokens, 1),
                        slo: Some(slo),
                        mode: Default::default(),
                        prefill: None,
                        decode: None,
                    };
                    let Ok(cfg) = validate(&candidate, system) else {
                        evaluated += levels.len() as u64;
                        continue;
                    };
                    let memory = serving_memory(&cfg, &system.gpu);
                    if !memory.fits {
                        evaluated += levels.len() as u64;
                        continue;
                    }
                    let mut solver =
                        Solver::with_op_times(&cfg, backend, consts, memory.max_concurrency, std::mem::take(&mut ops));
                    let k = configs.len();
                    for (i, &n) in levels.iter().enumerate() {
                        if n > solver.capacity {
                            evaluated += (levels.len() - i) as u64;
                            break;
                        }
                        evaluated += 1;
                        solved += 1;
                        let s = solver.closed_loop(n as f64)?;
                        let per_gpu = s.throughput_rps * cfg.output_tokens as f64 / cfg.gpus() as f64;
                        let (ttft, tpot) = (s.ttft_s * 1e3, s.tpot_s * 1e3);
                        points.push(ParetoPoint {
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
                        if ttft <= ttft_max && tpot <= tpot_max && s.request_latency_s * 1e3 <= e2e_max {
                            candidates.push((per_gpu, k, n));
                        }
                    }
                    ops = solver.into_op_times();
                    configs.push(candidate);
                }
            }
        }
    }
    // Branch and bound over the candidates, best steady-state bound first.
    candidates.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)).then(b.2.cmp(&a.2)));
    let limits = SimLimits::DEFAULT;
    let mut hits: Vec<(f64, SearchHit)> = Vec::new();
    let mut done = vec![false; configs.len()];
    let (mut simulated, mut capped) = (0u64, false);
    let mut warnings = Vec::new();
    for &(bound, k, n) in &candidates {
        let kth = if hits.len() >= req.top_k as usize {
            let mut g: Vec<f64> = hits.iter().map(|h| h.0).collect();
            g.sort_by(|a, b| b.total_cmp(a));
            g[req.top_k as usize - 1]
        } else {
            f64::NEG_INFINITY
        };
        if bound <= kth {
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
        let mut r = configs[k].clone();
        r.workload.concurrency = Some(n);
        r.workload.num_requests = Some(search_requests(&req.workload, n));
        let cfg = validate(&r, system)?;
        let p = super::predict_sharing(&cfg, backend, consts, &limits, &mut ops)?;
        let Some(sim) = &p.simulation else { continue };
        let (t, o, e) = (sim.ttft.at(percentile), sim.tpot.at(percentile), sim.e2e_latency.at(percentile));
        if t > ttft_max || o > tpot_max || e > e2e_max {
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
mod tests {
    use super::*;
    use crate::cost::AnalyticBackend;
    use crate::hw::presets;
    use crate::llm::serving::ServingDerated;

    fn h100() -> ServingDerated<AnalyticBackend> {
        let s = presets().into_iter().find(|p| p.name == "dgx-h100").unwrap().resolve().unwrap();
        ServingDerated::new(AnalyticBackend::new(s), ServingConstants::CALIBRATED)
    }

    fn req(v: serde_json::Value) -> InferenceSearchRequest {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn every_hit_meets_the_target_on_its_percentile_and_they_are_ranked_by_goodput() {
        let r = search(
            &req(serde_json::json!({"system": "dgx-h100", "model": "Llama-3.1-70B", "gpus": 8,
                "workload": {"input_tokens": 1024, "output_tokens": 256},
                "slo": {"ttft_ms": 2000, "tpot_ms": 50}, "top_k": 5})),
            &h100(),
            ServingConstants::CALIBRATED,
        )
        .unwrap();
        assert_eq!(r.best.len(), 5, "{:?}", r.warnings);
        assert_eq!(r.percentile, 90.0);
        for h in &r.best {
            // p90 of the simulated benchmark meets the target.
            let sim = h.prediction.simulation.as_ref().unwrap();
            assert!(h.ttft_percentile_ms <= 2000.0 && h.tpot_percentile_ms <= 50.0, "{h:?}");
            assert_eq!((h.ttft_percentile_ms, h.tpot_percentile_ms), (sim.ttft.p90_ms, sim.tpot.p90_ms));
            assert_eq!(h.replicas, 8 / (h.tp * h.pp));
            // The hit's rates are its prediction's; its goodput is at most its throughput.
            assert!((h.tokens_per_s_per_gpu - h.prediction.throughput.per_gpu).abs() < 1e-9 * h.tokens_per_s_per_gpu);
            assert!(h.goodput_per_gpu <= h.tokens_per_s_per_gpu * (1.0 + 1e-12) && h.goodput_per_gpu > 0.0);
        }
        assert!(r.best.windows(2).all(|w| w[0].goodput_per_gpu >= w[1].goodput_per_gpu));
        // tp 1 cannot hold 70 B in 80 GB at bf16: never a hit.
        assert!(r.best.iter().all(|h| h.tp * h.pp >= 2));
        // The steady-state bound rules most pairs out: few are simulated.
        assert!(r.evaluated >= r.solved && r.solved > r.simulated && r.simulated >= 5 && r.feasible >= 5, "{r:?}");
        assert!(r.simulated <= MAX_SIMULATIONS);
        // The Pareto front: a subset of the points, none dominated by any point.
        assert!(!r.pareto_front.is_empty() && r.points.len() as u64 == r.solved);
        for f in &r.pareto_front {
            assert!(r.points.contains(f));
            assert!(!r.points.iter().any(|p| p.tokens_per_s_per_user >= f.tokens_per_s_per_user
                && p.output_tokens_per_s_per_gpu > f.output_tokens_per_s_per_gpu));
        }
        let svg = pareto_svg(
            &req(serde_json::json!({"system": "dgx-h100", "model": "Llama-3.1-70B", "gpus": 8,
            "workload": {"input_tokens": 1024, "output_tokens": 256}, "slo": {"tpot_ms": 50}})),
            &r,
        )
        .unwrap();
        assert!(svg.starts_with("<svg") && svg.contains("Pareto front"));
        // A tighter TPOT target lowers the best concurrency of the same configuration.
        let one = |tpot: f64| {
            search(
                &req(serde_json::json!({"system": "dgx-h100", "model": "Llama-3.1-70B", "gpus": 8,
                    "workload": {"input_tokens": 1024, "output_tokens": 256}, "slo": {"tpot_ms": tpot},
                    "constraints": {"tp": [8], "pp": [1], "precisions": ["bf16"]}, "top_k": 1})),
                &h100(),
                ServingConstants::CALIBRATED,
            )
            .unwrap()
        };
        let (tight, loose) = (one(25.0), one(60.0));
        assert!(
            tight.best[0].concurrency < loose.best[0].concurrency,
            "{:?} {:?}",
            tight.best[0].concurrency,
            loose.best[0].concurrency
        );
        assert!(tight.best[0].goodput_per_gpu < loose.best[0].goodput_per_gpu);
    }

    #[test]
    fn sharing_operator_times_among_candidates_changes_no_answer() {
        // The search times every candidate on one operator table; each answer must be the one a fresh solver (and
        // a fresh prediction) gives for that configuration alone, to the bit.
        let backend = h100();
        let consts = ServingConstants::CALIBRATED;
        let sreq = req(serde_json::json!({"system": "dgx-h100", "model": "Llama-3.1-70B", "gpus": 8,
            "workload": {"input_tokens": 1024, "output_tokens": 256},
            "slo": {"ttft_ms": 500, "tpot_ms": 30}, "top_k": 3}));
        let r = search(&sreq, &backend, consts).unwrap();
        assert!(r.best.len() == 3 && r.simulated >= 3, "{:?}", r.warnings);
        let system = backend.system();
        let candidate = |p: &ParetoPoint, n: u32| {
            let mut c = InferenceRequest {
                system: sreq.system.clone(),
                model: sreq.model.clone(),
                parallelism: ServingParallelism {
                    tp: p.tp,
                    pp: p.pp,
                    ep: p.ep,
                    dp_attention: false,
                    attention_dp_size: None,
                },
                precision: if p.precision == Precision::Bf16 { ServingPrecision::Bf16 } else { ServingPrecision::Fp8 },
                kv_cache_dtype: None,
                engine: sreq.engine,
                engine_options: sreq.engine_options,
                workload: Workload::closed(1024, 256, 1),
                slo: Some(sreq.slo),
                mode: Default::default(),
                prefill: None,
                decode: None,
            };
            c.workload.concurrency = Some(n);
            c
        };
        // Every steady-state point: a fresh solver of its configuration alone.
        assert_eq!(r.points.len() as u64, r.solved);
        for p in &r.points {
            let cfg = validate(&candidate(p, 1), system).unwrap();
            assert_eq!(cfg.precision, p.precision);
            let mut solver = Solver::new(&cfg, &backend, consts, serving_memory(&cfg, &system.gpu).max_concurrency);
            let s = solver.closed_loop(p.concurrency as f64).unwrap();
            let per_gpu = s.throughput_rps * 256.0 / cfg.gpus() as f64;
            assert_eq!((p.ttft_ms, p.tpot_ms), (s.ttft_s * 1e3, s.tpot_s * 1e3), "{p:?}");
            assert_eq!(p.output_tokens_per_s_per_gpu, per_gpu, "{p:?}");
        }
        // Every hit: the prediction of its configuration at its concurrency, made on its own.
        for h in &r.best {
            let point = r.points.iter().find(|p| (p.tp, p.pp, p.precision) == (h.tp, h.pp, h.precision)).unwrap();
            let mut c = candidate(point, h.concurrency);
            c.workload.num_requests = Some(search_requests(&sreq.workload, h.concurrency));
            let cfg = validate(&c, system).unwrap();
            let alone = super::super::predict(&cfg, &backend, consts).unwrap();
            assert_eq!(*h.prediction, alone, "tp {} pp {} {:?} at {}", h.tp, h.pp, h.precision, h.concurrency);
        }
    }

    #[test]
    fn bad_searches_name_their_field() {
        let base = serde_json::json!({"system": "dgx-h100", "model": "Llama-3.1-8B", "gpus": 8,
            "workload": {"input_tokens": 128, "output_tokens": 128}, "slo": {"tpot_ms": 20}});
        for (k, v, field) in [
            ("gpus", serde_json::json!(0), "gpus"),
            ("slo", serde_json::json!({}), "slo"),
            ("slo", serde_json::json!({"ttft_ms": -1}), "slo"),
            ("slo", serde_json::json!({"ttft_ms": 1, "percentile": 95}), "slo.percentile"),
            ("top_k", serde_json::json!(0), "top_k"),
            ("model", serde_json::json!("nope"), "model"),
            ("constraints", serde_json::json!({"concurrency": []}), "constraints"),
        ] {
            let mut r = base.clone();
            r[k] = v;
            assert_eq!(search(&req(r), &h100(), ServingConstants::CALIBRATED).unwrap_err().field, field, "{k}");
        }
        // An unreachable target: no hit, a warning.
        let mut r = base;
        r["slo"] = serde_json::json!({"tpot_ms": 0.001});
        let res = search(&req(r), &h100(), ServingConstants::CALIBRATED).unwrap();
        assert!(res.best.is_empty() && !res.warnings.is_empty());
    }
}
