//! Validation of a serving request: the model resolved (catalog, Hugging Face config or fields), the parallel
//! configuration, precisions, engine settings and workload checked against the system, every refusal naming the
//! request field that causes it (`parallelism.ep`, `model.hf_config.num_key_value_heads`, …), never a panic.
//!
//! Split by concept: the validated configuration [`ServingConfig`] (`config.rs`); the model resolved from a catalog
//! name, a Hugging Face config or fields (`resolve.rs`); one serving instance's parallel configuration, precisions
//! and engine settings (`instance.rs`); the workload, SLO and simulation caps (`workload.rs`); here the aggregated
//! or disaggregated entry point.

mod config;
mod graphs;
mod instance;
mod resolve;
mod workload;

pub use config::ServingConfig;
pub use graphs::{MAX_CUDA_GRAPH_BATCH, MAX_CUDA_GRAPH_SIZES};
pub use resolve::resolve_model;
pub use workload::{check_limits, MAX_TOKENS};

use super::disagg::{DisaggPools, PoolConfig};
use super::request::{InferenceRequest, ServingMode, ServingParallelism, WorkerPool};
use crate::hw::System;
use crate::llm::config::{bad, ConfigError};
use instance::{check_prompt_fits_a_step, validate_instance};

/// Validates `req` against `system` and fills in the defaults (the engine's per [`defaults`](super::engine::defaults)).
///
/// Errors (field as in the request): an unknown catalog model or a bad architecture (`model…`); tp not dividing
/// the query heads, the dense MLP width or (with MoE) the experts' width per ep group (`parallelism.tp`); key/value
/// heads neither a multiple nor a divisor of tp (`parallelism.tp`); ep not dividing tp or the experts, or ep > 1
/// without MoE (`parallelism.ep`); pp above the layers (`parallelism.pp`); tp·pp above the system's GPUs
/// (`parallelism`); fp8 weights or KV cache on a GPU without FP8 tensor cores, fp4 weights on one without FP4 tensor
/// cores (`precision`, `kv_cache_dtype`); an fp4 KV cache (`kv_cache_dtype`);
/// engine options out of range (`engine_options.…`); the workload (`workload.…`, incl. a TensorRT-LLM or vLLM prompt
/// longer than the token budget without chunked prefill).
///
/// `mode: "disagg"`: each pool validated as its own instance (errors under `prefill.…` / `decode.…`), every worker
/// within the system's GPUs; the configuration is the decode worker's with the pools attached.
pub fn validate(req: &InferenceRequest, system: &System) -> Result<ServingConfig, ConfigError> {
    match req.mode {
        ServingMode::Agg => {
            for (f, p) in [("prefill", &req.prefill), ("decode", &req.decode)] {
                if p.is_some() {
                    return Err(bad(f, "only with mode \"disagg\" (aggregated serving uses parallelism)"));
                }
            }
            let cfg = validate_instance(req, system)?;
            check_prompt_fits_a_step(req, &cfg.settings)?;
            Ok(cfg)
        }
        ServingMode::Disagg => validate_disagg(req, system),
    }
}

fn validate_disagg(req: &InferenceRequest, system: &System) -> Result<ServingConfig, ConfigError> {
    let (Some(p), Some(d)) = (&req.prefill, &req.decode) else {
        let missing = if req.prefill.is_none() { "prefill" } else { "decode" };
        return Err(bad(missing, "mode \"disagg\" needs a prefill and a decode pool"));
    };
    if req.parallelism != ServingParallelism::default() {
        return Err(bad("parallelism", "with mode \"disagg\" give each pool's parallelism under prefill and decode"));
    }
    let one = |pool: &WorkerPool, name: &str| -> Result<(ServingConfig, PoolConfig), ConfigError> {
        if pool.workers == 0 || pool.workers > 10_000 {
            return Err(bad(&format!("{name}.workers"), format!("must be 1–10,000, got {}", pool.workers)));
        }
        let mut r = req.clone();
        (r.mode, r.prefill, r.decode, r.parallelism) = (ServingMode::Agg, None, None, pool.parallelism);
        if let Some(o) = &pool.engine_options {
            r.engine_options = r.engine_options.merged(o);
        }
        let cfg = validate_instance(&r, system).map_err(|mut e| {
            if e.field.starts_with("parallelism") || e.field.starts_with("engine_options") {
                e.field = format!("{name}.{}", e.field);
            }
            e
        })?;
        let pc = PoolConfig {
            workers: pool.workers,
            tp: cfg.tp,
            pp: cfg.pp,
            ep: cfg.ep,
            attention_dp: cfg.attention_dp,
            settings: cfg.settings,
            cuda_graph_batch_sizes: cfg.cuda_graph_batch_sizes.clone(),
        };
        Ok((cfg, pc))
    };
    let (pcfg, pp) = one(p, "prefill")?;
    check_prompt_fits_a_step(req, &pp.settings)?;
    let (dcfg, dp) = one(d, "decode")?;
    let total = pp.workers as u64 * pcfg.gpus() as u64 + dp.workers as u64 * dcfg.gpus() as u64;
    if total > system.total_gpus() {
        return Err(bad(
            "decode.workers",
            format!("the pools need {total} GPUs but {} has {}", system.name, system.total_gpus()),
        ));
    }
    Ok(ServingConfig { mode: ServingMode::Disagg, pools: Some(DisaggPools { prefill: pp, decode: dp }), ..dcfg })
}
