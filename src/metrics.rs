//! Prometheus metrics: request counts and latency histograms per route, uploads and samples, job durations,
//! active model versions. One process-wide recorder (installed on first use); `GET /metrics` renders it.

use std::sync::OnceLock;
use std::time::Instant;

use axum::body::Body;
use axum::extract::MatchedPath;
use axum::http::Request;
use axum::middleware::Next;
use axum::response::Response;
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};

/// Latency buckets, seconds: 0.1 ms … 30 s.
const BUCKETS_S: [f64; 14] =
    [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0, 5.0, 30.0];

/// The process-wide recorder's handle (installed on first call).
pub fn handle() -> &'static PrometheusHandle {
    static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();
    HANDLE.get_or_init(|| {
        let builder = PrometheusBuilder::new().set_buckets(&BUCKETS_S).unwrap_or_else(|_| PrometheusBuilder::new());
        let recorder = builder.build_recorder();
        let handle = recorder.handle();
        // Another recorder may exist (a library embedding perfcast); then our metrics go to it and /metrics is
        // empty rather than failing.
        let _ = metrics::set_global_recorder(recorder);
        handle
    })
}

/// Middleware: counts requests by method, route template and status, and times them.
pub async fn track(req: Request<Body>, next: Next) -> Response {
    let method = req.method().to_string();
    let route =
        req.extensions().get::<MatchedPath>().map(|p| p.as_str().to_string()).unwrap_or_else(|| "unmatched".into());
    let start = Instant::now();
    let res = next.run(req).await;
    let status = res.status().as_u16().to_string();
    metrics::counter!("perfcast_http_requests_total", "method" => method.clone(), "route" => route.clone(), "status" => status)
        .increment(1);
    metrics::histogram!("perfcast_http_request_duration_seconds", "method" => method, "route" => route)
        .record(start.elapsed().as_secs_f64());
    res
}

/// An accepted upload and its samples by kind.
pub fn upload(format: &str, duplicate: bool, by_kind: &[(&str, u64)]) {
    metrics::counter!("perfcast_uploads_total", "format" => format.to_string(), "duplicate" => duplicate.to_string())
        .increment(1);
    for (kind, n) in by_kind {
        metrics::counter!("perfcast_samples_total", "kind" => kind.to_string()).increment(*n);
    }
}

/// A finished background job.
pub fn job(kind: &str, ok: bool, seconds: f64) {
    metrics::histogram!("perfcast_job_duration_seconds", "kind" => kind.to_string(), "ok" => ok.to_string())
        .record(seconds);
}

/// The active version of every model key.
pub fn active_models(versions: &[(String, i64)]) {
    metrics::gauge!("perfcast_active_models").set(versions.len() as f64);
    for (key, v) in versions {
        metrics::gauge!("perfcast_active_model_version", "key" => key.clone()).set(*v as f64);
    }
}
