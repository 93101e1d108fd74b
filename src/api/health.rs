//! Operations endpoints: `/healthz` (liveness), `/readyz` (readiness), `/metrics` (Prometheus).

use std::sync::atomic::Ordering;

use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::IntoResponse;
use axum::Json;
use serde::Serialize;
use utoipa::ToSchema;

use super::problem::{ApiError, Problem};
use super::AppState;
use crate::service::startup::Phase;

/// Liveness answer.
#[derive(Debug, Serialize, ToSchema)]
pub struct Health {
    /// Always `ok` when the process answers.
    pub status: &'static str,
    /// perfcast version.
    pub version: &'static str,
}

/// Liveness: the process is up and serving.
#[utoipa::path(get, path = "/healthz", tag = "operations",
    responses((status = 200, description = "Alive", body = Health)))]
pub async fn healthz() -> Json<Health> {
    Json(Health { status: "ok", version: env!("CARGO_PKG_VERSION") })
}

/// Readiness answer.
#[derive(Debug, Serialize, ToSchema)]
pub struct Ready {
    /// `ready`.
    pub status: &'static str,
    /// The database engine that answered: `sqlite` or `postgres`.
    pub database: &'static str,
    /// Active learned models loaded.
    pub active_models: usize,
    /// While a first start installs the bundled samples after it became ready (`perfcast serve` serves once the
    /// bundled models are in): how many of them are written. Absent otherwise. The job runner (retraining,
    /// calibrations) begins once they are all in.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bundled_samples: Option<BundledSamples>,
}

/// Progress of the bundled samples' install after the start ([`Ready::bundled_samples`]).
#[derive(Debug, Serialize, ToSchema)]
pub struct BundledSamples {
    /// Samples written so far (a part stored by an interrupted earlier start counts as written).
    pub samples_done: u64,
    /// Samples in the bundle.
    pub samples_total: u64,
}

/// Readiness: the start is complete (the first start on a new database installs the bundled models first; their
/// training samples follow while it serves, `bundled_samples` saying how far), the database answers and the
/// registry of active models is loaded. While the server starts the
/// 503 is `starting`, with the install's progress in its `startup` member and a `Retry-After`.
#[utoipa::path(get, path = "/readyz", tag = "operations",
    responses(
        (status = 200, description = "Ready", body = Ready),
        (status = 503, description = "Not ready: starting (the problem's `startup` member says how far the bundle \
install is; `Retry-After` when to ask again), the start failed, the database is unreachable, or the models are not \
loaded", body = Problem, content_type = "application/problem+json"),
    ))]
pub async fn readyz(State(state): State<AppState>) -> Result<Json<Ready>, ApiError> {
    let unavailable = |detail: String| ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "not-ready", "Not ready", detail);
    let startup = state.service.startup.snapshot();
    match startup.phase {
        Phase::Failed => {
            let mut e = unavailable(format!("the start failed: {}", startup.detail.clone().unwrap_or_default()));
            e.startup = Some(startup);
            return Err(e);
        }
        Phase::Idle | Phase::Ready => {}
        _ => return Err(ApiError::starting(startup)),
    }
    state.service.store.ping().await.map_err(|e| unavailable(format!("database: {e}")))?;
    if !state.service.loaded.load(Ordering::SeqCst) {
        return Err(unavailable("the active models are not loaded yet".into()));
    }
    let bundled_samples = state
        .service
        .startup
        .samples_after_ready()
        .then(|| BundledSamples { samples_done: startup.samples_done, samples_total: startup.samples_total });
    Ok(Json(Ready {
        status: "ready",
        database: state.service.store.engine().as_str(),
        active_models: state.service.registry.load().len(),
        bundled_samples,
    }))
}

/// Prometheus metrics (text exposition format): `perfcast_http_requests_total` and
/// `perfcast_http_request_duration_seconds` per route, `perfcast_uploads_total`, `perfcast_samples_total`,
/// `perfcast_job_duration_seconds`, `perfcast_active_model_version`.
#[utoipa::path(get, path = "/metrics", tag = "operations",
    responses((status = 200, description = "Metrics", body = String, content_type = "text/plain")))]
pub async fn metrics() -> impl IntoResponse {
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], crate::metrics::handle().render())
}
