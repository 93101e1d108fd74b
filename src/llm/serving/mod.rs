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

pub mod catalog;
pub mod derate;
pub mod engine;
pub mod hf;
pub mod interval;
pub mod memory;
pub mod model;
pub mod report;
pub mod request;
pub mod search;
pub mod steady;
pub mod step;
pub mod validate;

#[cfg(test)]
mod precision_tests;
#[cfg(test)]
mod tests;

pub use derate::ServingDerated;
pub use engine::ServingConstants;
pub use report::InferencePrediction;
pub use request::InferenceRequest;
pub use validate::{validate, ServingConfig};

use crate::cost::CostBackend;
use crate::llm::config::ConfigError;
use memory::serving_memory;
use report::{report, ReportInputs};
use steady::{Solver, StaticBatch};

/// Predicts steady-state serving of `cfg` with `backend` (which also provides the system) and the constants
/// `consts` (`backend` should derate analytic times by them: [`ServingDerated`]).
///
/// Errors: a precision the GPU has no path for (`precision`); configuration errors are caught by [`validate`].
pub fn predict(
    cfg: &ServingConfig,
    backend: &dyn CostBackend,
    consts: ServingConstants,
) -> Result<InferencePrediction, ConfigError> {
    let system = backend.system();
    let memory = serving_memory(cfg, &system.gpu);
    let mut solver = Solver::new(cfg, backend, consts, memory.max_concurrency);
    let mut warnings = Vec::new();
    let steady = match (cfg.concurrency, cfg.request_rate) {
        (Some(c), _) => solver.concurrency(c)?,
        (None, Some(rate)) => {
            let (s, saturated) = solver.open_loop(rate)?;
            if saturated {
                warnings.push(format!(
                    "request_rate {rate} req/s exceeds the largest throughput {:.3} req/s ({} running): the queue \
                     grows without bound; the answer is at saturation",
                    s.throughput_rps, solver.capacity
                ));
            }
            s
        }
        (None, None) => return Err(crate::llm::config::bad("workload", "give concurrency or request_rate")),
    };
    let capacity = solver.capacity;
    let (mixed, decode) = (solver.detail(&steady.mixed)?, solver.detail(&steady.decode)?);
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
    }))
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
