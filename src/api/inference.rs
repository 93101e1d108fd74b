//! `/v1/predictions/inference`: LLM serving — TTFT, TPOT, throughput and KV-cache capacity of a model served by
//! vLLM, SGLang or TensorRT-LLM; `/v1/predictions/inference/search`: the configurations that meet a latency target.

use axum::extract::State;
use axum::Json;

use super::json::ValidJson;
use super::problem::{ApiError, Problem};
use super::AppState;
use crate::llm::serving::search::{InferenceSearchRequest, InferenceSearchResult};
use crate::llm::serving::{InferencePrediction, InferenceRequest};

/// Predict LLM serving.
///
/// Decomposes one engine step into operators (prefill and decode attention, GEMMs, norms, RoPE, SwiGLU, MoE router
/// and fused experts, LM head over the sampled tokens, sampler, tensor-parallel all-reduces, pipeline sends), times
/// each on the system's GPU (a learned regressor where one is active, else the analytic roofline derated by the
/// serving constants), and composes the steady state of continuous batching with chunked prefill at the engine's
/// limits: TTFT = waiting + the prompt's prefill steps, TPOT = the mean step, throughput by Little's law. `memory`
/// gives the weights, the KV cache's bytes per token, its capacity and how many requests fit at once.
///
/// `model` is a catalog name (`"Llama-3.1-70B"`, `"Mixtral-8x7B"`, `"Qwen3-30B-A3B"`, `"DeepSeek-V3"`, …; the
/// README lists them), `{"hf_config": {…}}` with a Hugging Face config.json, or the architecture's fields.
/// Defaults: `parallelism` tp = pp = ep = 1; `precision` bf16; `kv_cache_dtype` = precision (bf16 under fp8);
/// `engine` vllm with its own scheduling defaults per GPU (`engine_options` overrides them). `workload` takes
/// `concurrency` (closed loop) or `request_rate` (open loop).
#[utoipa::path(post, path = "/v1/predictions/inference", tag = "predictions", request_body = InferenceRequest,
    responses(
        (status = 200, description = "The prediction", body = InferencePrediction),
        (status = 400, description = "Body is not JSON", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "Unknown system", body = Problem, content_type = "application/problem+json"),
        (status = 413, description = "Body too large", body = Problem, content_type = "application/problem+json"),
        (status = 415, description = "Body is not application/json", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "Impossible configuration, unknown model or unknown field", body = Problem, content_type = "application/problem+json"),
        (status = 500, description = "Server error", body = Problem, content_type = "application/problem+json"),
    ))]
pub async fn predict_inference(
    State(state): State<AppState>,
    ValidJson(req): ValidJson<InferenceRequest>,
) -> Result<Json<InferencePrediction>, ApiError> {
    Ok(Json(state.service.predict_inference(&req).await?))
}

/// Search serving configurations for a latency target.
///
/// Tries tensor, pipeline and expert parallel degrees within the GPU budget (`gpus`), precisions (bf16, and fp8
/// where the GPU has FP8 tensor cores) and concurrency levels per instance; keeps, per configuration, the largest
/// concurrency whose TTFT and TPOT meet `slo`, and ranks the configurations by generated tokens/s per GPU (replicas
/// of an instance fill the budget). The `top_k` come with their full predictions; `evaluated` counts the
/// (configuration, concurrency) pairs considered and `configurations_per_s` the search's rate.
#[utoipa::path(post, path = "/v1/predictions/inference/search", tag = "predictions",
    request_body = InferenceSearchRequest,
    responses(
        (status = 200, description = "The best configurations", body = InferenceSearchResult),
        (status = 400, description = "Body is not JSON", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "Unknown system", body = Problem, content_type = "application/problem+json"),
        (status = 413, description = "Body too large", body = Problem, content_type = "application/problem+json"),
        (status = 415, description = "Body is not application/json", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "Impossible request, unknown model or unknown field", body = Problem, content_type = "application/problem+json"),
        (status = 500, description = "Server error", body = Problem, content_type = "application/problem+json"),
    ))]
pub async fn search_inference(
    State(state): State<AppState>,
    ValidJson(req): ValidJson<InferenceSearchRequest>,
) -> Result<Json<InferenceSearchResult>, ApiError> {
    Ok(Json(state.service.search_inference(&req).await?))
}
