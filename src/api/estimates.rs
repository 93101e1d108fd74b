//! `/v1/estimates/*`: operator, kernel and collective estimates.

use axum::extract::State;
use axum::Json;

use super::json::ValidJson;
use super::problem::{ApiError, Problem};
use super::AppState;
use crate::service::comm_estimates::{CommEstimateRequest, CommEstimateResponse};
use crate::service::estimates::{OperatorEstimate, OperatorEstimateRequest};
use crate::service::kernel_estimates::{KernelEstimateRequest, KernelEstimateResponse};

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

/// Estimate a GPU kernel.
///
/// Hong–Kim MWP/CWP (ISCA 2009, with S0's two-level cache extension), the hierarchical roofline, and S2's pipe
/// demand with the kernel's ceiling and efficiency, for an explicit kernel (`kernel`: Hong–Kim counts; `work`:
/// FLOPs, instructions and bytes) or a stored Nsight Compute / rocprof sample (`sample_id`), plus the learned
/// correction when a kernel regressor is active.
#[utoipa::path(post, path = "/v1/estimates/kernel", tag = "estimates", request_body = KernelEstimateRequest,
    responses(
        (status = 200, description = "The estimates", body = KernelEstimateResponse),
        (status = 400, description = "Body is not JSON", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "Unknown sample", body = Problem, content_type = "application/problem+json"),
        (status = 413, description = "Body too large", body = Problem, content_type = "application/problem+json"),
        (status = 415, description = "Body is not application/json", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "Missing or invalid input, naming the field", body = Problem, content_type = "application/problem+json"),
        (status = 500, description = "Server error", body = Problem, content_type = "application/problem+json"),
    ))]
pub async fn estimate_kernel(
    State(state): State<AppState>,
    ValidJson(req): ValidJson<KernelEstimateRequest>,
) -> Result<Json<KernelEstimateResponse>, ApiError> {
    Ok(Json(state.service.estimate_kernel(&req).await?))
}

/// Estimate a collective on a system.
///
/// Every algorithm of MODELS.md §3.2 over the system's links (the fastest chosen), the system's calibration when
/// it has one (its measured group's fit, or the algorithms over calibrated links), and the learned correction
/// when a communication regressor is active; with algbw and busbw in nccl-tests conventions.
#[utoipa::path(post, path = "/v1/estimates/comm", tag = "estimates", request_body = CommEstimateRequest,
    responses(
        (status = 200, description = "The estimate", body = CommEstimateResponse),
        (status = 400, description = "Body is not JSON", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "Unknown system", body = Problem, content_type = "application/problem+json"),
        (status = 413, description = "Body too large", body = Problem, content_type = "application/problem+json"),
        (status = 415, description = "Body is not application/json", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "Invalid placement or field", body = Problem, content_type = "application/problem+json"),
        (status = 500, description = "Server error", body = Problem, content_type = "application/problem+json"),
    ))]
pub async fn estimate_comm(
    State(state): State<AppState>,
    ValidJson(req): ValidJson<CommEstimateRequest>,
) -> Result<Json<CommEstimateResponse>, ApiError> {
    Ok(Json(state.service.estimate_comm(&req).await?))
}
