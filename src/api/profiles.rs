//! `/v1/profiles`: uploads of profiler and benchmark outputs, and their samples.

use std::collections::BTreeMap;

use axum::body::Bytes;
use axum::extract::{FromRequest, Path, Query, Request, State};
use axum::http::{header, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use super::problem::{ApiError, Problem};
use super::AppState;
use crate::samples::Rejected;
use crate::service::profiles::{UploadOutcome, UploadParams};
use crate::store::profiles::ProfileRecord;

/// Rejected rows shown in a response (the total is always given).
const MAX_REJECTED_SHOWN: usize = 100;

/// A stored profile.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct ProfileView {
    /// Profile id (first 16 hex digits of the content's SHA-256).
    pub id: String,
    /// Format the file was parsed as.
    pub format: String,
    /// Samples stored.
    pub samples: u64,
    /// Rows read but not kept, with line and reason (at most 100 shown).
    pub rejected: Vec<Rejected>,
    pub rejected_total: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub system: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gpu: Option<String>,
    /// Free labels given as query parameters.
    pub labels: BTreeMap<String, String>,
    /// Size of the uploaded (decoded) file, bytes.
    pub raw_bytes: u64,
    /// SHA-256 of the uploaded (decoded) bytes, hex.
    pub sha256: String,
    pub created_at: String,
    /// URL of the profile's samples.
    pub samples_url: String,
}

impl From<ProfileRecord> for ProfileView {
    fn from(p: ProfileRecord) -> Self {
        let rejected_total = p.rejected.len();
        let mut rejected = p.rejected;
        rejected.truncate(MAX_REJECTED_SHOWN);
        ProfileView {
            samples_url: format!("/v1/profiles/{}/samples", p.id),
            id: p.id,
            format: p.format,
            samples: p.samples,
            rejected,
            rejected_total,
            system: p.system,
            gpu: p.gpu,
            labels: p.labels,
            raw_bytes: p.raw_bytes,
            sha256: p.sha256,
            created_at: p.created_at,
        }
    }
}

/// The answer to an upload.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct UploadResponse {
    #[serde(flatten)]
    pub profile: ProfileView,
    /// Samples accepted by kind (`op`, `comm`, `kernel`, `timer`) in this upload; empty for a duplicate.
    pub samples_by_kind: BTreeMap<String, u64>,
    /// True when the same bytes were uploaded before: nothing new was stored and `id` is the earlier upload's.
    pub duplicate: bool,
}

impl From<UploadOutcome> for UploadResponse {
    /// The answer to an upload, as `POST /v1/profiles` and `perfcast import` print it.
    fn from(out: UploadOutcome) -> Self {
        UploadResponse {
            profile: out.profile.into(),
            samples_by_kind: out.by_kind.into_iter().map(|(k, v)| (k.to_string(), v)).collect(),
            duplicate: out.duplicate,
        }
    }
}

/// Query parameters of an upload. Any other parameter is stored as a free label.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[allow(dead_code)]
pub struct UploadQuery {
    /// `perfcast_jsonl`, `perfcast_csv`, `neusight_csv`, `ncu_csv`, `rocprof_csv`, `torch_trace`, `tau`, `osu`,
    /// `nccl_tests`, `nccl_tests_json`, `aiconfigurator` (detected from the content when absent).
    format: Option<String>,
    /// System the file was measured on (its GPU is the default device; communication samples belong to it).
    system: Option<String>,
    /// GPU the file was measured on when the file does not name it (catalog name or alias).
    gpu: Option<String>,
    /// Precision when the format does not record it (NeuSight files: fp32).
    dtype: Option<String>,
    /// Ranks of the measured collectives when the file does not record it (OSU collectives, TAU, traces).
    ranks: Option<u32>,
    /// Nodes the ranks span, when the file does not say.
    nodes: Option<u32>,
    /// Ranks per node, when the file does not say.
    gpus_per_node: Option<u32>,
    /// The collective an old nccl-tests log measured (it does not name it).
    collective: Option<String>,
    /// Example free label.
    ci_run: Option<String>,
    /// Example free label.
    git_sha: Option<String>,
}

/// A raw body with problem+json rejections (413 over the upload limit).
pub struct RawBody(pub Bytes);

impl<S: Send + Sync> FromRequest<S> for RawBody {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        Bytes::from_request(req, state).await.map(RawBody).map_err(|rejection| {
            if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
                ApiError::new(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    "payload-too-large",
                    "The body is larger than the server accepts",
                    format!("{} (the limit is upload_limit_bytes after gzip decoding)", rejection.body_text()),
                )
            } else {
                ApiError::new(
                    StatusCode::BAD_REQUEST,
                    "unreadable-body",
                    "The body could not be read",
                    rejection.body_text(),
                )
            }
        })
    }
}

