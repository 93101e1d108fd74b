//! `/readyz` and `/metrics` through the real router.

use crate::common::TestApp;
use perfcast::config::Config;

#[tokio::test]
async fn readiness_follows_the_model_registry() {
    let not_loaded = TestApp::new().await;
    let p = not_loaded.get("/readyz").await.problem(503);
    assert!(p["detail"].as_str().unwrap().contains("not loaded"));
    let app = TestApp::started(Config { auto_retrain: false, ..TestApp::config() }).await;
    let r = app.get("/readyz").await;
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(r.json()["status"], "ready");
    assert_eq!(r.json()["active_models"], 0);
    app.worker.as_ref().unwrap().abort();
}

#[tokio::test]
async fn metrics_count_requests_per_route_and_uploads() {
    let app = TestApp::new().await;
    for _ in 0..3 {
        assert_eq!(app.get("/v1/systems/dgx-h100").await.status, 200);
    }
    app.get("/v1/systems/nope").await.problem(404);
    let jsonl = b"{\"op\": \"linear\", \"dtype\": \"fp16\", \"gpu\": \"H100\", \"dims\": {\"M\": 64, \"N\": 64, \"K\": 64}, \"time_us\": 9}\n";
    assert_eq!(app.post_bytes("/v1/profiles", jsonl.to_vec(), &[]).await.status, 201);
    let r = app.get("/metrics").await;
    assert_eq!(r.status, 200);
    assert!(r.content_type.starts_with("text/plain"));
    let text = String::from_utf8(r.body).unwrap();
    // Route templates, not raw paths, label the series (bounded cardinality).
    let line = text
        .lines()
        .find(|l| {
            l.starts_with("perfcast_http_requests_total")
                && l.contains("route=\"/v1/systems/{name}\"")
                && l.contains("status=\"200\"")
        })
        .unwrap_or_else(|| panic!("no request counter for /v1/systems/{{name}}:\n{text}"));
    let count: f64 = line.rsplit(' ').next().unwrap().parse().unwrap();
    assert!(count >= 3.0, "{line}");
    assert!(text.contains("perfcast_http_request_duration_seconds_bucket"));
    assert!(text.lines().any(|l| l.starts_with("perfcast_uploads_total") && l.contains("format=\"perfcast_jsonl\"")));
    assert!(text.lines().any(|l| l.starts_with("perfcast_samples_total") && l.contains("kind=\"op\"")));
}
