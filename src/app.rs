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
use tower_http::classify::ServerErrorsFailureClass;
use tower_http::request_id::{MakeRequestUuid, PropagateRequestIdLayer, SetRequestIdLayer};
use tower_http::timeout::TimeoutLayer;
use tower_http::trace::TraceLayer;
use utoipa_swagger_ui::SwaggerUi;

use crate::api::{self, AppState};
use crate::config::Config;
use crate::jobs::{RetrainParams, WorkerConfig, WorkerHandle};
use crate::service::startup::{Phase, Startup};
use crate::service::Service;
use crate::store::{Store, StoreError};

mod show;
pub use show::Show;

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
        .route_layer(middleware::from_fn_with_state(state.clone(), api::hold_while_starting))
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
        .layer(
            TraceLayer::new_for_http()
                .make_span_with(|req: &Request<_>| {
                    let id = req.headers().get(REQUEST_ID).and_then(|v| v.to_str().ok()).unwrap_or("-");
                    tracing::info_span!("request", method = %req.method(), path = %req.uri().path(), request_id = %id)
                })
                .on_failure(log_failure),
        )
        .layer(SetRequestIdLayer::new(request_id, MakeRequestUuid))
}

/// How a failed response is logged (tower-http's default logs every 5xx at ERROR): a 503 at WARN — it is what
/// `/readyz` and every request answer while a first start installs the bundled models, which a readiness probe
/// polls several times a second — and everything else at ERROR.
fn log_failure(class: ServerErrorsFailureClass, latency: Duration, _span: &tracing::Span) {
    let ms = latency.as_millis();
    match class {
        ServerErrorsFailureClass::StatusCode(StatusCode::SERVICE_UNAVAILABLE) => {
            tracing::warn!(classification = %class, latency_ms = ms, "response failed")
        }
        _ => tracing::error!(classification = %class, latency_ms = ms, "response failed"),
    }
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

/// Starts the application over an open store and returns once it is ready ([`prepare`], then [`complete`]
/// without progress on stderr): the tests' start. `serve` listens between the two.
pub async fn start(store: Store, config: &Config) -> Result<Started, AppError> {
    let service = prepare(store, config).await?;
    let worker = complete(&service, config, Show::Quiet, SamplesInstall::BeforeReady).await?;
    Ok(Started { router: build(service.clone(), config), service, worker })
}

/// The quick first half of a start (milliseconds): the service over `store` with its start marked in progress
/// ([`crate::service::startup`]), and writes made possible ([`provision_key`]). A router built on it answers
/// `/healthz` at once, and `/readyz` and the requests that need the bundle or the models with 503 and the
/// progress until [`complete`] is done.
pub async fn prepare(store: Store, config: &Config) -> Result<Service, AppError> {
    let service = Service::with(store, crate::learn::registry::shared(), WorkerHandle::default())
        .with_search_inline_max(config.search_inline_max_candidates)
        .with_sim_limits(sim_limits(config));
    service.startup.begin();
    provision_key(&service, config).await?;
    Ok(service)
}

/// Where a start installs the bundled samples (the second step of a bundle install, `crate::store::bundles`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SamplesInstall {
    /// Before the start is ready ([`start`]: tests that read the samples at once).
    BeforeReady,
    /// After it is ready, while requests are served; the job runner begins once they are in (`perfcast serve`:
    /// predictions need only the models).
    AfterReady,
}

/// The second half of a start: installs the bundled models when the database lacks them (`bundled_models`;
/// progress on stderr as `show` says), loads the active models (queueing a retrain for those trained on another
/// feature list), starts the metrics upkeep and the replica poller, installs the bundled samples (before or after
/// the start is marked ready, as `samples` says) and starts the job runner once they are in. Returns the task that
/// runs the job runner (and, with [`SamplesInstall::AfterReady`], the samples' install before it). Errors (the
/// start is marked failed with the reason): a database error, an unreadable bundle.
pub async fn complete(
    service: &Service,
    config: &Config,
    show: Show,
    samples: SamplesInstall,
) -> Result<tokio::task::JoinHandle<()>, AppError> {
    let result = complete_inner(service, config, show, samples).await;
    match &result {
        Ok(_) => service.startup.set_phase(Phase::Ready),
        Err(e) => service.startup.fail(e.to_string()),
    }
    result
}

