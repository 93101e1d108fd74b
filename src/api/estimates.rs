//! `/v1/estimates/*`: single-operator estimates.

use axum::extract::State;
use axum::Json;

use super::json::ValidJson;
use super::problem::{ApiError, Problem};
use super::AppState;
use crate::service::estimates::{OperatorEstimate, OperatorEstimateRequest};

/// Estimate one operator call.
///
/// Returns the analytic (roofline, wave-quantized) time and the learned prediction t_analytic · exp(r̂) from the
/// active regressor of (operator, phase, dtype) — the GPU's own model when one validated better, else the
/// cross-GPU one — with its `source`.
#[utoipa::path(post, path = "/v1/estimates/operator", tag = "estimates", request_body = OperatorEstimateRequest,
    responses(
        (status = 200, description = "The estimate", body = OperatorEstimate),
        (status = 400, description = "Body is not JSON", body = Problem, content_type = "application/problem+json"),
        (status = 413, description = "Body too large", body = Problem, content_type = "application/problem+json"),
        (status = 415, description = "Body is not application/json", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "Unknown GPU or operator, bad dims, precision the GPU lacks", body = Problem, content_type = "application/problem+json"),
        (status = 500, description = "Server error", body = Problem, content_type = "application/problem+json"),
    ))]
pub async fn estimate_operator(
    State(state): State<AppState>,
    ValidJson(req): ValidJson<OperatorEstimateRequest>,
) -> Result<Json<OperatorEstimate>, ApiError> {
    Ok(Json(state.service.estimate_operator(&req).await?))
}
