//! `/v1/gpus`: the built-in GPU catalog.

use axum::extract::Path;
use axum::Json;
use serde::Serialize;
use utoipa::ToSchema;

use super::problem::{ApiError, Problem};
use crate::hw::{catalog, lookup, CatalogGpu, GpuSpec};

/// A catalog GPU: its description (with the datasheet it comes from) and its aliases.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct CatalogEntry {
    #[serde(flatten)]
    pub spec: GpuSpec,
    /// Other names that resolve to this GPU (as PyTorch, nvidia-smi, Nsight report them).
    pub aliases: Vec<String>,
}

impl From<&CatalogGpu> for CatalogEntry {
    fn from(g: &CatalogGpu) -> Self {
        CatalogEntry { spec: g.spec.clone(), aliases: g.aliases.iter().map(|a| a.to_string()).collect() }
    }
}

/// List the GPU catalog.
#[utoipa::path(get, path = "/v1/gpus", tag = "gpus",
    responses((status = 200, description = "Every catalog GPU", body = Vec<CatalogEntry>)))]
pub async fn list_gpus() -> Json<Vec<CatalogEntry>> {
    Json(catalog().iter().map(CatalogEntry::from).collect())
}

/// Show one catalog GPU by name or alias (`NVIDIA H100 80GB HBM3` finds `H100-SXM5-80GB`).
#[utoipa::path(get, path = "/v1/gpus/{name}", tag = "gpus",
    params(("name" = String, Path, description = "Catalog name or alias", example = "NVIDIA H100 80GB HBM3")),
    responses(
        (status = 200, description = "The GPU", body = CatalogEntry),
        (status = 404, description = "Not in the catalog", body = Problem, content_type = "application/problem+json"),
    ))]
pub async fn get_gpu(Path(name): Path<String>) -> Result<Json<CatalogEntry>, ApiError> {
    lookup(&name)
        .map(|g| Json(CatalogEntry::from(g)))
        .ok_or_else(|| ApiError::not_found(format!("GPU {name:?} is not in the catalog")))
}
