//! `/v1/predictions/training`: one LLM training iteration; `/v1/predictions/training/search`: the fastest
//! configuration that fits.

use std::collections::BTreeMap;

use axum::extract::{Query, State};
use axum::http::{header, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::Json;

use super::json::ValidJson;
use super::problem::{ApiError, Problem};
use super::regressors::JobView;
use super::AppState;
use crate::llm::search::{SearchRequest, SearchResult};
use crate::llm::trace::chrome::ChromeTrace;
use crate::llm::trace::TraceFormat;
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

/// Query parameters of a timeline.
#[derive(Debug, serde::Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[allow(dead_code)]
pub struct TimelineQuery {
    /// `chrome` (default): Trace Event Format JSON for Perfetto UI or chrome://tracing; `svg`: a Gantt chart.
    format: Option<TraceFormat>,
}

/// The `format` of `uri`'s query (default `chrome`). Errors: 400 naming `format` for another value, or naming an
/// unknown parameter.
pub(super) fn timeline_format(uri: &Uri) -> Result<TraceFormat, ApiError> {
    let bad = |field: &str, message: String| {
        ApiError::new(StatusCode::BAD_REQUEST, "invalid-query", "The query string cannot be read", message.clone())
            .at_field(field, message)
    };
    let q = Query::<BTreeMap<String, String>>::try_from_uri(uri).map_err(|e| bad("format", e.body_text()))?.0;
    if let Some(other) = q.keys().find(|k| k.as_str() != "format") {
        return Err(bad(other, format!("unknown query parameter `{other}` (expected `format`)")));
    }
    match q.get("format") {
        None => Ok(TraceFormat::default()),
        Some(f) => TraceFormat::parse(f)
            .ok_or_else(|| bad("format", format!("unknown format `{f}` (expected `chrome` or `svg`)"))),
    }
}

/// Timeline of a training-iteration prediction.
///
/// The same body as `POST /v1/predictions/training`; the answer is the iteration as the schedule placed it:
/// every pipeline stage's forward, backward and recomputed passes per micro-batch, its pipeline sends, its
/// tensor-/context-parallel and data-parallel collectives (overlapped where the schedule overlaps them) and its
/// optimizer step. `format=chrome` (default) gives the Trace Event Format (`traceEvents`: complete events
/// `ph: "X"` in µs, one process per stage, one thread per stream) that Perfetto UI (ui.perfetto.dev → Open trace
/// file) and chrome://tracing open; its events span exactly the prediction's `iteration_time_s`. `format=svg`
/// gives the same as a Gantt chart with a time axis and a legend.
#[utoipa::path(post, path = "/v1/predictions/training/timeline", tag = "predictions", request_body = TrainingRequest,
    params(TimelineQuery),
    responses(
        (status = 200, description = "The timeline", content(
            (ChromeTrace = "application/json"),
            (String = "image/svg+xml"),
        )),
        (status = 400, description = "Body is not JSON, or an unknown `format`", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "Unknown system", body = Problem, content_type = "application/problem+json"),
        (status = 413, description = "Body too large", body = Problem, content_type = "application/problem+json"),
        (status = 415, description = "Body is not application/json", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "Impossible configuration or unknown field", body = Problem, content_type = "application/problem+json"),
        (status = 500, description = "Server error", body = Problem, content_type = "application/problem+json"),
    ))]
pub async fn training_timeline(
    State(state): State<AppState>,
    uri: Uri,
    ValidJson(req): ValidJson<TrainingRequest>,
) -> Result<Response, ApiError> {
    let format = timeline_format(&uri)?;
    let body = state.service.training_timeline(&req, format).await?;
    Ok(([(header::CONTENT_TYPE, format.content_type())], body).into_response())
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
