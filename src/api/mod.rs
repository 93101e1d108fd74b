//! The HTTP API: extract and validate, call the [`Service`], map to DTOs. No SQL, no math.
//!
//! Every route is declared once with utoipa; [`router`] returns the axum router and the OpenAPI document built
//! from the same declarations, so the served spec cannot drift from the code.
//!
//! May import: `service` (and the types it returns), `jobs` (typed job parameters), `store` record types, the
//! domain core's request/response types, `metrics`. Must not import `app`, `cli` or `eval`; no SQL and no math here.

pub mod auth;
pub mod estimates;
pub mod gpus;
pub mod health;
pub mod inference;
pub mod json;
pub mod openapi_refine;
pub mod predictions;
pub mod problem;
pub mod profiles;
pub mod regressors;
pub mod systems;
pub mod training_runs;
pub mod ui;

use axum::body::Body;
use axum::http::{header, Request, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::Router;
use utoipa::OpenApi;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::service::Service;
use problem::{ApiError, PROBLEM_JSON};

/// What every handler can reach.
#[derive(Debug, Clone)]
pub struct AppState {
    pub service: Service,
    /// Authentication settings and the per-key rate limiter.
    pub auth: std::sync::Arc<auth::AuthState>,
}

/// Declares the bearer-token security scheme (`Authorization: Bearer pck_…`) so `/docs` can authorize.
struct BearerScheme;

impl utoipa::Modify for BearerScheme {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(
                HttpBuilder::new()
                    .scheme(HttpAuthScheme::Bearer)
                    .description(Some("perfcast API key (perfcast keys create). Writes need a write key."))
                    .build(),
            ),
        );
    }
}

#[derive(OpenApi)]
#[openapi(
    info(
        title = "perfcast",
        description = "Predicts how fast distributed GPU applications run: LLM training iterations (S1's \
operator-level model with a 1F1B pipeline timeline), LLM serving (TTFT, TPOT, throughput and KV-cache capacity \
under continuous batching), GPU kernels and collectives, from analytic models corrected \
by learned ones.\n\nConventions: JSON, snake_case, units in field names (`_us`, `_s`, `_gbs` = 10⁹ B/s, `_gib`, \
`_tflops`). Every error is RFC 9457 `application/problem+json` with `errors[]` naming the field (or the line and \
column of the body).",
        license(name = "Apache-2.0"),
    ),
    modifiers(&BearerScheme),
    tags(
        (name = "predictions", description = "Training-iteration and LLM-serving predictions"),
        (name = "estimates", description = "Operator, kernel and collective estimates, analytic and learned"),
        (name = "profiles", description = "Uploads of profiler and benchmark outputs, and their samples"),
        (name = "regressors", description = "Learned correction models and their retraining"),
        (name = "jobs", description = "Background jobs"),
        (name = "systems", description = "Clusters: a GPU, nodes and links"),
        (name = "gpus", description = "The built-in GPU catalog"),
        (name = "operations", description = "Health, readiness and metrics"),
    )
)]
struct ApiDoc;

