//! `/v1/regressors` and `/v1/jobs`: the learned models and the background jobs that train them.

use axum::extract::{Path, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Serialize;
use utoipa::ToSchema;

use super::json::ValidJson;
use super::problem::{ApiError, Problem};
use super::AppState;
use crate::jobs::RetrainParams;
use crate::store::jobs::JobRecord;
use crate::store::regressors::RegressorRecord;

/// A background job.
#[derive(Debug, Serialize, ToSchema)]
pub struct JobView {
    pub id: i64,
    /// `retrain` or `search`.
    pub kind: String,
    /// `queued`, `running`, `succeeded` or `failed`.
    pub state: String,
    /// 0–1.
    pub progress: f64,
    pub message: String,
    #[schema(value_type = Object)]
    pub params: serde_json::Value,
    /// What the job produced (a retrain: versions trained and activated, per key; a search: its `SearchResult`).
    #[schema(value_type = Option<Object>)]
    pub result: Option<serde_json::Value>,
    /// Times started (more than 1 after a crash interrupted it).
    pub attempts: i64,
    pub created_at: String,
    pub started_at: Option<String>,
    pub finished_at: Option<String>,
    /// This job's URL (poll it).
    pub url: String,
}

impl From<JobRecord> for JobView {
    fn from(j: JobRecord) -> Self {
        JobView {
            url: format!("/v1/jobs/{}", j.id),
            id: j.id,
            kind: j.kind,
            state: j.state.as_str().to_string(),
            progress: j.progress,
            message: j.message,
            params: j.params,
            result: j.result,
            attempts: j.attempts,
            created_at: j.created_at,
            started_at: j.started_at,
            finished_at: j.finished_at,
        }
    }
}

/// Where a model version came from.
#[derive(Debug, Serialize, ToSchema)]
pub struct ProvenanceView {
    /// True: shipped with perfcast — trained by `perfcast models bundle` on the measurements bundled in the binary
    /// and installed at the database's first start. False: trained in this database.
    pub bundled: bool,
    /// The bundle's version (a hash of its contents), for bundled versions.
    pub bundle: Option<String>,
    /// The datasets of its training rows: a bundled dataset's name (`aiconfigurator`, `neusight`, `deepbench`,
    /// `xla_gpu_perf_tables`, `vtrain`, `superbench_results`, `nccl_tests_h100_cluster`) or `upload <profile id>
    /// (<format>)`.
    pub datasets: Vec<String>,
    /// Git commit of the perfcast code that trained it, when known.
    pub commit: Option<String>,
    /// perfcast version of the code that trained it, when known.
    pub perfcast_version: Option<String>,
    /// When it was trained (RFC 3339, UTC).
    pub trained_at: String,
}

/// One model version.
#[derive(Debug, Serialize, ToSchema)]
pub struct RegressorView {
    /// `linear.fwd.fp32` (all GPUs) or `linear.fwd.fp32.H100-SXM5-80GB` (one GPU).
    pub key: String,
    /// `op`.
    pub family: String,
    /// `all` or the GPU.
    pub scope: String,
    pub version: i64,
    pub active: bool,
    /// Samples of the key when trained.
    pub samples: u64,
    pub train_rows: u64,
    pub validation_rows: u64,
    /// MAPE on the 20 % validation rows, 0–1.
    pub validation_mape: f64,
    /// Signed mean relative error on the validation rows (positive = over-prediction).
    pub validation_signed: f64,
    /// The analytic model's MAPE on the same rows.
    pub analytic_validation_mape: f64,
    /// The chosen hyper-parameters.
    #[schema(value_type = Object)]
    pub candidate: serde_json::Value,
    /// Why it was (not) activated.
    #[schema(value_type = Object)]
    pub promotion: serde_json::Value,
    /// Bundled or trained here, on which datasets, by which code, when.
    pub provenance: ProvenanceView,
    pub job_id: Option<i64>,
    pub created_at: String,
}

impl From<&RegressorRecord> for RegressorView {
    fn from(r: &RegressorRecord) -> Self {
        RegressorView {
            key: r.key.clone(),
            family: r.family.clone(),
            scope: r.scope.clone(),
            version: r.version,
            active: r.active,
            samples: r.fit.samples,
            train_rows: r.fit.train_rows,
            validation_rows: r.fit.validation_rows,
            validation_mape: r.fit.validation_mape,
            validation_signed: r.fit.validation_signed,
            analytic_validation_mape: r.fit.analytic_validation_mape,
            candidate: r.fit.candidate.clone(),
            promotion: r.promotion.clone(),
            provenance: ProvenanceView {
                bundled: r.provenance.bundled,
                bundle: r.provenance.bundle.clone(),
                datasets: r.provenance.datasets.clone(),
                commit: r.provenance.commit.clone(),
                perfcast_version: r.provenance.perfcast_version.clone(),
                trained_at: r.provenance.trained_at.clone().unwrap_or_else(|| r.created_at.clone()),
            },
            job_id: r.job_id,
            created_at: r.created_at.clone(),
        }
    }
}

/// One key with all its versions and the active one's details.
#[derive(Debug, Serialize, ToSchema)]
pub struct RegressorDetail {
    pub key: String,
    /// The active version, if any.
    pub active_version: Option<i64>,
    /// Feature names in model order.
    pub features: Vec<String>,
    /// Gain importance per feature of the newest version.
    #[schema(value_type = Object)]
    pub feature_importance: serde_json::Value,
    /// Every candidate's validation MAPE in the newest version's selection.
    #[schema(value_type = Object)]
    pub candidates: serde_json::Value,
    /// What the newest version was trained on (rows per GPU, dims ranges).
    #[schema(value_type = Object)]
    pub training_set: serde_json::Value,
    /// Newest first.
    pub versions: Vec<RegressorView>,
}

/// Retrain the learned models.
///
/// Returns `202` with a job; poll `GET /v1/jobs/{id}`. A new version becomes active only if its error on the
/// held-out rows is not worse than the active version's on the same rows.
#[utoipa::path(post, path = "/v1/regressors/retrain", tag = "regressors", request_body = RetrainParams,
    security(("bearer" = [])),
    responses(
        (status = 202, description = "Queued", body = JobView, headers(("Location" = String, description = "The job"))),
        (status = 400, description = "Body is not JSON", body = Problem, content_type = "application/problem+json"),
        (status = 415, description = "Body is not application/json", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "Invalid field", body = Problem, content_type = "application/problem+json"),
        (status = 401, description = "No or unknown API key", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "Read-only or revoked key", body = Problem, content_type = "application/problem+json"),
        (status = 429, description = "Over the key's rate limit (Retry-After)", body = Problem, content_type = "application/problem+json"),
        (status = 500, description = "Server error", body = Problem, content_type = "application/problem+json"),
    ))]