async fn complete_inner(
    service: &Service,
    config: &Config,
    show: Show,
    samples: SamplesInstall,
) -> Result<tokio::task::JoinHandle<()>, AppError> {
    let store = &service.store;
    let (parsed, pending) = if config.bundled_models {
        let after = if samples == SamplesInstall::AfterReady { "; serving while the samples install" } else { "" };
        install_bundled_models(store, &service.startup, show, after).await?
    } else {
        Default::default()
    };
    if let (Some(bundle), SamplesInstall::BeforeReady) = (&pending, samples) {
        install_bundled_samples(store, bundle, &service.startup, show).await?;
    }
    service.startup.set_phase(Phase::LoadingModels);
    let t0 = std::time::Instant::now();
    let loaded = service.load_models_parsed(parsed.0).await.map_err(|e| AppError::Start(e.to_string()))?;
    tracing::info!(models = loaded, seconds = format!("{:.2}", t0.elapsed().as_secs_f64()), "active models loaded");
    let stale = crate::jobs::stale_models(store).await?;
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
    let Some(bundle) = pending.filter(|_| samples == SamplesInstall::AfterReady) else {
        return Ok(spawn_jobs(service, config));
    };
    // After the start is marked ready (the caller does it when this returns): the samples, then the job runner.
    let (store, startup) = (store.clone(), service.startup.clone());
    startup.set_samples_after_ready(true);
    // Lines, not a bar, beside the server's log.
    let show = if show == Show::Bar { Show::Lines } else { show };
    let first = async move {
        // A failure is logged and left to the next start, which finds the version unrecorded and goes on.
        let _ = install_bundled_samples(&store, &bundle, &startup, show).await;
        startup.set_samples_after_ready(false);
    };
    Ok(crate::jobs::spawn_after(
        first,
        service.store.clone(),
        service.registry.clone(),
        worker_config(config),
        service.worker.clone(),
        std::sync::Arc::new(service.clone()),
    ))
}

/// Installs the bundle embedded in the binary unless the database has its version ([`crate::bundle::install`]),
/// both steps, advancing `progress`, telling on stderr what it does as `show` says, and logging what it did.
/// Returns the models it activated, parsed (none when nothing was installed), for [`Service::load_models_parsed`].
/// Errors: a bundle that does not read (a build bug), a database error.
pub async fn install_bundle(
    store: &Store,
    progress: &std::sync::Arc<Startup>,
    show: Show,
) -> Result<crate::bundle::ParsedModels, AppError> {
    let (parsed, pending) = install_bundled_models(store, progress, show, "").await?;
    if let Some(bundle) = pending {
        install_bundled_samples(store, &bundle, progress, show).await?;
    }
    Ok(parsed)
}

/// The first step of installing the embedded bundle ([`crate::bundle::install_models`]): its systems and models,
/// unless the database has its version. Returns the models it activated, parsed, and the bundle when its samples
/// are still to install ([`install_bundled_samples`]). `after` ends the line that says it is done (what happens to
/// the samples).
pub async fn install_bundled_models(
    store: &Store,
    progress: &std::sync::Arc<Startup>,
    show: Show,
    after: &str,
) -> Result<(crate::bundle::ParsedModels, Option<crate::bundle::Bundle>), AppError> {
    let bundle = crate::bundle::Bundle::embedded().map_err(|e| AppError::Start(e.to_string()))?;
    if store.bundle_installed(&bundle.manifest.version).await? {
        tracing::debug!(version = %bundle.manifest.version, "bundled measurements already installed");
        return Ok(Default::default());
    }
    let samples = crate::service::startup::thousands(bundle.manifest.parts.iter().map(|p| p.samples).sum());
    let models = bundle.manifest.models.len();
    let what = format!("installing bundled measurements: {samples} samples, {models} models");
    let reporter = show.report(&what, progress, true);
    let result = crate::bundle::install_models(store, &bundle, true, progress).await;
    match result.map_err(|e| AppError::Start(e.to_string())) {
        Ok(Some(r)) => {
            reporter.finish(&format!("{models} models … done in {:.1} s{after}", r.seconds));
            tracing::info!(version = %bundle.manifest.version, models = r.models, activated = r.activated,
                stored_before = r.stored_before, replaced_profiles = r.removed_profiles,
                seconds = format!("{:.2}", r.seconds), read_seconds = format!("{:.2}", r.read_seconds),
                "installed the bundled models");
            Ok((r.parsed, Some(bundle)))
        }
        Ok(None) => {
            reporter.finish(&format!("{what} … another process installed them"));
            tracing::info!(version = %bundle.manifest.version, "another process installed the bundled measurements");
            Ok(Default::default())
        }
        Err(e) => {
            reporter.finish(&format!("{what} … failed: {e}"));
            Err(e)
        }
    }
}

