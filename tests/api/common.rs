//! Test harness: the real router over a real SQLite file in a temporary directory.
#![allow(dead_code)]

use axum::body::Body;
use axum::http::{header, Request, StatusCode};
use axum::Router;
use http_body_util::BodyExt;
use perfcast::config::Config;
use perfcast::service::Service;
use perfcast::store::Store;
use serde_json::Value;
use tower::ServiceExt;

pub struct TestApp {
    /// A write key every request carries (tests of authentication send their own headers through `send`).
    pub key: String,
    pub router: Router,
    pub store: Store,
    pub service: Service,
    pub worker: Option<tokio::task::JoinHandle<()>>,
    pub dir: tempfile::TempDir,
}

pub struct Reply {
    pub status: StatusCode,
    pub content_type: String,
    pub headers: axum::http::HeaderMap,
    pub body: Vec<u8>,
}

impl Reply {
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("body is not JSON ({e}): {}", String::from_utf8_lossy(&self.body)))
    }

    /// Asserts an RFC 9457 problem with `status` and returns it.
    pub fn problem(&self, status: u16) -> Value {
        assert_eq!(self.status.as_u16(), status, "body: {}", String::from_utf8_lossy(&self.body));
        assert_eq!(self.content_type, "application/problem+json");
        let p = self.json();
        assert_eq!(p["status"], status);
        assert!(p["type"].as_str().unwrap().starts_with("urn:perfcast:problem:"));
        assert!(p["title"].is_string() && p["detail"].is_string());
        p
    }
}

impl TestApp {
    pub async fn new() -> TestApp {
        TestApp::with_config(TestApp::config()).await
    }

    /// Test defaults: the per-key rate limit out of the way (tests of it set their own), and no bundled models
    /// (the tests of learning start from an empty database; `tests/api/bundle.rs` tests the bundle).
    pub fn config() -> Config {
        Config { rate_limit_per_s: 1_000_000, rate_limit_burst: 1_000_000, bundled_models: false, ..Config::default() }
    }

    /// The router over a fresh database, without the retraining worker.
    pub async fn with_config(mut config: Config) -> TestApp {
        let dir = tempfile::tempdir().unwrap();
        config.db = dir.path().join("perfcast.db");
        let store = Store::open(&config.db).await.unwrap();
        let service = Service::new(store.clone());
        let key = service.create_key("tests", perfcast::service::keys::Scope::Write).await.unwrap().key;
        let router = perfcast::app::build(service.clone(), &config);
        TestApp { key, router, store, service, worker: None, dir }
    }

    /// The whole application (models loaded, worker running) over a fresh database.
    pub async fn started(mut config: Config) -> TestApp {
        let dir = tempfile::tempdir().unwrap();
        config.db = dir.path().join("perfcast.db");
        let store = Store::open(&config.db).await.unwrap();
        let s = perfcast::app::start(store.clone(), &config).await.unwrap();
        let key = s.service.create_key("tests", perfcast::service::keys::Scope::Write).await.unwrap().key;
        TestApp { key, router: s.router, store, service: s.service, worker: Some(s.worker), dir }
    }

    /// Sends `req` as is (no key added).
    pub async fn send_bare(&self, req: Request<Body>) -> Reply {
        self.dispatch(req).await
    }

    /// Polls a job until it leaves queued/running (panics after `secs`).
    pub async fn wait_job(&self, id: i64, secs: u64) -> Value {
        let start = std::time::Instant::now();
        loop {
            let j = self.get(&format!("/v1/jobs/{id}")).await.json();
            if j["state"] == "succeeded" || j["state"] == "failed" {
                return j;
            }
            assert!(start.elapsed().as_secs() < secs, "job {id} still {} after {secs} s: {j}", j["state"]);
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
    }

    pub async fn post_bytes(&self, path: &str, body: Vec<u8>, headers: &[(&str, &str)]) -> Reply {
        let mut req = Request::post(path);
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        self.send(req.body(Body::from(body)).unwrap()).await
    }

    /// Sends `req` with the test's write key unless it carries an Authorization header already.
    pub async fn send(&self, mut req: Request<Body>) -> Reply {
        if !req.headers().contains_key(header::AUTHORIZATION) {
            let v = format!("Bearer {}", self.key).parse().unwrap();
            req.headers_mut().insert(header::AUTHORIZATION, v);
        }
        self.dispatch(req).await
    }

    async fn dispatch(&self, req: Request<Body>) -> Reply {
        let res = self.router.clone().oneshot(req).await.unwrap();
        let status = res.status();
        let headers = res.headers().clone();
        let content_type =
            headers.get(header::CONTENT_TYPE).map(|v| v.to_str().unwrap().to_string()).unwrap_or_default();
        let body = res.into_body().collect().await.unwrap().to_bytes().to_vec();
        Reply { status, content_type, headers, body }
    }

    pub async fn get(&self, path: &str) -> Reply {
        self.send(Request::get(path).body(Body::empty()).unwrap()).await
    }

    pub async fn post_json(&self, path: &str, body: &Value) -> Reply {
        self.post_raw(path, "application/json", serde_json::to_vec(body).unwrap()).await
    }

    pub async fn post_raw(&self, path: &str, content_type: &str, body: Vec<u8>) -> Reply {
        self.send(Request::post(path).header(header::CONTENT_TYPE, content_type).body(Body::from(body)).unwrap()).await
    }
}

/// The directories of `examples/` that hold requests of other routes than `POST /v1/predictions/training`
/// (`tests/api/examples.rs` maps each to its route); every other directory is named after the system its training
/// requests run on.
pub const NON_TRAINING_EXAMPLE_DIRS: [&str; 4] = ["serving", "search", "estimates", "systems"];

/// Every training request file under `examples/` (the directories named after a system).
pub fn example_requests() -> Vec<(String, Value)> {
    let mut out = Vec::new();
    for system in std::fs::read_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/examples")).unwrap() {
        let system = system.unwrap().path();
        if !system.is_dir() || NON_TRAINING_EXAMPLE_DIRS.iter().any(|d| system.ends_with(d)) {
            continue;
        }
        for f in std::fs::read_dir(&system).unwrap() {
            let f = f.unwrap().path();
            if f.extension().is_some_and(|e| e == "json") {
                let v: Value = serde_json::from_slice(&std::fs::read(&f).unwrap()).unwrap();
                out.push((f.display().to_string(), v));
            }
        }
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}
