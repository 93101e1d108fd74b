//! `/v1/systems`: create, list and show systems.

use axum::extract::{Path, State};
use axum::http::{header, StatusCode};
use axum::Json;
use serde::Serialize;
use utoipa::ToSchema;

use super::json::ValidJson;
use super::problem::{ApiError, Problem};
use super::AppState;
use crate::comm::calibrated::SystemCalibration;
use crate::hw::{GpuRef, GpuSpec, Link, System, SystemSpec};
use crate::store::systems::StoredSystem;

/// A stored system as the API shows it: the description as given plus the resolved GPU.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct SystemView {
    pub name: String,
    /// The GPU as given: a catalog name or an inline description.
    pub gpu: GpuRef,
    /// The GPU's full description after catalog resolution.
    pub gpu_spec: GpuSpec,
    pub gpus_per_node: u32,
    pub nodes: u32,
    /// gpus_per_node · nodes.
    pub total_gpus: u64,
    /// Per-GPU, unidirectional.
    pub intra_node: Link,
    /// Per-node (all NICs), unidirectional.
    pub inter_node: Link,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Shipped with every new database.
    pub preset: bool,
    /// RFC 3339 UTC.
    pub created_at: String,
    /// The communication calibration fitted to the system's OSU / nccl-tests samples (link classes and
    /// collective groups with their fitted α, β / busbw, sample counts and residuals); absent until calibrated.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub calibration: Option<SystemCalibration>,
}

impl SystemView {
    fn new(stored: StoredSystem, resolved: System) -> SystemView {
        SystemView {
            name: stored.spec.name,
            gpu: stored.spec.gpu,
            gpu_spec: resolved.gpu,
            gpus_per_node: stored.spec.gpus_per_node,
            nodes: stored.spec.nodes,
            total_gpus: resolved.gpus_per_node as u64 * resolved.nodes as u64,
            intra_node: stored.spec.intra_node,
            inter_node: stored.spec.inter_node,
            description: stored.spec.description,
            preset: stored.preset,
            created_at: stored.created_at,
            calibration: None,
        }
    }
}

/// Create a system.
///
/// `gpu` is a catalog name (`GET /v1/gpus`) or a full description. Bandwidths are unidirectional GB/s
/// (10⁹ B/s): `intra_node` per GPU, `inter_node` per node (all NICs together).
#[utoipa::path(post, path = "/v1/systems", tag = "systems", request_body = SystemSpec,
    security(("bearer" = [])),
    responses(
        (status = 201, description = "Created", body = SystemView,
         headers(("Location" = String, description = "URL of the new system"))),
        (status = 400, description = "Body is not JSON", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "A system with this name exists", body = Problem, content_type = "application/problem+json"),
        (status = 413, description = "Body too large", body = Problem, content_type = "application/problem+json"),
        (status = 415, description = "Body is not application/json", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "Invalid field (unknown GPU, zero nodes, …)", body = Problem, content_type = "application/problem+json"),
        (status = 401, description = "No or unknown API key", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "Read-only or revoked key", body = Problem, content_type = "application/problem+json"),
        (status = 429, description = "Over the key's rate limit (Retry-After)", body = Problem, content_type = "application/problem+json"),
        (status = 500, description = "Server error", body = Problem, content_type = "application/problem+json"),
    ))]
pub async fn create_system(
    State(state): State<AppState>,
    ValidJson(spec): ValidJson<SystemSpec>,
) -> Result<(StatusCode, [(header::HeaderName, String); 1], Json<SystemView>), ApiError> {
    let (stored, resolved) = state.service.create_system(&spec).await?;
    let location = format!("/v1/systems/{}", stored.spec.name);
    Ok((StatusCode::CREATED, [(header::LOCATION, location)], Json(SystemView::new(stored, resolved))))
}

/// List systems (presets and created ones), by name.
#[utoipa::path(get, path = "/v1/systems", tag = "systems",
    responses(
        (status = 200, description = "All systems", body = Vec<SystemView>),
        (status = 500, description = "Server error", body = Problem, content_type = "application/problem+json"),
    ))]
pub async fn list_systems(State(state): State<AppState>) -> Result<Json<Vec<SystemView>>, ApiError> {
    let stored = state.service.store.list_systems().await.map_err(|e| ApiError::internal(&e))?;
    let gpus = state.service.gpus.load();
    let mut out = Vec::with_capacity(stored.len());
    for s in stored {
        let resolved =
            s.spec.resolve_with(&gpus).map_err(|e| ApiError::internal(&format!("system {}: {e}", s.spec.name)))?;
        out.push(SystemView::new(s, resolved));
    }
    Ok(Json(out))
}

/// Show one system.
#[utoipa::path(get, path = "/v1/systems/{name}", tag = "systems",
    params(("name" = String, Path, description = "System name", example = "dgx-h100")),
    responses(
        (status = 200, description = "The system", body = SystemView),
        (status = 404, description = "No such system", body = Problem, content_type = "application/problem+json"),
        (status = 500, description = "Server error", body = Problem, content_type = "application/problem+json"),
    ))]
pub async fn get_system(State(state): State<AppState>, Path(name): Path<String>) -> Result<Json<SystemView>, ApiError> {
    let (stored, resolved) = state.service.system(&name).await?;
    let mut view = SystemView::new(stored, resolved);
    view.calibration = state.service.calibration(&name).await?.map(|c| (*c).clone());
    Ok(Json(view))
}

/// Calibrate a system's communication models now.
///
/// Fits α and β per link class (send/recv within and across nodes) and busbw per measured collective group by
/// robust least squares on the system's stored OSU / nccl-tests samples; predictions then use them. Uploads of
/// communication samples for a system also queue this in the background.
#[utoipa::path(post, path = "/v1/systems/{name}/calibrate", tag = "systems",
    params(("name" = String, Path, description = "System name", example = "dgx-h100")),
    security(("bearer" = [])),
    responses(
        (status = 200, description = "The new calibration", body = SystemCalibration),
        (status = 404, description = "No such system", body = Problem, content_type = "application/problem+json"),
        (status = 401, description = "No or unknown API key", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "Read-only or revoked key", body = Problem, content_type = "application/problem+json"),
        (status = 429, description = "Over the key's rate limit (Retry-After)", body = Problem, content_type = "application/problem+json"),
        (status = 500, description = "Server error", body = Problem, content_type = "application/problem+json"),
    ))]
pub async fn calibrate_system(
    State(state): State<AppState>,
    Path(name): Path<String>,
) -> Result<Json<SystemCalibration>, ApiError> {
    Ok(Json(state.service.calibrate(&name).await?))
}
