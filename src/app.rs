//! The application: state, router with its layers, startup and graceful shutdown.
//!
//! May import every layer below it (`api`, `service`, `jobs`, `store`, `config`, `metrics`, the core). Imported
//! only by `cli` and the tests.

use std::time::Duration;

use axum::extract::DefaultBodyLimit;
use axum::http::{HeaderName, Request, StatusCode};
use axum::response::IntoResponse;
use axum::{middleware, Router};
use tower_http::catch_panic::CatchPanicLayer;
use tower_http::request_id::{MakeRequestUuid, PropagateRequestIdLayer, SetRequestIdLayer};
use tower_http::timeout::TimeoutLayer;
use tower_http::trace::TraceLayer;
use utoipa_swagger_ui::SwaggerUi;

use crate::api::{self, AppState};
use crate::config::Config;
use crate::jobs::{RetrainParams, WorkerConfig, WorkerHandle};
use crate::service::Service;
use crate::store::{Store, StoreError};

/// Header carrying the request id (taken from the client when present, else generated), echoed in responses and
/// logged in every request span.
pub const REQUEST_ID: &str = "x-request-id";

/// Why the service could not start or stopped abnormally.
#[derive(Debug, thiserror::Error)]
pub enum AppError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("cannot listen on {addr}: {source}")]
    Bind { addr: String, source: std::io::Error },
    #[error("server error: {0}")]
    Serve(std::io::Error),
    #[error("cannot start: {0}")]
    Start(String),
}

/// The complete HTTP application over `service`: API routes, `/openapi.json`, Swagger UI at `/docs`, the dashboard
/// at `/ui/`, and the layers (request id, tracing span per request, body limit, timeout, panic → 500, problem+json
/// for every error).
pub fn build(service: Service, config: &Config) -> Router {
    crate::metrics::handle();
    let (api, openapi) = api::router(config.upload_limit_bytes);
    let request_id = HeaderName::from_static(REQUEST_ID);
    let state = AppState {
        service,
        auth: api::auth::AuthState::new(config.auth_reads, config.rate_limit_per_s, config.rate_limit_burst),
    };
    api.route_layer(middleware::from_fn_with_state(state.clone(), api::auth::authenticate))
        .with_state(state)
        // SwaggerUi serves both the UI (vendored assets, no CDN) and the document at /openapi.json.
        .merge(SwaggerUi::new("/docs").url("/openapi.json", openapi))
        // The dashboard: static pages that call the API from the browser.
        .merge(api::ui::router())
        .fallback(api::not_found)
        .method_not_allowed_fallback(api::method_not_allowed)
        .layer(middleware::from_fn(api::problem_for_every_error))
        .route_layer(middleware::from_fn(crate::metrics::track))
        .layer(CatchPanicLayer::new())
        .layer(TimeoutLayer::with_status_code(
            StatusCode::REQUEST_TIMEOUT,
            Duration::from_secs(config.request_timeout_s.max(1)),
        ))
        .layer(DefaultBodyLimit::max(config.body_limit_bytes))
        .layer(
            tower::ServiceBuilder::new()
                .layer(axum::error_handling::HandleErrorLayer::new(|_: tower::BoxError| async {
                    let mut res = crate::api::problem::ApiError::new(
                        StatusCode::SERVICE_UNAVAILABLE,
                        "overloaded",
                        "Too busy",
                        "the server is handling as many requests as it is configured to (max_concurrent_requests); retry shortly",
                    )
                    .into_response();
                    res.headers_mut().insert(axum::http::header::RETRY_AFTER, axum::http::HeaderValue::from_static("1"));
                    res
                }))
                .layer(tower::load_shed::LoadShedLayer::new())
                .layer(tower::limit::ConcurrencyLimitLayer::new(config.max_concurrent_requests.max(1))),
        )
        .layer(tower_http::sensitive_headers::SetSensitiveRequestHeadersLayer::new([axum::http::header::AUTHORIZATION]))
        .layer(PropagateRequestIdLayer::new(request_id.clone()))
        .layer(TraceLayer::new_for_http().make_span_with(|req: &Request<_>| {
            let id = req.headers().get(REQUEST_ID).and_then(|v| v.to_str().ok()).unwrap_or("-");
            tracing::info_span!("request", method = %req.method(), path = %req.uri().path(), request_id = %id)
        }))
        .layer(SetRequestIdLayer::new(request_id, MakeRequestUuid))
}

/// A started application: the router, the service behind it and the worker task.
#[derive(Debug)]
pub struct Started {
    pub router: Router,
    pub service: Service,
    /// The retraining worker; abort it to stop it (a job in flight is re-run at the next start).
    pub worker: tokio::task::JoinHandle<()>,
}

/// The caps of one simulated serving benchmark from `config` (`serving_max_*`).
pub fn sim_limits(config: &Config) -> crate::llm::serving::SimLimits {
    crate::llm::serving::SimLimits {
        max_requests: config.serving_max_requests,
        max_concurrency: config.serving_max_concurrency,
        max_tokens: config.serving_max_simulated_tokens,
        max_steps: config.serving_max_simulated_steps,
    }
}

