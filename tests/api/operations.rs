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

/// While a start is in flight (the bundle install `app::complete` runs after the server listens), the router
/// answers `/healthz`, says how far the start is on `/readyz`, and refuses every `/v1` request at once with 503
/// `starting`, the same progress and a `Retry-After`; once the start is ready, it serves them.
#[tokio::test]
async fn a_start_in_flight_is_live_not_ready_and_holds_back_the_api() {
    use perfcast::service::startup::Phase;
    let app = TestApp::new().await;
    let startup = &app.service.startup;
    startup.begin();
    startup.set_totals(1000, 10);
    startup.set_phase(Phase::WritingSamples);
    startup.add_samples(250);
    assert_eq!(app.get("/healthz").await.status, 200);
    let p = app.get("/readyz").await.problem(503);
    assert_eq!(p["type"], "urn:perfcast:problem:starting");
    assert_eq!(p["startup"]["phase"], "writing_samples");
    assert_eq!(
        (p["startup"]["samples_done"].as_u64(), p["startup"]["samples_total"].as_u64()),
        (Some(250), Some(1000))
    );
    assert_eq!((p["startup"]["models_done"].as_u64(), p["startup"]["models_total"].as_u64()), (Some(0), Some(10)));
    assert!(p["detail"].as_str().unwrap().contains("250 of 1,000 samples"), "{p}");
    let example: serde_json::Value = serde_json::from_str(include_str!(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/examples/serving/llama-3.1-70b_tp4_h100.json"
    )))
    .unwrap();
    for r in [app.get("/v1/systems").await, app.post_json("/v1/predictions/inference", &example).await] {
        let p = r.problem(503);
        assert_eq!(p["type"], "urn:perfcast:problem:starting");
        assert_eq!(p["startup"]["samples_done"], 250);
        let retry: u64 = r.headers["retry-after"].to_str().unwrap().parse().unwrap();
        assert!((1..=30).contains(&retry), "{retry}");
    }
    // The pages and the API's description are served meanwhile.
    assert_eq!(app.get("/ui/").await.status, 200);
    assert_eq!(app.get("/openapi.json").await.status, 200);
    startup.set_phase(Phase::Ready);
    assert_eq!(app.get("/v1/systems").await.status, 200);
    // A failed start says why.
    startup.fail("disk full".into());
    let p = app.get("/readyz").await.problem(503);
    assert!(p["detail"].as_str().unwrap().contains("disk full"), "{p}");
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
