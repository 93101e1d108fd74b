//! LLM serving (inference) prediction (MODELS.md §5; S2's question; peers Vidur, aiconfigurator, LLMCompass):
//! the time to first token, the time per output token and the throughput of a model served by vLLM, SGLang or
//! TensorRT-LLM under continuous batching with chunked prefill, its KV-cache capacity, and static batches.
//!
//! The stages mirror training's: **decompose** a step into operators ([`step`]: prefill and decode attention,
//! GEMMs, norms, RoPE, SwiGLU, MoE router and fused experts, embedding, LM head over the sampled tokens, sampler,
//! tensor-parallel all-reduces, pipeline sends) → **time** them once per distinct shape through any
//! [`CostBackend`] (the training predictor's [`crate::llm::timing::Timer`]; learned regressors answer where they
//! cover an operator, each row names its `source`) → **schedule** steps into the steady state of a closed or open
//! loop, or a static batch ([`steady`]) → **report** ([`report`]). The model comes from the [`catalog`], a Hugging
//! Face config ([`hf`]) or the request's fields ([`validate`]); memory and KV capacity from [`memory`]; the engines'
//! defaults and perfcast's serving constants from [`engine`].
//!
//! Pure: no IO. May import what [`crate::llm`] may.

pub mod benchmark;
pub mod catalog;
pub mod derate;
pub mod disagg;
pub mod engine;
pub mod frontend;
pub mod fusion;
pub mod hf;
pub mod interval;
pub mod launch;
pub mod memory;
pub mod mla;
pub mod model;
pub mod pareto;
pub mod report;
pub mod request;
pub mod runtime;
pub mod search;
pub mod sim;
pub mod spec_v1;
pub mod speculative;
pub mod steady;
pub mod step;
pub mod validate;
pub mod wideep;
pub mod workload;

#[cfg(test)]
mod dsa_tests;
#[cfg(test)]
mod fusion_tests;
#[cfg(test)]
mod graph_list_tests;
#[cfg(test)]
mod kernel_cost_tests;
#[cfg(test)]
mod launch_tests;
#[cfg(test)]
mod mla_tests;
#[cfg(test)]
mod precision_tests;
#[cfg(test)]
mod sliding_window_tests;
#[cfg(test)]
mod solver_tests;
#[cfg(test)]
mod spec_v1_tests;
#[cfg(test)]
mod speculative_tests;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod trtllm_tests;

pub use derate::ServingDerated;
pub use engine::ServingConstants;
pub use report::InferencePrediction;
pub use request::InferenceRequest;
pub use sim::SimLimits;
pub use validate::{check_limits, validate, ServingConfig};

use crate::cost::CostBackend;
use crate::llm::config::ConfigError;
use memory::serving_memory;
use report::{report, ReportInputs};
use steady::{OpTimes, Solver, StaticBatch};

/// Predicts serving of `cfg` with `backend` (which also provides the system) and the constants `consts`
/// (`backend` should derate analytic times by them: [`ServingDerated`]) within the default [`SimLimits`].
pub fn predict(
    cfg: &ServingConfig,
    backend: &dyn CostBackend,
    consts: ServingConstants,
) -> Result<InferencePrediction, ConfigError> {
    predict_with(cfg, backend, consts, &SimLimits::DEFAULT)
}

/// [`predict`] within `limits`: the steady state (the fast bound, and the answer when `workload.simulate` is
/// false), then the simulated benchmark ([`benchmark`]) whose means, percentiles and throughput answer.
///
/// Errors: a precision the GPU has no path for (`precision`); a simulation beyond `limits` (the workload field to
/// change); configuration errors are caught by [`validate`].
pub fn predict_with(
    cfg: &ServingConfig,
    backend: &dyn CostBackend,
    consts: ServingConstants,
    limits: &SimLimits,
) -> Result<InferencePrediction, ConfigError> {
    predict_sharing(cfg, backend, consts, limits, &mut OpTimes::default())
}

/// [`predict_with`] starting from the operator times `ops` (timed through `backend`) and adding its own to them:
/// the serving search's simulated candidates share one table ([`OpTimes`]). The answer is [`predict_with`]'s.
pub fn predict_sharing(
    cfg: &ServingConfig,
    backend: &dyn CostBackend,
    consts: ServingConstants,
    limits: &SimLimits,
    ops: &mut OpTimes,
) -> Result<InferencePrediction, ConfigError> {
    check_limits(cfg, limits)?;
    let memory = serving_memory(cfg, &backend.system().gpu);
    let mut solver = Solver::with_op_times(cfg, backend, consts, memory.max_concurrency, std::mem::take(ops));
    let p = predict_on(cfg, backend, consts, limits, memory, &mut solver);
    *ops = solver.into_op_times();
    p
}