pub async fn retrain(
    State(state): State<AppState>,
    ValidJson(params): ValidJson<RetrainParams>,
) -> Result<(StatusCode, [(header::HeaderName, String); 1], Json<JobView>), ApiError> {
    let job = state.service.request_retrain(&params).await?;
    Ok((StatusCode::ACCEPTED, [(header::LOCATION, format!("/v1/jobs/{}", job.id))], Json(job.into())))
}

/// List every model version.
#[utoipa::path(get, path = "/v1/regressors", tag = "regressors",
    responses(
        (status = 200, description = "All versions by key and version", body = Vec<RegressorView>),
        (status = 500, description = "Server error", body = Problem, content_type = "application/problem+json"),
    ))]
pub async fn list_regressors(State(state): State<AppState>) -> Result<Json<Vec<RegressorView>>, ApiError> {
    Ok(Json(state.service.regressors().await?.iter().map(Into::into).collect()))
}

/// Show one key: its versions, the active one, feature importances.
#[utoipa::path(get, path = "/v1/regressors/{key}", tag = "regressors",
    params(("key" = String, Path, description = "Regressor key", example = "linear.fwd.fp32")),
    responses(
        (status = 200, description = "The key's versions", body = RegressorDetail),
        (status = 404, description = "No model with this key", body = Problem, content_type = "application/problem+json"),
        (status = 500, description = "Server error", body = Problem, content_type = "application/problem+json"),
    ))]
pub async fn get_regressor(
    State(state): State<AppState>,
    Path(key): Path<String>,
) -> Result<Json<RegressorDetail>, ApiError> {
    let versions = state.service.regressor(&key).await?;
    let newest = &versions[0];
    Ok(Json(RegressorDetail {
        key: key.clone(),
        active_version: versions.iter().find(|v| v.active).map(|v| v.version),
        features: newest.feature_names.clone(),
        feature_importance: newest.fit.importance.clone(),
        candidates: newest.fit.candidates.clone(),
        training_set: newest.fit.summary.clone(),
        versions: versions.iter().map(Into::into).collect(),
    }))
}

/// Accuracy plot of a key's active version (SVG).
///
/// Predicted vs measured times on the active version's validation rows (the 20 % of the seeded split it was not
/// trained on; at most 2,000 evenly thinned rows are stored per version), log–log with the y = x line: the learned
/// times (its hold-out model, what `validation_mape` measures) and the analytic times. The title names the version
/// and its validation MAPE, the subtitle the number of validation rows. Stored at training time: no refit.
#[utoipa::path(get, path = "/v1/regressors/{key}/plot.svg", tag = "regressors",
    params(("key" = String, Path, description = "Regressor key", example = "linear.fwd.fp32")),
    responses(
        (status = 200, description = "The plot", content_type = "image/svg+xml", body = String),
        (status = 404, description = "No model with this key", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "The key has no active version, or its active version has no stored validation rows (trained before they were stored: retrain with `force`)", body = Problem, content_type = "application/problem+json"),
        (status = 500, description = "Server error", body = Problem, content_type = "application/problem+json"),
    ))]
pub async fn regressor_plot(State(state): State<AppState>, Path(key): Path<String>) -> Result<Response, ApiError> {
    let svg = state.service.regressor_plot(&key).await?;
    Ok(([(header::CONTENT_TYPE, "image/svg+xml"), (header::CACHE_CONTROL, "no-cache")], svg).into_response())
}

/// Show a job's state and progress.
#[utoipa::path(get, path = "/v1/jobs/{id}", tag = "jobs",
    params(("id" = i64, Path, description = "Job id")),
    responses(
        (status = 200, description = "The job", body = JobView),
        (status = 400, description = "The id is not a number", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such job", body = Problem, content_type = "application/problem+json"),
        (status = 500, description = "Server error", body = Problem, content_type = "application/problem+json"),
    ))]
pub async fn get_job(State(state): State<AppState>, Path(id): Path<String>) -> Result<Json<JobView>, ApiError> {
    let id: i64 = id.parse().map_err(|_| {
        ApiError::new(
            StatusCode::BAD_REQUEST,
            "invalid-path",
            "Invalid job id",
            format!("job id {id:?} is not a number"),
        )
    })?;
    Ok(Json(state.service.job(id).await?.into()))
}
