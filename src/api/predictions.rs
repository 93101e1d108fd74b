//! `/v1/predictions/training`: one LLM training iteration; `/v1/predictions/training/search`: the fastest
//! configuration that fits.

use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;

use super::json::ValidJson;
use super::problem::{ApiError, Problem};
use super::regressors::JobView;
use super::AppState;
use crate::llm::search::{SearchRequest, SearchResult};
use crate::llm::{TrainingPrediction, TrainingRequest};
use crate::service::predictions::SearchOutcome;

/// Predict one training iteration (S1).
///
/// Decomposes the transformer into S1's Table I operators, times each on the system's GPU (analytic roofline with
/// wave quantization, or a learned regressor where one is active), times the tensor-, pipeline- and data-parallel
/// communication over the system's links, and composes the 1F1B timeline of S1 eq. 7:
/// `(m − 1 + pp)·(Max_Fwd + Max_Bwd) + First_Stage_Gradient_Synchronization + Max_Update`.
///
/// Defaults: `model.norm` layernorm, `model.attention` fused_softmax, `model.activation` gelu,
/// `model.parallel_residual` false, `model.rotary` true; `parallelism` tp = pp = dp = micro_batch = 1,
/// grad_accum 1 (or derived from `global_batch`), zero_stage 1; `precision` fp16.
#[utoipa::path(post, path = "/v1/predictions/training", tag = "predictions", request_body = TrainingRequest,
    responses(
        (status = 200, description = "The prediction", body = TrainingPrediction),
        (status = 400, description = "Body is not JSON", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "Unknown system", body = Problem, content_type = "application/problem+json"),
        (status = 413, description = "Body too large", body = Problem, content_type = "application/problem+json"),
        (status = 415, description = "Body is not application/json", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "Impossible configuration or unknown field", body = Problem, content_type = "application/problem+json"),
        (status = 500, description = "Server error", body = Problem, content_type = "application/problem+json"),
    ))]
pub async fn predict_training(
    State(state): State<AppState>,
    ValidJson(req): ValidJson<TrainingRequest>,
) -> Result<Json<TrainingPrediction>, ApiError> {
    Ok(Json(state.service.predict_training(&req).await?))
}

/// Search for the fastest configuration that fits.
///
/// Enumerates tp·cp·pp·dp factorizations of `gpus`, micro-batch sizes, virtual stages (interleaving),
/// recomputation and sequence parallelism within `constraints`; drops the configurations that do not fit in the
/// GPU's memory; ranks the rest by predicted iteration time and returns the `top_k` with their full predictions,
/// how many were evaluated and how long it took. Searches of at most `search_inline_max_candidates`
/// configurations answer `200`; larger ones answer `202` with a `search` job whose progress and result show in
/// `GET /v1/jobs/{id}`.
#[utoipa::path(post, path = "/v1/predictions/training/search", tag = "predictions", request_body = SearchRequest,
    responses(
        (status = 200, description = "The fastest configurations", body = SearchResult),
        (status = 202, description = "Queued as a job (large search)", body = JobView,
            headers(("Location" = String, description = "The job"))),
        (status = 400, description = "Body is not JSON", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "Unknown system", body = Problem, content_type = "application/problem+json"),
        (status = 413, description = "Body too large", body = Problem, content_type = "application/problem+json"),
        (status = 415, description = "Body is not application/json", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "Impossible request or unknown field", body = Problem, content_type = "application/problem+json"),
        (status = 500, description = "Server error", body = Problem, content_type = "application/problem+json"),
    ))]
pub async fn search_training(
    State(state): State<AppState>,
    ValidJson(req): ValidJson<SearchRequest>,
) -> Result<Response, ApiError> {
    Ok(match state.service.search_training(&req).await? {
        SearchOutcome::Done(result) => Json(*result).into_response(),
        SearchOutcome::Queued(job) => {
            (StatusCode::ACCEPTED, [(header::LOCATION, format!("/v1/jobs/{}", job.id))], Json(JobView::from(job)))
                .into_response()
        }
    })
}
