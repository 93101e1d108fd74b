//! The serving configuration search (`POST /v1/predictions/inference/search`): given a model, a system, a GPU
//! budget, a workload and a latency target (TTFT and/or TPOT), the configurations — tensor, pipeline and expert
//! parallel degrees, precision and concurrency per instance — that meet it, ranked by generated tokens per second per
//! GPU (replicas of an instance fill the budget; per GPU they do not change the rate).
//!
//! For each (tp, pp, ep, precision) that validates, concurrency levels are tried in increasing order on one
//! [`Solver`] (operator times and steps shared): TTFT and TPOT grow with concurrency (more decodes share every
//! step), so the first level that misses the target ends the scan and the last one that met it is the
//! configuration's best; the levels past it, and those beyond what the KV cache and the engine admit at once, count
//! as evaluated without a solve.

use std::time::Instant;

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::engine::ServingConstants;
use super::memory::serving_memory;
use super::report::InferencePrediction;
use super::request::{
    Engine, EngineOptions, InferenceRequest, ModelRef, ServingParallelism, ServingPrecision, Workload,
};
use super::steady::Solver;
use super::validate::{resolve_model, validate};
use crate::cost::CostBackend;
use crate::hw::Precision;
use crate::llm::config::{bad, ConfigError};

/// The latency target: every given bound must hold.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, ToSchema, Default)]
#[serde(deny_unknown_fields)]
pub struct Slo {
    /// Largest acceptable time to first token, ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttft_ms: Option<f64>,
    /// Largest acceptable time per output token, ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tpot_ms: Option<f64>,
}

