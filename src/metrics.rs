//! Prometheus metrics: request counts and latency histograms per route, uploads and samples, job durations,
//! active model versions. One process-wide recorder (installed on first use); `GET /metrics` renders it.
//!
//! A leaf: imports nothing of the crate. The domain core never imports it.

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

/// How often recorded histogram observations are folded into their buckets ([`spawn_upkeep`]).
const UPKEEP_EVERY: std::time::Duration = std::time::Duration::from_secs(5);

/// Starts the recorder's upkeep on the current tokio runtime: every [`UPKEEP_EVERY`] the observations recorded
/// since the last time are folded into the histograms' buckets. The exporter otherwise keeps every raw
/// observation until `/metrics` is scraped, so an unscraped server's memory would grow with its request count
/// (about 8 bytes per request: 110 KiB/s at 14,000 requests/s). The task ends with the runtime.
pub fn spawn_upkeep() -> tokio::task::JoinHandle<()> {
    let handle = handle();
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(UPKEEP_EVERY);
        loop {
            tick.tick().await;
            handle.run_upkeep();
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn upkeep_folds_observations_into_buckets_without_losing_any() {
        let h = handle();
        for i in 0..1000 {
            metrics::histogram!("perfcast_test_upkeep_seconds", "case" => "fold").record(f64::from(i % 4) * 0.001);
        }
        h.run_upkeep();
        h.run_upkeep();
        let text = h.render();
        // 250 observations each of 0, 1, 2, 3 ms: 500 are ≤ 1 ms, all 1000 ≤ 5 ms, sum 1.5 s.
        assert!(text.contains(r#"perfcast_test_upkeep_seconds_count{case="fold"} 1000"#), "{text}");
        assert!(text.contains(r#"perfcast_test_upkeep_seconds_bucket{case="fold",le="0.001"} 500"#), "{text}");
        assert!(text.contains(r#"perfcast_test_upkeep_seconds_bucket{case="fold",le="0.005"} 1000"#), "{text}");
        let sum: f64 = text
            .lines()
            .find_map(|l| l.strip_prefix(r#"perfcast_test_upkeep_seconds_sum{case="fold"} "#))
            .unwrap()
            .parse()
            .unwrap();
        assert!((sum - 1.5).abs() < 1e-9, "{sum}");
    }
}
