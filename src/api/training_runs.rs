//! `/v1/systems/{name}/training-runs`: upload a training run (its log and configuration) to calibrate the
//! system × framework's training predictions, and list the runs and calibrations.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::Json;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::json::ValidJson;
use super::problem::{ApiError, Problem};
use super::regressors::JobView;
use super::AppState;
use crate::ingest::training_log::LogFormat;
use crate::llm::calibration::TrainingCalibration;
use crate::llm::TrainingRequest;
use crate::service::training_runs::TrainingRunUpload;
use crate::service::ServiceError;
use crate::store::training_runs::StoredTrainingRun;

/// One training run: the log as the framework printed it, its format, and the configuration that ran it.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"format": "megatron",
    "config": {"system": "dgx-h100", "model": "Llama-3.1-8B", "precision": "bf16",
               "parallelism": {"tp": 1, "pp": 1, "dp": 8, "micro_batch": 1, "global_batch": 128}},
    "log": " iteration       10/     100 | elapsed time per iteration (ms): 5012.3 |\n iteration       20/     100 | elapsed time per iteration (ms): 4980.1 |\n"}))]
pub struct TrainingRunBody {
    /// `megatron` (Megatron-LM / NeMo `elapsed time per iteration (ms)` lines), `torchtitan` (its metrics lines;
    /// `tps` is converted with the configuration's global batch, sequence length and GPUs), `mllog` (MLPerf
    /// `:::MLLOG` events with `train_step_time`, s) or `deepspeed` (`CurrSamplesPerSec=` or `iter time (s):`).
    pub format: LogFormat,
    /// The configuration that ran, as the body of `POST /v1/predictions/training` (its `system` must be the
    /// path's; its `framework` is the framework the run calibrates).
    pub config: TrainingRequest,
    /// The log's text (other lines are skipped; at least two step lines, the first 20 % are warm-up).
    pub log: String,
}

/// A stored run.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct TrainingRunView {
    pub id: i64,
    pub system: String,
    pub framework: String,
    pub format: String,
    /// The configuration as it was read (the model resolved).
    #[schema(value_type = Object)]
    pub config: serde_json::Value,
    /// Bytes of the stored log.
    pub log_bytes: u64,
    /// Step lines in the log.
    pub steps: u64,
    /// Of them dropped as warm-up.
    pub warmup_steps: u64,
    /// Median iteration time of the steps after the warm-up, s.
    pub measured_iteration_s: f64,
    /// perfcast's uncalibrated prediction for the configuration when the run was uploaded, s.
    pub predicted_iteration_s: f64,
    /// measured / predicted.
    pub ratio: f64,
    /// RFC 3339 UTC.
    pub created_at: String,
}

impl From<StoredTrainingRun> for TrainingRunView {
    fn from(r: StoredTrainingRun) -> Self {
        TrainingRunView {
            ratio: r.measured_iteration_s / r.predicted_iteration_s,
            id: r.id,
            system: r.system,
            framework: r.framework,
            format: r.format,
            config: r.config,
            log_bytes: r.log_bytes,
            steps: r.steps,
            warmup_steps: r.warmup_steps,
            measured_iteration_s: r.measured_iteration_s,
            predicted_iteration_s: r.predicted_iteration_s,
            created_at: r.created_at,
        }
    }
}

/// The answer to an upload: the stored run and the calibration job it queued.
#[derive(Debug, Serialize, ToSchema)]
pub struct TrainingRunCreated {
    pub run: TrainingRunView,
    /// The system × framework's calibration job (`GET /v1/jobs/{id}`; its result is the new calibration).
    pub job: JobView,
}

/// A system's runs and calibrations.
#[derive(Debug, Serialize, ToSchema)]
pub struct TrainingRunsView {
    /// Oldest first.
    pub runs: Vec<TrainingRunView>,
    /// One per framework with runs: accepted (used by predictions) or rejected, with the reason.
    pub calibrations: Vec<TrainingCalibration>,
}

/// Upload a training run to calibrate the system's training predictions.
///
/// Parses the log's per-iteration step times, drops the first 20 % of the step lines (at least one) as warm-up
/// and takes the median of the rest as the run's iteration time; predicts the configuration (uncalibrated) and
/// stores the pair with the log, and queues the system × framework's calibration job, all in one transaction.
/// The job fits one correction, exp(median ln(measured / predicted)) over the system × framework's runs, and
/// validates it leave-one-out: with at least 3 runs, and only when the held-out calibrated predictions beat the
/// uncalibrated ones, training predictions of that framework on the system are scaled by it (their
/// `calibration` member says so). A step line that does not parse is a 422 naming its line; nothing is stored.
#[utoipa::path(post, path = "/v1/systems/{name}/training-runs", tag = "systems", request_body = TrainingRunBody,
    params(("name" = String, Path, description = "System name", example = "dgx-h100")),
    security(("bearer" = [])),
    responses(
        (status = 201, description = "Stored; the calibration job is queued", body = TrainingRunCreated),
        (status = 400, description = "Body is not JSON", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such system", body = Problem, content_type = "application/problem+json"),
        (status = 413, description = "Body too large", body = Problem, content_type = "application/problem+json"),
        (status = 415, description = "Body is not application/json", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "A log line that does not parse (its line), too few step lines, or an impossible configuration (`config.…`)", body = Problem, content_type = "application/problem+json"),
        (status = 401, description = "No or unknown API key", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "Read-only or revoked key", body = Problem, content_type = "application/problem+json"),
        (status = 429, description = "Over the key's rate limit (Retry-After)", body = Problem, content_type = "application/problem+json"),
        (status = 500, description = "Server error", body = Problem, content_type = "application/problem+json"),
    ))]
pub async fn upload_training_run(
    State(state): State<AppState>,
    Path(name): Path<String>,
    ValidJson(body): ValidJson<TrainingRunBody>,
) -> Result<(StatusCode, Json<TrainingRunCreated>), ApiError> {
    let config_json = serde_json::to_value(&body.config).map_err(|e| ApiError::internal(&e))?;
    let upload = TrainingRunUpload { format: body.format, config: body.config, config_json, log: body.log };
    let (run, job) = state.service.upload_training_run(&name, &upload).await.map_err(|e| {
        let unparseable = matches!(e, ServiceError::Unparseable { .. });
        let mut err = ApiError::from(e);
        if unparseable {
            // The location is a line of the `log` member, not of the request body.
            for at in &mut err.errors {
                at.field = Some("log".into());
            }
        }
        err
    })?;
    Ok((StatusCode::CREATED, Json(TrainingRunCreated { run: run.into(), job: job.into() })))
}

/// List a system's uploaded training runs and its training calibrations.
#[utoipa::path(get, path = "/v1/systems/{name}/training-runs", tag = "systems",
    params(("name" = String, Path, description = "System name", example = "dgx-h100")),
    responses(
        (status = 200, description = "The runs and calibrations", body = TrainingRunsView),
        (status = 404, description = "No such system", body = Problem, content_type = "application/problem+json"),
        (status = 500, description = "Server error", body = Problem, content_type = "application/problem+json"),
    ))]
pub async fn list_training_runs(
    State(state): State<AppState>,
    Path(name): Path<String>,
) -> Result<Json<TrainingRunsView>, ApiError> {
    let t = state.service.training_runs(&name).await?;
    Ok(Json(TrainingRunsView { runs: t.runs.into_iter().map(Into::into).collect(), calibrations: t.calibrations }))
}
