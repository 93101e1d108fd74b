//! `/v1/gpus`: the GPU catalog, and imports of measured GPU descriptions (MT4G).

use axum::extract::{Path, Query, State};
use axum::http::{header, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use super::problem::{ApiError, Problem};
use super::profiles::RawBody;
use super::AppState;
use crate::hw::{GpuSpec, KnownGpu};
use crate::service::gpus::GpuImport;

/// A known GPU: its description (with where the numbers come from) and its aliases.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct CatalogEntry {
    #[serde(flatten)]
    pub spec: GpuSpec,
    /// Other names that resolve to this GPU (as PyTorch, nvidia-smi, Nsight report them).
    pub aliases: Vec<String>,
    /// Imported or refined from measurements (MT4G) rather than the built-in datasheet entry.
    pub imported: bool,
}

impl From<KnownGpu> for CatalogEntry {
    fn from(g: KnownGpu) -> Self {
        CatalogEntry { spec: g.spec, aliases: g.aliases, imported: g.imported }
    }
}

/// List every known GPU: the built-in catalog (datasheet numbers) and imported GPUs.
#[utoipa::path(get, path = "/v1/gpus", tag = "gpus",
    responses((status = 200, description = "Every known GPU", body = Vec<CatalogEntry>)))]
pub async fn list_gpus(State(state): State<AppState>) -> Json<Vec<CatalogEntry>> {
    Json(state.service.gpus.load().all().into_iter().map(CatalogEntry::from).collect())
}

/// Show one GPU by name or alias (`NVIDIA H100 80GB HBM3` finds `H100-SXM5-80GB`).
#[utoipa::path(get, path = "/v1/gpus/{name}", tag = "gpus",
    params(("name" = String, Path, description = "Catalog name or alias", example = "NVIDIA H100 80GB HBM3")),
    responses(
        (status = 200, description = "The GPU", body = CatalogEntry),
        (status = 404, description = "Unknown GPU", body = Problem, content_type = "application/problem+json"),
    ))]
pub async fn get_gpu(State(state): State<AppState>, Path(name): Path<String>) -> Result<Json<CatalogEntry>, ApiError> {
    state
        .service
        .gpus
        .load()
        .lookup(&name)
        .map(|g| Json(CatalogEntry::from(g)))
        .ok_or_else(|| ApiError::not_found(format!("GPU {name:?} is not in the catalog")))
}

/// Query of an import.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct ImportQuery {
    /// `mt4g` (the only GPU-description format; default).
    pub format: Option<String>,
    /// Catalog GPU whose peaks a device unknown to the catalog takes (MT4G measures memory, not FLOP/s).
    pub base: Option<String>,
}

/// What an import did.
#[derive(Debug, Serialize, ToSchema)]
pub struct GpuImportResponse {
    pub gpu: CatalogEntry,
    /// A new device (201) rather than a refinement of a known one (200).
    pub created: bool,
    /// Fields the import set (`clock_ghz`, `hierarchy.l2.latency_cycles`, …).
    pub updated: Vec<String>,
}

impl From<GpuImport> for GpuImportResponse {
    /// The answer to an import, as `POST /v1/gpus/import` and `perfcast import` print it.
    fn from(out: GpuImport) -> Self {
        GpuImportResponse { gpu: out.gpu.into(), created: out.created, updated: out.updated }
    }
}

/// Import a GPU description measured by MT4G.
///
/// The body is MT4G's JSON report (or its legacy v1 CSV). Measured cache sizes, latencies (cycles), bandwidths
/// (GiB/s converted to GB/s), clock and SM count refine the catalog GPU the report names (`200`), or create a new
/// GPU with `base`'s peaks (`201`); systems can then reference it by name.
#[utoipa::path(post, path = "/v1/gpus/import", tag = "gpus", params(ImportQuery),
    request_body(content = String, content_type = "application/json", description = "MT4G report"),
    security(("bearer" = [])),
    responses(
        (status = 200, description = "A known GPU refined", body = GpuImportResponse),
        (status = 201, description = "A new GPU", body = GpuImportResponse),
        (status = 400, description = "Unreadable body or query", body = Problem, content_type = "application/problem+json"),
        (status = 413, description = "Body too large", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "Unparseable report (line, column), unknown base or device", body = Problem, content_type = "application/problem+json"),
        (status = 401, description = "No or unknown API key", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "Read-only or revoked key", body = Problem, content_type = "application/problem+json"),
        (status = 429, description = "Over the key's rate limit (Retry-After)", body = Problem, content_type = "application/problem+json"),
        (status = 500, description = "Server error", body = Problem, content_type = "application/problem+json"),
    ))]
pub async fn import_gpu(State(state): State<AppState>, uri: Uri, RawBody(body): RawBody) -> Result<Response, ApiError> {
    let q = Query::<ImportQuery>::try_from_uri(&uri).map(|q| q.0).map_err(|e| {
        ApiError::new(StatusCode::BAD_REQUEST, "invalid-query", "The query string cannot be read", e.body_text())
    })?;
    let out = state.service.import_gpu(&body, q.format.as_deref(), q.base.as_deref()).await?;
    let status = if out.created { StatusCode::CREATED } else { StatusCode::OK };
    let location = format!("/v1/gpus/{}", out.gpu.spec.name);
    let body = GpuImportResponse::from(out);
    Ok((status, [(header::LOCATION, location)], Json(body)).into_response())
}