/// The second step of installing the embedded bundle ([`crate::bundle::install_samples`]): its samples, one
/// transaction per part, then the row that records its version. Tells on stderr and in the log what it did.
/// Errors: a database error.
pub async fn install_bundled_samples(
    store: &Store,
    bundle: &crate::bundle::Bundle,
    progress: &std::sync::Arc<Startup>,
    show: Show,
) -> Result<(), AppError> {
    let total = crate::service::startup::thousands(bundle.manifest.parts.iter().map(|p| p.samples).sum());
    let what = format!("writing {total} bundled samples");
    if !progress.samples_after_ready() {
        progress.set_phase(Phase::WritingSamples);
    }
    let reporter = show.report(&what, progress, false);
    match crate::bundle::install_samples(store, bundle, progress).await {
        Ok(r) => {
            reporter.finish(&format!("{what} … done in {:.1} s", r.seconds));
            tracing::info!(version = %bundle.manifest.version, profiles = r.profiles, samples = r.samples,
                recorded = r.recorded, seconds = format!("{:.2}", r.seconds),
                read_seconds = format!("{:.2}", r.read_seconds), "installed the bundled samples");
            Ok(())
        }
        Err(e) => {
            reporter.finish(&format!("{what} … failed: {e}"));
            tracing::error!(version = %bundle.manifest.version, error = %e,
                "installing the bundled samples failed; the next start goes on where this one stopped");
            Err(AppError::Start(e.to_string()))
        }
    }
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
/// finishes in-flight requests and closes the database. The server listens before the start is complete: a first
/// start installs the bundled measurements and models meanwhile ([`complete`]; `/healthz` answers, `/readyz` says
/// how far it is). A start that fails ends the server with its error.
pub async fn serve(config: Config) -> Result<(), AppError> {
    let store = Store::connect(&config.database_url()).await?;
    let listener = tokio::net::TcpListener::bind(config.bind)
        .await
        .map_err(|source| AppError::Bind { addr: config.bind.to_string(), source })?;
    let addr = listener.local_addr().map_err(AppError::Serve)?;
    let service = prepare(store.clone(), &config).await?;
    let router = build(service.clone(), &config);
    tracing::info!(%addr, db = %store.url(), "perfcast listening; API docs at http://{addr}/docs");
    let server =
        std::future::IntoFuture::into_future(axum::serve(listener, router).with_graceful_shutdown(shutdown_signal()));
    tokio::pin!(server);
    let worker = tokio::select! {
        // A shutdown during the start: the install's transaction is rolled back (the next start installs it).
        served = &mut server => {
            served.map_err(AppError::Serve)?;
            store.close().await;
            tracing::info!("perfcast stopped before its start was complete");
            return Ok(());
        }
        worker = complete(&service, &config, Show::detect(false), SamplesInstall::AfterReady) => worker?,
    };
    tracing::info!(%addr, "perfcast ready");
    server.await.map_err(AppError::Serve)?;
    // A retrain in flight is abandoned: its job stays `running` and is queued again at the next start.
    worker.abort();
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
