//! RFC 9457 problem details: every error the API returns, as `application/problem+json`.

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use utoipa::ToSchema;

use crate::service::startup::StartupProgress;
use crate::service::ServiceError;

/// Media type of every error body.
pub const PROBLEM_JSON: &str = "application/problem+json";

/// Where in the input a problem is: a field path (`parallelism.tp`) and/or a line and column of the body.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct ProblemLocation {
    /// Dotted path of the offending field in the request (`model.heads`, `gpu.sm_count`); absent for syntax errors.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub field: Option<String>,
    /// 1-based line of the request body — or, with `field` naming a text member (a training run's `log`), of that
    /// text.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub line: Option<u64>,
    /// 1-based column of the request body.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub column: Option<u64>,
    /// What is wrong there.
    pub message: String,
}

/// An RFC 9457 problem details object.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
#[schema(example = json!({
    "type": "urn:perfcast:problem:invalid-configuration",
    "title": "The configuration is impossible",
    "status": 422,
    "detail": "parallelism.tp: heads 64 are not divisible by tp 3: each tensor-parallel rank needs whole heads",
    "errors": [{"field": "parallelism.tp",
                "message": "heads 64 are not divisible by tp 3: each tensor-parallel rank needs whole heads"}]
}))]
pub struct Problem {
    /// URI naming the problem type (`urn:perfcast:problem:<kind>`; see the README's error table).
    #[serde(rename = "type")]
    pub type_uri: String,
    /// Short summary of the problem type.
    pub title: String,
    /// HTTP status code.
    pub status: u16,
    /// What happened in this occurrence.
    pub detail: String,
    /// Each offending field or input position.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub errors: Vec<ProblemLocation>,
    /// While the server starts (`/readyz`, and the 503 `starting` of every `/v1` request meanwhile): how far the
    /// start is — the bundle install's phase and samples and models written of their totals.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub startup: Option<StartupProgress>,
}

/// An error on its way to becoming a problem response.
#[derive(Debug)]
pub struct ApiError {
    pub status: StatusCode,
    /// Short slug for the type URI (`invalid-json`).
    pub kind: &'static str,
    pub title: &'static str,
    pub detail: String,
    pub errors: Vec<ProblemLocation>,
    /// The start's progress (503s while the server starts).
    pub startup: Option<StartupProgress>,
    /// Seconds for a `Retry-After` header, when the client should retry.
    pub retry_after_s: Option<u64>,
}

impl ApiError {
    /// A problem of `status` with no location.
    pub fn new(status: StatusCode, kind: &'static str, title: &'static str, detail: impl Into<String>) -> ApiError {
        ApiError { status, kind, title, detail: detail.into(), errors: Vec::new(), startup: None, retry_after_s: None }
    }

    /// 503 `starting` for a request that needs what the start is still installing or loading: the progress, and
    /// `Retry-After` from its rate so far.
    pub fn starting(progress: StartupProgress) -> ApiError {
        let retry = progress.retry_after_s();
        let mut e = ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "starting",
            "Starting",
            format!("perfcast is starting ({}); retry in {retry} s", progress.summary()),
        );
        e.startup = Some(progress);
        e.retry_after_s = Some(retry);
        e
    }

    /// Adds a field location.
    pub fn at_field(mut self, field: impl Into<String>, message: impl Into<String>) -> ApiError {
        self.errors.push(ProblemLocation {
            field: Some(field.into()),
            line: None,
            column: None,
            message: message.into(),
        });
        self
    }

    /// 404 for a route or resource that does not exist.
    pub fn not_found(detail: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::NOT_FOUND, "not-found", "Not found", detail)
    }

    /// 500: logs the cause, tells the client only that it is ours.
    pub fn internal(cause: &dyn std::fmt::Display) -> ApiError {
        tracing::error!(error = %cause, "internal error");
        ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal",
            "Internal server error",
            "the server failed to handle the request; the error is logged",
        )
    }

    /// The problem body.
    pub fn problem(&self) -> Problem {
        Problem {
            type_uri: format!("urn:perfcast:problem:{}", self.kind),
            title: self.title.to_string(),
            status: self.status.as_u16(),
            detail: self.detail.clone(),
            errors: self.errors.clone(),
            startup: self.startup.clone(),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = serde_json::to_vec(&self.problem()).unwrap_or_default(); // ok: Problem always serializes
        let mut res = (self.status, body).into_response();
        res.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static(PROBLEM_JSON));
        if let Some(s) = self.retry_after_s {
            res.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from(s));
        }
        res
    }
}

impl From<ServiceError> for ApiError {
    fn from(e: ServiceError) -> Self {
        match e {
            ServiceError::NotFound { what, field } => {
                let detail = format!("{what} not found");
                let err = ApiError::not_found(detail.clone());
                match field {
                    Some(f) => err.at_field(f, detail),
                    None => err,
                }
            }
            ServiceError::Conflict(what) => {
                ApiError::new(StatusCode::CONFLICT, "conflict", "Already exists", format!("{what} already exists"))
            }
            ServiceError::NotReady { detail } => {
                ApiError::new(StatusCode::CONFLICT, "not-ready", "Not available in the current state", detail)
            }
            ServiceError::Invalid { field, message } => ApiError::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                "invalid-configuration",
                "The request is well-formed but impossible",
                format!("{field}: {message}"),
            )
            .at_field(field, message),
            ServiceError::Unparseable { line, column, message } => {
                let at = match (line, column) {
                    (Some(l), Some(c)) => format!(" (line {l}, column {c})"),
                    (Some(l), None) => format!(" (line {l})"),
                    _ => String::new(),
                };
                let mut err = ApiError::new(
                    StatusCode::UNPROCESSABLE_ENTITY,
                    "unparseable-file",
                    "The uploaded file cannot be parsed",
                    format!("{message}{at}"),
                );
                err.errors.push(ProblemLocation { field: None, line, column, message });
                err
            }
            ServiceError::Internal(cause) => ApiError::internal(&cause),
        }
    }
}