/// The API router (without state) and its OpenAPI document. `upload_limit_bytes` bounds profile and training-run
/// uploads (after gzip decoding); other routes use the app-wide JSON body limit.
pub fn router(upload_limit_bytes: usize) -> (Router<AppState>, utoipa::openapi::OpenApi) {
    let uploads = OpenApiRouter::new()
        .routes(routes!(profiles::upload_profile, profiles::list_profiles))
        .routes(routes!(training_runs::upload_training_run, training_runs::list_training_runs))
        .layer(axum::extract::DefaultBodyLimit::max(upload_limit_bytes))
        .layer(tower_http::decompression::RequestDecompressionLayer::new());
    let (router, openapi) = OpenApiRouter::with_openapi(ApiDoc::openapi())
        .merge(uploads)
        .routes(routes!(profiles::get_profile))
        .routes(routes!(profiles::profile_samples))
        .routes(routes!(regressors::retrain))
        .routes(routes!(regressors::list_regressors))
        .routes(routes!(regressors::get_regressor))
        .routes(routes!(regressors::regressor_plot))
        .routes(routes!(regressors::get_job))
        .routes(routes!(estimates::estimate_operator))
        .routes(routes!(estimates::estimate_kernel))
        .routes(routes!(estimates::estimate_comm))
        .routes(routes!(systems::calibrate_system))
        .routes(routes!(predictions::predict_training))
        .routes(routes!(predictions::search_training))
        .routes(routes!(predictions::training_timeline))
        .routes(routes!(inference::predict_inference))
        .routes(routes!(inference::search_inference))
        .routes(routes!(inference::inference_timeline))
        .routes(routes!(systems::create_system, systems::list_systems))
        .routes(routes!(systems::get_system))
        .routes(routes!(gpus::list_gpus))
        .routes(routes!(gpus::import_gpu))
        .routes(routes!(gpus::get_gpu))
        .routes(routes!(health::healthz))
        .routes(routes!(health::readyz))
        .routes(routes!(health::metrics))
        .split_for_parts();
    (router, openapi_refine::refine(openapi))
}

/// The OpenAPI document alone (what `/openapi.json` serves and `openapi/openapi.json` holds).
pub fn openapi() -> utoipa::openapi::OpenApi {
    router(0).1
}

/// 404 for unknown routes.
pub async fn not_found(req: Request<Body>) -> ApiError {
    ApiError::not_found(format!("no route for {} {}", req.method(), req.uri().path()))
}

/// 405 for a known path with the wrong method.
pub async fn method_not_allowed(req: Request<Body>) -> ApiError {
    ApiError::new(
        StatusCode::METHOD_NOT_ALLOWED,
        "method-not-allowed",
        "Method not allowed",
        format!("{} is not allowed on {}", req.method(), req.uri().path()),
    )
}

/// Holds back every `/v1` request while the server starts (the bundle install and the model loading of a first
/// start, see `crate::service::startup`): 503 `starting` with the progress and `Retry-After`, at once — not a
/// request that hangs until the install is done, nor one answered without the bundled models. `/healthz`,
/// `/readyz`, `/metrics`, the dashboard and the API docs are served meanwhile.
pub async fn hold_while_starting(
    axum::extract::State(state): axum::extract::State<AppState>,
    req: Request<Body>,
    next: Next,
) -> Response {
    if req.uri().path().starts_with("/v1/") && state.service.startup.in_progress() {
        return ApiError::starting(state.service.startup.snapshot()).into_response();
    }
    next.run(req).await
}

/// Safety net: any error response that is not already problem+json (a timeout, a caught panic, a layer's
/// rejection) becomes one, so clients see one error format.
pub async fn problem_for_every_error(req: Request<Body>, next: Next) -> Response {
    let res = next.run(req).await;
    let status = res.status();
    if !(status.is_client_error() || status.is_server_error()) {
        return res;
    }
    let is_problem = res
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with(PROBLEM_JSON));
    if is_problem {
        return res;
    }
    let title = status.canonical_reason().unwrap_or("Error");
    let kind = match status {
        StatusCode::REQUEST_TIMEOUT => "timeout",
        StatusCode::PAYLOAD_TOO_LARGE => "payload-too-large",
        StatusCode::METHOD_NOT_ALLOWED => "method-not-allowed",
        s if s.is_server_error() => "internal",
        _ => "http-error",
    };
    let detail = match status {
        StatusCode::REQUEST_TIMEOUT => "the request took longer than the configured request_timeout_s".to_string(),
        s if s.is_server_error() => "the server failed to handle the request; the error is logged".to_string(),
        _ => title.to_string(),
    };
    let mut out = ApiError::new(status, kind, "Request failed", detail).into_response();
    // Keep headers such as Retry-After or Allow.
    for (name, value) in res.headers() {
        if name != header::CONTENT_TYPE && name != header::CONTENT_LENGTH {
            out.headers_mut().insert(name.clone(), value.clone());
        }
    }
    out
}
