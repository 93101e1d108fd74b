//! `/v1/predictions/inference`: LLM serving — TTFT, TPOT, throughput and KV-cache capacity of a model served by
//! vLLM, SGLang or TensorRT-LLM; `/v1/predictions/inference/search`: the configurations that meet a latency target.

use std::collections::BTreeMap;

use axum::extract::{Query, State};
use axum::http::{header, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::Json;

use super::json::ValidJson;
use super::problem::{ApiError, Problem};
use super::AppState;
use crate::llm::serving::search::{pareto_svg, InferenceSearchRequest, InferenceSearchResult};
use crate::llm::serving::{InferencePrediction, InferenceRequest};
use crate::llm::trace::chrome::ChromeTrace;
use crate::llm::trace::TraceFormat;

/// Query parameters of a serving timeline.
#[derive(Debug, serde::Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[allow(dead_code)]
pub struct ServingTimelineQuery {
    /// `chrome` (default and only): Trace Event Format JSON for Perfetto UI or chrome://tracing.
    format: Option<String>,
}

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

/// Timeline of a simulated serving benchmark.
///
/// The same body as `POST /v1/predictions/inference`; the answer is the simulated engine steps in the Trace Event
/// Format (`?format=chrome`, the default) that Perfetto UI (ui.perfetto.dev → Open trace file) and
/// chrome://tracing open: one process per engine instance (`instance 0`, or `prefill N` / `decode N` when
/// disaggregated), each step a complete event (`ph: "X"`, µs) named by what it ran (`prefill 2048 + decode 63`,
/// `decode 64`) with its decodes, prefill tokens, running and waiting requests and KV-cache usage in `args`, and
/// counter tracks of the running and waiting requests and the KV-cache usage. At most 100,000 steps are kept
/// (`otherData.truncated` says when more ran); `otherData.summary` has the run's TTFT, TPOT, ITL and latency.
#[utoipa::path(post, path = "/v1/predictions/inference/timeline", tag = "predictions", request_body = InferenceRequest,
    params(ServingTimelineQuery),
    responses(
        (status = 200, description = "The timeline", body = ChromeTrace),
        (status = 400, description = "Body is not JSON, or a `format` other than `chrome`", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "Unknown system", body = Problem, content_type = "application/problem+json"),
        (status = 413, description = "Body too large", body = Problem, content_type = "application/problem+json"),
        (status = 415, description = "Body is not application/json", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "Impossible configuration, unknown field, or a simulation beyond the server's caps", body = Problem, content_type = "application/problem+json"),
        (status = 500, description = "Server error", body = Problem, content_type = "application/problem+json"),
    ))]
pub async fn inference_timeline(
    State(state): State<AppState>,
    uri: Uri,
    ValidJson(req): ValidJson<InferenceRequest>,
) -> Result<Json<ChromeTrace>, ApiError> {
    if super::predictions::timeline_format(&uri)? != TraceFormat::Chrome {
        let m = "a serving timeline comes only as `chrome` (Trace Event Format)".to_string();
        return Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            "invalid-query",
            "The query string cannot be read",
            m.clone(),
        )
        .at_field("format", m));
    }
    Ok(Json(state.service.inference_timeline(&req).await?))
}

/// Query parameters of a serving search.
#[derive(Debug, serde::Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[allow(dead_code)]
pub struct ServingSearchQuery {
    /// `json` (default): the result; `svg`: its Pareto chart (tokens/s per GPU against tokens/s per user, every
    /// solved configuration and concurrency, the front drawn through).
    format: Option<String>,
}

/// Search serving configurations for a latency target.
///
/// Tries tensor, pipeline, expert and attention-data parallel degrees within the GPU budget (`gpus`), precisions
/// (bf16, and fp8 where the GPU has FP8 tensor cores) and concurrency levels per instance. Every (configuration,
/// concurrency) pair is solved in the steady state (the fast bound): those that already miss `slo` are ruled out,
/// the others are simulated best bound first until the `top_k` best are known; a hit meets `slo` on its simulated
/// `slo.percentile` (p90 by default) of TTFT, TPOT and latency, and the hits are ranked by goodput per GPU
/// (generated tokens/s per GPU of the requests that met the target; replicas fill the budget). The answer also
/// gives the Pareto front of tokens/s per GPU against tokens/s per user (`?format=svg` draws it), `evaluated`,
/// `solved` and `simulated` counts and `configurations_per_s`.
#[utoipa::path(post, path = "/v1/predictions/inference/search", tag = "predictions",
    request_body = InferenceSearchRequest, params(ServingSearchQuery),
    responses(
        (status = 200, description = "The best configurations, or their Pareto chart", content(
            (InferenceSearchResult = "application/json"),
            (String = "image/svg+xml"),
        )),
        (status = 400, description = "Body is not JSON, or an unknown `format`", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "Unknown system", body = Problem, content_type = "application/problem+json"),
        (status = 413, description = "Body too large", body = Problem, content_type = "application/problem+json"),
        (status = 415, description = "Body is not application/json", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "Impossible request, unknown model or unknown field", body = Problem, content_type = "application/problem+json"),
        (status = 500, description = "Server error", body = Problem, content_type = "application/problem+json"),
    ))]
pub async fn search_inference(
    State(state): State<AppState>,
    uri: Uri,
    ValidJson(req): ValidJson<InferenceSearchRequest>,
) -> Result<Response, ApiError> {
    let bad = |message: String| {
        ApiError::new(StatusCode::BAD_REQUEST, "invalid-query", "The query string cannot be read", message.clone())
            .at_field("format", message)
    };
    let q = Query::<BTreeMap<String, String>>::try_from_uri(&uri).map_err(|e| bad(e.body_text()))?.0;
    if let Some(other) = q.keys().find(|k| k.as_str() != "format") {
        return Err(bad(format!("unknown query parameter `{other}` (expected `format`)")));
    }
    let svg = match q.get("format").map(String::as_str) {
        None | Some("json") => false,
        Some("svg") => true,
        Some(f) => return Err(bad(format!("unknown format `{f}` (expected `json` or `svg`)"))),
    };
    let result = state.service.search_inference(&req).await?;
    if !svg {
        return Ok(Json(result).into_response());
    }
    let body = pareto_svg(&req, &result).map_err(|e| ApiError::internal(&e))?;
    Ok(([(header::CONTENT_TYPE, "image/svg+xml")], body).into_response())
}