/// Every file part of a multipart body: (file name, or the field name, or empty; bytes).
async fn multipart_files(req: Request, state: &AppState) -> Result<Vec<(String, Vec<u8>)>, ApiError> {
    let bad = |detail: String| {
        ApiError::new(StatusCode::BAD_REQUEST, "invalid-multipart", "The multipart body cannot be read", detail)
    };
    let mut mp = axum::extract::Multipart::from_request(req, state).await.map_err(|e| bad(e.body_text()))?;
    let mut files = Vec::new();
    loop {
        let field = match mp.next_field().await {
            Ok(Some(f)) => f,
            Ok(None) => break,
            Err(e) if e.status() == StatusCode::PAYLOAD_TOO_LARGE => {
                return Err(ApiError::new(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    "payload-too-large",
                    "The body is larger than the server accepts",
                    format!("{} (the limit is upload_limit_bytes)", e.body_text()),
                ))
            }
            Err(e) => return Err(bad(e.body_text())),
        };
        let name = field.file_name().or(field.name()).unwrap_or("").to_string();
        let bytes = field.bytes().await.map_err(|e| {
            if e.status() == StatusCode::PAYLOAD_TOO_LARGE {
                ApiError::new(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    "payload-too-large",
                    "The body is larger than the server accepts",
                    e.body_text(),
                )
            } else {
                bad(e.body_text())
            }
        })?;
        files.push((name, bytes.to_vec()));
    }
    Ok(files)
}

fn query(uri: &Uri) -> Result<BTreeMap<String, String>, ApiError> {
    Query::<BTreeMap<String, String>>::try_from_uri(uri).map(|q| q.0).map_err(|e| {
        ApiError::new(StatusCode::BAD_REQUEST, "invalid-query", "The query string cannot be read", e.body_text())
    })
}

/// Upload a profile.
///
/// The body is the file itself (`Content-Encoding: gzip` accepted), or several files of one run as
/// `multipart/form-data` (TAU's `profile.N.C.T` of every rank, rocprof outputs with their companions). Formats: perfcast's sample format (JSON lines
/// or CSV, see the README), NeuSight operator CSVs, and the profiler formats listed in the README. Identical bytes
/// uploaded again answer `200` with the first upload's id and `"duplicate": true`. The raw bytes are kept
/// (compressed) with the samples, all in one transaction. New samples wake the retraining worker.
#[utoipa::path(post, path = "/v1/profiles", tag = "profiles", params(UploadQuery),
    request_body(content(
        (String = "application/x-ndjson"), (String = "text/csv"), (String = "application/json"),
        (Vec<u8> = "application/octet-stream"), (Vec<u8> = "multipart/form-data")),
        description = "The profile file", example = json!("{\"op\": \"linear\", \"phase\": \"fwd\", \"dtype\": \"bf16\", \"gpu\": \"H100\", \"dims\": {\"M\": 4096, \"N\": 4096, \"K\": 4096}, \"time_us\": 191.3}")),
    security(("bearer" = [])),
    responses(
        (status = 201, description = "Stored", body = UploadResponse),
        (status = 200, description = "The same bytes were uploaded before", body = UploadResponse),
        (status = 400, description = "Unreadable body or query", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "Unknown system", body = Problem, content_type = "application/problem+json"),
        (status = 413, description = "Over upload_limit_bytes", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "Unknown format/GPU, unparseable file (line, column), or no usable sample", body = Problem, content_type = "application/problem+json"),
        (status = 401, description = "No or unknown API key", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "Read-only or revoked key", body = Problem, content_type = "application/problem+json"),
        (status = 429, description = "Over the key's rate limit (Retry-After)", body = Problem, content_type = "application/problem+json"),
        (status = 500, description = "Server error", body = Problem, content_type = "application/problem+json"),
    ))]
pub async fn upload_profile(State(state): State<AppState>, req: Request) -> Result<Response, ApiError> {
    let uri = req.uri().clone();
    let multipart = req
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.to_ascii_lowercase().starts_with("multipart/form-data"));
    let mut q = query(&uri)?;
    let params = UploadParams {
        format: q.remove("format"),
        system: q.remove("system"),
        gpu: q.remove("gpu"),
        dtype: q.remove("dtype"),
        ranks: q.remove("ranks"),
        nodes: q.remove("nodes"),
        gpus_per_node: q.remove("gpus_per_node"),
        collective: q.remove("collective"),
        labels: q,
    };
    let out = if multipart {
        let files = multipart_files(req, &state).await?;
        state.service.upload_profile_files(&files, &params).await?
    } else {
        let RawBody(body) = RawBody::from_request(req, &state).await?;
        state.service.upload_profile(&body, &params).await?
    };
    let status = if out.duplicate { StatusCode::OK } else { StatusCode::CREATED };
    let location = format!("/v1/profiles/{}", out.profile.id);
    let body = UploadResponse::from(out);
    Ok((status, [(header::LOCATION, location)], Json(body)).into_response())
}

