//! API keys: writes need a write key, reads are open (or not), keys are stored hashed, revocation, rate limits,
//! the overload answer.

use crate::common::TestApp;
use axum::body::Body;
use axum::http::Request;
use perfcast::config::Config;
use perfcast::service::keys::Scope;
use serde_json::json;

fn system(name: &str) -> Vec<u8> {
    serde_json::to_vec(&json!({"name": name, "gpu": "L4", "gpus_per_node": 2, "nodes": 1,
        "intra_node": {"kind": "pcie", "bandwidth_gbs": 32, "latency_us": 3},
        "inter_node": {"kind": "eth", "bandwidth_gbs": 12.5, "latency_us": 10}}))
    .unwrap()
}

fn post(path: &str, body: Vec<u8>, key: Option<&str>) -> Request<Body> {
    let mut r = Request::post(path).header("content-type", "application/json");
    if let Some(k) = key {
        r = r.header("authorization", format!("Bearer {k}"));
    }
    r.body(Body::from(body)).unwrap()
}

#[tokio::test]
async fn writes_need_a_write_key_reads_do_not() {
    let app = TestApp::new().await;
    let p = app.send_bare(post("/v1/systems", system("a"), None)).await.problem(401);
    assert!(p["detail"].as_str().unwrap().contains("Bearer"));
    let r = app.send_bare(post("/v1/systems", system("a"), None)).await;
    assert_eq!(r.headers["www-authenticate"], "Bearer");
    app.send_bare(post("/v1/systems", system("a"), Some("pck_nonsense"))).await.problem(401);
    let fake = format!("pck_{}_{}", "0".repeat(12), "f".repeat(64));
    app.send_bare(post("/v1/systems", system("a"), Some(&fake))).await.problem(401);

    let reader = app.service.create_key("dash", Scope::Read).await.unwrap();
    let p = app.send_bare(post("/v1/systems", system("a"), Some(&reader.key))).await.problem(403);
    assert!(p["detail"].as_str().unwrap().contains("read scope"));
    assert_eq!(app.send_bare(post("/v1/systems", system("a"), Some(&app.key))).await.status, 201);

    // Reads (GET, predictions, estimates) need no key by default.
    assert_eq!(app.send_bare(Request::get("/v1/systems").body(Body::empty()).unwrap()).await.status, 200);
    let est =
        serde_json::to_vec(&json!({"gpu": "L4", "op": "gelu", "dtype": "fp16", "dims": {"B": 8, "H": 1024}})).unwrap();
    assert_eq!(app.send_bare(post("/v1/estimates/operator", est, None)).await.status, 200);
    // Every write route is guarded.
    for path in ["/v1/profiles", "/v1/gpus/import", "/v1/regressors/retrain", "/v1/systems/dgx-h100/calibrate"] {
        app.send_bare(post(path, b"{}".to_vec(), None)).await.problem(401);
    }
}

#[tokio::test]
async fn keys_are_stored_hashed_and_can_be_revoked() {
    let app = TestApp::new().await;
    let k = app.service.create_key("ci", Scope::Write).await.unwrap();
    let rows: Vec<(String, String)> = sqlx::query_as("SELECT key_id, sha256 FROM api_keys")
        .fetch_all(
            &sqlx::SqlitePool::connect(&format!("sqlite://{}", app.dir.path().join("perfcast.db").display()))
                .await
                .unwrap(),
        )
        .await
        .unwrap();
    assert!(rows.iter().all(|(_, h)| !k.key.contains(h.as_str()) && h.len() == 64));
    let db = std::fs::read(app.dir.path().join("perfcast.db")).unwrap();
    let wal = std::fs::read(app.dir.path().join("perfcast.db-wal")).unwrap_or_default();
    let secret = k.key.rsplit('_').next().unwrap().as_bytes();
    for bytes in [&db, &wal] {
        assert!(!bytes.windows(secret.len()).any(|w| w == secret), "the secret is in the database file");
    }
    assert_eq!(app.send_bare(post("/v1/systems", system("b"), Some(&k.key))).await.status, 201);
    assert_eq!(app.service.revoke_key("ci").await.unwrap(), 1);
    let p = app.send_bare(post("/v1/systems", system("c"), Some(&k.key))).await.problem(403);
    assert!(p["detail"].as_str().unwrap().contains("revoked"));
}

#[tokio::test]
async fn reads_can_require_a_key() {
    let app = TestApp::with_config(Config { auth_reads: true, ..TestApp::config() }).await;
    app.send_bare(Request::get("/v1/systems").body(Body::empty()).unwrap()).await.problem(401);
    let reader = app.service.create_key("dash", Scope::Read).await.unwrap();
    let r = app
        .send_bare(
            Request::get("/v1/systems")
                .header("authorization", format!("Bearer {}", reader.key))
                .body(Body::empty())
                .unwrap(),
        )
        .await;
    assert_eq!(r.status, 200);
}

#[tokio::test]
async fn each_key_is_rate_limited() {
    let app = TestApp::with_config(Config { rate_limit_per_s: 1, rate_limit_burst: 3, ..Config::default() }).await;
    let get = || {
        Request::get("/v1/systems").header("authorization", format!("Bearer {}", app.key)).body(Body::empty()).unwrap()
    };
    for _ in 0..3 {
        assert_eq!(app.send_bare(get()).await.status, 200);
    }
    let r = app.send_bare(get()).await;
    r.problem(429);
    assert!(r.headers["retry-after"].to_str().unwrap().parse::<u64>().unwrap() >= 1);
    // Anonymous reads are not keyed, so not limited here.
    assert_eq!(app.send_bare(Request::get("/v1/systems").body(Body::empty()).unwrap()).await.status, 200);
}

#[test]
fn openapi_declares_the_bearer_scheme_on_writes() {
    let spec = serde_json::to_value(perfcast::api::openapi()).unwrap();
    assert_eq!(spec["components"]["securitySchemes"]["bearer"]["scheme"], "bearer");
    for (path, method) in [
        ("/v1/profiles", "post"),
        ("/v1/systems", "post"),
        ("/v1/gpus/import", "post"),
        ("/v1/regressors/retrain", "post"),
        ("/v1/systems/{name}/calibrate", "post"),
    ] {
        let op = &spec["paths"][path][method];
        assert_eq!(op["security"][0]["bearer"], json!([]), "{method} {path}");
        assert!(op["responses"]["401"].is_object() && op["responses"]["403"].is_object(), "{method} {path}");
    }
}