/// Starts the application over an open store: installs the bundled measurements and models when the database
/// lacks them (`bundled_models`), loads the active models, spawns the worker, builds the router.
pub async fn start(store: Store, config: &Config) -> Result<Started, AppError> {
    let service = Service::with(store.clone(), crate::learn::registry::shared(), WorkerHandle::default())
        .with_search_inline_max(config.search_inline_max_candidates)
        .with_sim_limits(sim_limits(config));
    provision_key(&service, config).await?;
    if config.bundled_models {
        install_bundle(&store).await?;
    }
    let loaded = service.load_models().await.map_err(|e| AppError::Start(e.to_string()))?;
    tracing::info!(models = loaded, "active models loaded");
    let stale = crate::jobs::stale_models(&store).await?;
    if !stale.is_empty() {
        let params = RetrainParams { force: true, ..Default::default() };
        let job = service.request_retrain(&params).await.map_err(|e| AppError::Start(e.to_string()))?;
        tracing::warn!(models = ?stale, job = job.id,
            "active models trained on another feature list are not served; queued a retrain to replace them");
    }
    crate::metrics::spawn_upkeep();
    // Other processes on the database (replicas on PostgreSQL, `perfcast import` on SQLite) commit models and
    // systems too: poll for them, so every replica serves the same versions within seconds.
    crate::service::replicas::spawn_sync(service.clone(), Duration::from_secs(2));
    let worker = spawn_jobs(&service, config);
    Ok(Started { router: build(service.clone(), config), service, worker })
}

/// Installs the bundle embedded in the binary unless the database has its version ([`crate::bundle::install`]),
/// logging what it did and how long it took. Errors: a bundle that does not read (a build bug), a database error.
pub async fn install_bundle(store: &Store) -> Result<(), AppError> {
    let bundle = crate::bundle::Bundle::embedded().map_err(|e| AppError::Start(e.to_string()))?;
    match crate::bundle::install(store, &bundle, true).await.map_err(|e| AppError::Start(e.to_string()))? {
        Some(r) => {
            tracing::info!(version = %r.version, samples = r.samples, models = r.models, activated = r.activated,
            replaced_profiles = r.removed_profiles, seconds = format!("{:.2}", r.seconds),
            "installed the bundled measurements and models")
        }
        None => tracing::debug!(version = %bundle.manifest.version, "bundled measurements already installed"),
    }
    Ok(())
}

/// The job runner's settings from the service configuration.
pub fn worker_config(config: &Config) -> WorkerConfig {
    WorkerConfig {
        debounce: Duration::from_secs(config.retrain_debounce_s),
        grid: config.retrain_grid,
        per_gpu_min_samples: config.per_gpu_min_samples,
        auto_retrain: config.auto_retrain,
        max_training_rows: config.max_training_rows,
        time_limit: Duration::from_secs(config.retrain_time_limit_s),
        lease: Duration::from_secs(config.job_lease_s.max(3)),
    }
}

/// Starts the job runner ([`crate::jobs::runner`]) for `service`: its store, registry and worker handle, settings
/// from `config`, and the service's search for search jobs. Abort the handle to stop it (a job in flight is re-run
/// at the next start).
pub fn spawn_jobs(service: &Service, config: &Config) -> tokio::task::JoinHandle<()> {
    crate::jobs::spawn(
        service.store.clone(),
        service.registry.clone(),
        worker_config(config),
        service.worker.clone(),
        std::sync::Arc::new(service.clone()),
    )
}

/// Makes sure writes are possible: the configured `api_key` is accepted, or, on a database without any key, a
/// write key is generated and printed once (it is not stored in clear and cannot be shown again). Replicas
/// starting at once on one empty database create one first key between them: the one that creates it prints it,
/// the others log that a key exists.
pub async fn provision_key(service: &Service, config: &Config) -> Result<(), AppError> {
    if let Some(key) = &config.api_key {
        return service.ensure_key(key, "configured").await.map_err(|e| AppError::Start(e.to_string()));
    }
    if service.store.has_keys().await? {
        return Ok(());
    }
    match service.create_first_key("initial").await.map_err(|e| AppError::Start(e.to_string()))? {
        Some(k) => {
            tracing::warn!(key_id = %k.record.key_id, "created the first API key (write scope); it is printed once on stderr");
            eprintln!(
                "\n  perfcast: first API key (write scope) — store it now, it is not shown again:\n\n    {}\n\n  \
                 send it as `Authorization: Bearer <key>` on writes; manage keys with `perfcast keys`.\n",
                k.key
            );
        }
        None => tracing::info!(
            "another process created the first API key at the same moment (printed by it); none created here"
        ),
    }
    Ok(())
}

/// Opens the database (creating and migrating it), binds `config.bind` and serves until SIGINT or SIGTERM, then
/// finishes in-flight requests and closes the database.
pub async fn serve(config: Config) -> Result<(), AppError> {
    let store = Store::connect(&config.database_url()).await?;
    let listener = tokio::net::TcpListener::bind(config.bind)
        .await
        .map_err(|source| AppError::Bind { addr: config.bind.to_string(), source })?;
    let addr = listener.local_addr().map_err(AppError::Serve)?;
    let started = start(store.clone(), &config).await?;
    tracing::info!(%addr, db = %store.url(), "perfcast listening; API docs at http://{addr}/docs");
    axum::serve(listener, started.router).with_graceful_shutdown(shutdown_signal()).await.map_err(AppError::Serve)?;
    // A retrain in flight is abandoned: its job stays `running` and is queued again at the next start.
    started.worker.abort();
    store.close().await;
    tracing::info!("perfcast stopped");
    Ok(())
}

/// Resolves on SIGINT (Ctrl-C) or SIGTERM.
pub async fn shutdown_signal() {
    let ctrl_c = async {
        if let Err(e) = tokio::signal::ctrl_c().await {
            tracing::warn!(error = %e, "cannot listen for Ctrl-C");
            std::future::pending::<()>().await;
        }
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(e) => {
                tracing::warn!(error = %e, "cannot listen for SIGTERM");
                std::future::pending::<()>().await;
            }
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        _ = ctrl_c => {},
        _ = term => {},
    }
    tracing::info!("shutdown signal received; finishing in-flight requests");
}