/// Paging parameters.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct Page {
    /// Items per page, 1–1000. Default 100.
    #[serde(default = "default_limit")]
    #[param(minimum = 1, maximum = 1000)]
    pub limit: u32,
    /// Items to skip. Default 0.
    #[serde(default)]
    pub offset: u64,
}

fn default_limit() -> u32 {
    100
}

impl Page {
    fn from_uri(uri: &Uri) -> Result<Page, ApiError> {
        let p = Query::<Page>::try_from_uri(uri).map(|q| q.0).map_err(|e| {
            ApiError::new(StatusCode::BAD_REQUEST, "invalid-query", "The query string cannot be read", e.body_text())
        })?;
        if !(1..=1000).contains(&p.limit) {
            return Err(ApiError::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                "invalid-query",
                "Invalid paging",
                "limit must be 1–1000",
            )
            .at_field("limit", "must be 1–1000"));
        }
        Ok(p)
    }
}

/// A page of profiles.
#[derive(Debug, Serialize, ToSchema)]
pub struct ProfileList {
    pub profiles: Vec<ProfileView>,
    pub total: u64,
    pub limit: u32,
    pub offset: u64,
}

/// List profiles, newest first.
#[utoipa::path(get, path = "/v1/profiles", tag = "profiles", params(Page),
    responses(
        (status = 200, description = "A page of profiles", body = ProfileList),
        (status = 400, description = "Bad query", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "Bad paging values", body = Problem, content_type = "application/problem+json"),
        (status = 500, description = "Server error", body = Problem, content_type = "application/problem+json"),
    ))]
pub async fn list_profiles(State(state): State<AppState>, uri: Uri) -> Result<Json<ProfileList>, ApiError> {
    let page = Page::from_uri(&uri)?;
    let (profiles, total) =
        state.service.store.list_profiles(page.limit, page.offset).await.map_err(|e| ApiError::internal(&e))?;
    Ok(Json(ProfileList {
        profiles: profiles.into_iter().map(Into::into).collect(),
        total,
        limit: page.limit,
        offset: page.offset,
    }))
}

/// Show one profile.
#[utoipa::path(get, path = "/v1/profiles/{id}", tag = "profiles",
    params(("id" = String, Path, description = "Profile id")),
    responses(
        (status = 200, description = "The profile", body = ProfileView),
        (status = 404, description = "No such profile", body = Problem, content_type = "application/problem+json"),
        (status = 500, description = "Server error", body = Problem, content_type = "application/problem+json"),
    ))]
pub async fn get_profile(State(state): State<AppState>, Path(id): Path<String>) -> Result<Json<ProfileView>, ApiError> {
    let p = state.service.store.get_profile(&id).await.map_err(crate::service::ServiceError::from)?;
    Ok(Json(p.into()))
}

/// One stored sample.
#[derive(Debug, Serialize, ToSchema)]
pub struct SampleView {
    /// `op`, `comm`, `kernel` or `timer`.
    pub kind: String,
    pub id: i64,
    /// The sample's fields (by kind: op/phase/dtype/gpu/dims/time_us; collective/bytes/ranks/…; name/duration_us/…).
    #[schema(value_type = Object)]
    pub data: serde_json::Value,
}

/// A page of samples.
#[derive(Debug, Serialize, ToSchema)]
pub struct SamplePage {
    pub samples: Vec<SampleView>,
    pub total: u64,
    pub limit: u32,
    pub offset: u64,
    /// URL of the next page, absent on the last.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next: Option<String>,
}

/// A page of one profile's samples (operator, then communication, then kernel samples).
#[utoipa::path(get, path = "/v1/profiles/{id}/samples", tag = "profiles",
    params(("id" = String, Path, description = "Profile id"), Page),
    responses(
        (status = 200, description = "A page of samples", body = SamplePage),
        (status = 400, description = "Bad query", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such profile", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "Bad paging values", body = Problem, content_type = "application/problem+json"),
        (status = 500, description = "Server error", body = Problem, content_type = "application/problem+json"),
    ))]
pub async fn profile_samples(
    State(state): State<AppState>,
    Path(id): Path<String>,
    uri: Uri,
) -> Result<Json<SamplePage>, ApiError> {
    let page = Page::from_uri(&uri)?;
    let (rows, total) = state
        .service
        .store
        .profile_samples(&id, page.limit, page.offset)
        .await
        .map_err(crate::service::ServiceError::from)?;
    let end = page.offset + rows.len() as u64;
    Ok(Json(SamplePage {
        samples: rows.into_iter().map(|r| SampleView { kind: r.kind.to_string(), id: r.id, data: r.data }).collect(),
        total,
        limit: page.limit,
        offset: page.offset,
        next: (end < total).then(|| format!("/v1/profiles/{id}/samples?limit={}&offset={end}", page.limit)),
    }))
}