/// [`predict_with`] on `solver` (over `cfg` and `backend`; `memory` is `cfg`'s [`serving_memory`] on the system's
/// GPU), after the limits were checked.
fn predict_on(
    cfg: &ServingConfig,
    backend: &dyn CostBackend,
    consts: ServingConstants,
    limits: &SimLimits,
    memory: memory::ServingMemory,
    solver: &mut Solver,
) -> Result<InferencePrediction, ConfigError> {
    let system = backend.system();
    let mut warnings = Vec::new();
    let t = &cfg.traffic;
    let steady = match (t.concurrency, t.request_rate) {
        (Some(c), None) => solver.concurrency(c)?,
        (c, Some(rate)) => {
            let (s, saturated) = solver.open_loop(rate)?;
            match c {
                // A rate beyond what the clients can keep in flight: the closed loop bounds it.
                Some(c) if saturated || s.running > c as f64 => solver.concurrency(c)?,
                _ => {
                    if saturated {
                        warnings.push(format!(
                            "request_rate {rate} req/s exceeds the largest throughput {:.3} req/s ({} running): the \
                             queue grows without bound; the steady state is at saturation",
                            s.throughput_rps, solver.capacity
                        ));
                    }
                    s
                }
            }
        }
        // Every request at once (an offline run): the steady state of all of them in flight.
        (None, None) => solver.concurrency(t.num_requests)?,
    };
    let capacity = solver.capacity;
    let (mixed, decode) = (solver.detail(&steady.mixed)?, solver.detail(&steady.decode)?);
    let settings = benchmark::instance_settings(cfg, &memory, sim::instance::Role::Both);
    let kv = (settings.kv_blocks, settings.block_tokens);
    // A deployment that cannot hold one request's KV cache would drop every simulated request: the steady state
    // answers "as if it fitted" (the report warns).
    let fits =
        memory.fits && cfg.pools.as_ref().is_none_or(|p| serving_memory(&cfg.for_pool(&p.prefill), &system.gpu).fits);
    let (simulation, disagg) = match (cfg.simulate && fits, cfg.pools.is_some()) {
        (false, true) if cfg.simulate => {
            return Err(crate::llm::config::bad(
                "decode.parallelism",
                "a pool's workers cannot hold one request's KV cache: use more tp/pp, fp8 or shorter requests",
            ))
        }
        (false, true) => {
            return Err(crate::llm::config::bad(
                "workload.simulate",
                "disaggregated serving is only simulated: leave simulate at true",
            ))
        }
        (false, false) => (None, None),
        (true, false) => {
            let o = benchmark::simulate_aggregated(cfg, &consts, solver, &memory, limits, 0)?;
            (Some(benchmark::summarize(&o, t.num_requests, cfg.gpus(), kv, cfg.slo)), None)
        }
        (true, true) => {
            let (o, d) = benchmark::simulate_disaggregated(cfg, backend, consts, limits, 0)?;
            (Some(benchmark::summarize(&o, t.num_requests, cfg.deployment_gpus(), kv, cfg.slo)), Some(d))
        }
    };
    Ok(report(ReportInputs {
        cfg,
        system,
        steady: &steady,
        mixed: &mixed,
        decode: &decode,
        memory,
        capacity,
        consts,
        warnings,
        simulation,
        disagg,
    }))
}

/// The simulated benchmark's steps as a Chrome trace (Perfetto), at most `trace_steps` of them, with the run's
/// summary in `otherData`. Errors: `workload.simulate` false; those of [`predict_with`].
pub fn timeline(
    cfg: &ServingConfig,
    backend: &dyn CostBackend,
    consts: ServingConstants,
    limits: &SimLimits,
    trace_steps: usize,
) -> Result<crate::llm::trace::chrome::ChromeTrace, ConfigError> {
    if !cfg.simulate {
        return Err(crate::llm::config::bad(
            "workload.simulate",
            "a timeline shows the simulated steps: leave simulate at true",
        ));
    }
    check_limits(cfg, limits)?;
    let memory = serving_memory(cfg, &backend.system().gpu);
    let (o, disaggregated) = if cfg.pools.is_some() {
        (benchmark::simulate_disaggregated(cfg, backend, consts, limits, trace_steps)?.0, true)
    } else {
        let mut solver = Solver::new(cfg, backend, consts, memory.max_concurrency);
        (benchmark::simulate_aggregated(cfg, &consts, &mut solver, &memory, limits, trace_steps)?, false)
    };
    let settings = benchmark::instance_settings(cfg, &memory, sim::instance::Role::Both);
    let s = benchmark::summarize(
        &o,
        cfg.traffic.num_requests,
        cfg.deployment_gpus(),
        (settings.kv_blocks, settings.block_tokens),
        cfg.slo,
    );
    let summary = serde_json::json!({
        "ttft_ms": s.ttft, "tpot_ms": s.tpot, "itl_ms": s.itl, "e2e_latency_ms": s.e2e_latency,
        "duration_s": s.duration_s, "steps": s.steps, "preemptions": s.kv_cache.preemptions,
    });
    Ok(sim::trace::chrome(&o.trace, disaggregated, o.trace_truncated, summary))
}

/// One static batch of `batch` prompts of `cfg.input_tokens` tokens generating `cfg.output_tokens` each (the
/// LLM-Inference-Bench measurement: prefill of the whole batch, then the decode steps).
pub fn predict_static_batch(
    cfg: &ServingConfig,
    backend: &dyn CostBackend,
    consts: ServingConstants,
    batch: u32,
) -> Result<StaticBatch, ConfigError> {
    let memory = serving_memory(cfg, &backend.system().gpu);
    Solver::new(cfg, backend, consts, memory.max_concurrency).static_batch(batch)
}