/// The traffic shape searched for (the concurrency is searched).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SearchWorkload {
    /// Prompt tokens per request.
    pub input_tokens: u32,
    /// Generated tokens per request.
    pub output_tokens: u32,
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
    /// The latency target (give at least one bound).
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
    pub precision: Precision,
    /// Requests in flight per instance (the largest tried that meets the target).
    pub concurrency: u32,
    /// Instances of tp·pp GPUs in the budget.
    pub replicas: u32,
    pub ttft_ms: f64,
    pub tpot_ms: f64,
    /// Generated tokens per second per GPU (the ranking).
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
    /// Of them, solved.
    pub solved: u64,
    /// (tp, pp, ep, precision) configurations with at least one concurrency meeting the target.
    pub feasible: u64,
    /// Wall time of the search, ms.
    pub elapsed_ms: f64,
    /// evaluated / elapsed, per second.
    pub configurations_per_s: f64,
    /// The best `top_k`, by tokens/s per GPU.
    pub best: Vec<SearchHit>,
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
    if (req.slo.ttft_ms.is_none() && req.slo.tpot_ms.is_none()) || bounded(req.slo.ttft_ms) || bounded(req.slo.tpot_ms)
    {
        return Err(bad("slo", "give ttft_ms and/or tpot_ms, positive"));
    }
    if req.top_k == 0 || req.top_k > 100 {
        return Err(bad("top_k", format!("must be 1–100, got {}", req.top_k)));
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
    let (ttft_max, tpot_max) = (req.slo.ttft_ms.unwrap_or(f64::INFINITY), req.slo.tpot_ms.unwrap_or(f64::INFINITY));
    let (mut evaluated, mut solved, mut feasible) = (0u64, 0u64, 0u64);
    // (tokens/s per GPU, request) of every configuration's best concurrency.
    let mut hits: Vec<(f64, InferenceRequest)> = Vec::new();
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
                        parallelism: ServingParallelism { tp, pp, ep, dp_attention },
                        precision,
                        kv_cache_dtype: req.kv_cache_dtype,
                        engine: req.engine,
                        engine_options: req.engine_options,
                        workload: Workload {
                            input_tokens: req.workload.input_tokens,
                            output_tokens: req.workload.output_tokens,
                            concurrency: Some(1),
                            request_rate: None,
                        },
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
                    let mut solver = Solver::new(&cfg, backend, consts, memory.max_concurrency);
                    let mut best: Option<(f64, u32)> = None;
                    for (i, &n) in levels.iter().enumerate() {
                        if n > solver.capacity {
                            evaluated += (levels.len() - i) as u64;
                            break;
                        }
                        evaluated += 1;
                        solved += 1;
                        let s = solver.closed_loop(n as f64)?;
                        if s.ttft_s * 1e3 > ttft_max || s.tpot_s * 1e3 > tpot_max {
                            evaluated += (levels.len() - i - 1) as u64;
                            break;
                        }
                        let per_gpu = s.throughput_rps * cfg.output_tokens as f64 / cfg.gpus() as f64;
                        if best.is_none_or(|(b, _)| per_gpu > b) {
                            best = Some((per_gpu, n));
                        }
                    }
                    if let Some((per_gpu, n)) = best {
                        feasible += 1;
                        let mut r = candidate;
                        r.workload.concurrency = Some(n);
                        hits.push((per_gpu, r));
                    }
                }
            }
        }
    }
    hits.sort_by(|a, b| b.0.total_cmp(&a.0));
    let mut best = Vec::new();
    for (per_gpu, r) in hits.into_iter().take(req.top_k as usize) {
        let cfg = validate(&r, system)?;
        let p = super::predict(&cfg, backend, consts)?;
        let replicas = req.gpus / cfg.gpus();
        best.push(SearchHit {
            tp: cfg.tp,
            pp: cfg.pp,
            ep: cfg.ep,
            dp_attention: cfg.dp_attention,
            precision: cfg.precision,
            concurrency: r.workload.concurrency.unwrap_or(1),
            replicas,
            ttft_ms: p.ttft_ms,
            tpot_ms: p.tpot_ms,
            tokens_per_s_per_gpu: per_gpu,
            output_tokens_per_s: p.throughput.output_tokens_per_s * replicas as f64,
            prediction: Box::new(p),
        });
    }
    let mut warnings = Vec::new();
    if best.is_empty() {
        warnings.push(format!(
            "no configuration of at most {} GPUs meets the target (ttft_ms {:?}, tpot_ms {:?}) at any tried \
             concurrency: relax it, raise the budget or try fp8",
            req.gpus, req.slo.ttft_ms, req.slo.tpot_ms
        ));
    }
    let elapsed_s = start.elapsed().as_secs_f64();
    Ok(InferenceSearchResult {
        evaluated,
        solved,
        feasible,
        elapsed_ms: elapsed_s * 1e3,
        configurations_per_s: evaluated as f64 / elapsed_s.max(1e-9),
        best,
        warnings,
    })
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
    fn every_hit_meets_the_target_and_they_are_ranked_by_tokens_per_gpu() {
        let r = search(
            &req(serde_json::json!({"system": "dgx-h100", "model": "Llama-3.1-70B", "gpus": 8,
                "workload": {"input_tokens": 1024, "output_tokens": 256},
                "slo": {"ttft_ms": 500, "tpot_ms": 50}, "top_k": 5})),
            &h100(),
            ServingConstants::CALIBRATED,
        )
        .unwrap();
        assert_eq!(r.best.len(), 5, "{:?}", r.warnings);
        for h in &r.best {
            assert!(h.ttft_ms <= 500.0 && h.tpot_ms <= 50.0, "{h:?}");
            assert_eq!(h.replicas, 8 / (h.tp * h.pp));
            // The hit's per-GPU rate is its prediction's.
            assert!((h.tokens_per_s_per_gpu - h.prediction.throughput.per_gpu).abs() < 1e-9 * h.tokens_per_s_per_gpu);
        }
        assert!(r.best.windows(2).all(|w| w[0].tokens_per_s_per_gpu >= w[1].tokens_per_s_per_gpu));
        // tp 1 cannot hold 70 B in 80 GB at bf16: never a hit.
        assert!(r.best.iter().all(|h| h.tp * h.pp >= 2));
        assert!(r.evaluated >= r.solved && r.solved > 0 && r.feasible >= 5);
        // A tighter TPOT target lowers the best concurrency (or the rate) of the same configuration.
        let tight = search(
            &req(serde_json::json!({"system": "dgx-h100", "model": "Llama-3.1-70B", "gpus": 8,
                "workload": {"input_tokens": 1024, "output_tokens": 256}, "slo": {"tpot_ms": 25},
                "constraints": {"tp": [8], "pp": [1], "precisions": ["bf16"]}, "top_k": 1})),
            &h100(),
            ServingConstants::CALIBRATED,
        )
        .unwrap();
        let loose = search(
            &req(serde_json::json!({"system": "dgx-h100", "model": "Llama-3.1-70B", "gpus": 8,
                "workload": {"input_tokens": 1024, "output_tokens": 256}, "slo": {"tpot_ms": 60},
                "constraints": {"tp": [8], "pp": [1], "precisions": ["bf16"]}, "top_k": 1})),
            &h100(),
            ServingConstants::CALIBRATED,
        )
        .unwrap();
        assert!(tight.best[0].concurrency < loose.best[0].concurrency);
        assert!(tight.best[0].tokens_per_s_per_gpu < loose.best[0].tokens_per_s_per_gpu);
    }

    #[test]
    fn bad_searches_name_their_field() {
        let base = serde_json::json!({"system": "dgx-h100", "model": "Llama-3.1-8B", "gpus": 8,
            "workload": {"input_tokens": 128, "output_tokens": 128}, "slo": {"tpot_ms": 20}});
        for (k, v, field) in [
            ("gpus", serde_json::json!(0), "gpus"),
            ("slo", serde_json::json!({}), "slo"),
            ("slo", serde_json::json!({"ttft_ms": -1}), "slo"),
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
