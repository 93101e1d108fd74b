//! Two real server processes (the built `perfcast` binary) on one PostgreSQL database — what running several
//! replicas behind a load balancer relies on:
//!
//! - a system and an upload written through A are read through B;
//! - a retrain asked of A runs on the elected trainer and its models are served by both within seconds; the
//!   other replica's 2 s poll reloads them, the trainer's does not (it swapped them in itself);
//! - the trainer killed with SIGKILL mid-retrain: the survivor wins the election, claims the job once its lease
//!   expires and finishes it (`attempts` 2);
//! - uploads sent to both replicas around the kill: every acknowledged one is stored whole (0 lost);
//! - `/readyz` reports the database;
//! - two replicas started at once on an empty database without a configured key: exactly one creates and prints a
//!   first key, which both accept.
//!
//! Needs `PERFCAST_TEST_POSTGRES_URL` (`scripts/test` starts a throwaway server); without it the test prints a
//! notice and passes.

mod support;

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use support::{Reply, Server};

const KEY: &str = "pck_c0ffee000002_7c8d2f0a4b6e1d3c5a7f9b0e2d4c6a8f1e3b5d7c9a0f2e4d6b8c1a3e5f7d9b0c";

/// A fresh database on the PostgreSQL server of `PERFCAST_TEST_POSTGRES_URL` (`scripts/test` starts one), or
/// `None` — with a note that the `test` is skipped — when the variable is not set.
fn postgres_database(test: &str) -> Option<String> {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let Some(url) = rt.block_on(perfcast::store::testing::fresh_postgres_database()) else {
        eprintln!("note: PERFCAST_TEST_POSTGRES_URL is not set; the {test} test is skipped");
        return None;
    };
    Some(url.unwrap())
}

fn get(port: u16, path: &str) -> Reply {
    support::get(port, path).unwrap_or_else(|e| panic!("GET {path} on {port}: {e}"))
}

fn post(port: u16, path: &str, body: &Value) -> Reply {
    support::post_json(port, KEY, path, body).unwrap_or_else(|e| panic!("POST {path} on {port}: {e}"))
}

/// A replica `name` (log `<dir>/<name>.log`) on the database at `url`: no bundled models, no automatic retrain,
/// a 3 s job lease (a killed trainer's job is re-claimed quickly).
fn replica(dir: &Path, name: &str, url: &str) -> Server {
    let envs = [
        ("PERFCAST_BUNDLED_MODELS", "false"),
        ("PERFCAST_AUTO_RETRAIN", "false"),
        ("PERFCAST_RETRAIN_GRID", "full"),
        ("PERFCAST_PER_GPU_MIN_SAMPLES", "1000000"),
        ("PERFCAST_JOB_LEASE_S", "3"),
    ];
    Server::start(
        Path::new(env!("CARGO_BIN_EXE_perfcast")),
        dir,
        url,
        Some(KEY),
        dir.join(format!("{name}.log")),
        &envs,
    )
}

/// Waits (60 s at most) until `/readyz` answers 200 and returns its body; panics with the log otherwise.
fn ready(server: &mut Server) -> Value {
    server.wait_ready(Duration::from_secs(60)).unwrap_or_else(|e| panic!("{e}:\n{}", server.log()))
}

/// A perfcast JSON-lines upload of `n` operator samples (distinct per `serial`): its bytes and profile id.
fn upload(serial: u64, n: u64) -> (Vec<u8>, String) {
    let mut text = String::new();
    for i in 0..n {
        let (m, k) = (64 * (1 + (i * 7 + serial) % 97), 64 * (1 + (i * 13 + serial * 3) % 89));
        let t = 2.0 * (m * 4096 * k) as f64 / 0.6e9 + 4.0 + (i % 17) as f64 * 0.1;
        text.push_str(&format!(
            "{{\"op\": \"linear\", \"phase\": \"fwd\", \"dtype\": \"fp16\", \"gpu\": \"H100-SXM5-80GB\", \
             \"dims\": {{\"M\": {m}, \"N\": 4096, \"K\": {k}}}, \"time_us\": {t:.4}, \"attributes\": {{\"upload\": {serial}}}}}\n"
        ));
    }
    let id = hex::encode(Sha256::digest(text.as_bytes()))[..16].to_string();
    (text.into_bytes(), id)
}

fn send_upload(port: u16, bytes: &[u8]) -> std::io::Result<Reply> {
    let auth = format!("Bearer {KEY}");
    let headers = [("Authorization", auth.as_str()), ("Content-Type", "application/x-ndjson")];
    support::http(port, "POST", "/v1/profiles?format=perfcast_jsonl", &headers, bytes)
}

fn wait_job(port: u16, id: i64, limit: Duration) -> Value {
    let t0 = Instant::now();
    loop {
        let j = get(port, &format!("/v1/jobs/{id}")).json();
        if j["state"] == "succeeded" || j["state"] == "failed" {
            return j;
        }
        assert!(t0.elapsed() < limit, "job {id} not done in {limit:?}: {j}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn two_replicas_share_one_postgres_database() {
    let Some(url) = postgres_database("two-replica") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    // Both start at once on the new database: one migrates, both serve.
    let (mut a, mut b) = (replica(dir.path(), "a", &url), replica(dir.path(), "b", &url));
    let (ra, rb) = (ready(&mut a), ready(&mut b));
    assert_eq!((ra["database"].as_str(), rb["database"].as_str()), (Some("postgres"), Some("postgres")));

    // A system written through A is read through B.
    let system = json!({"name": "lab", "gpu": "H100-SXM5-80GB", "gpus_per_node": 8, "nodes": 2,
        "intra_node": {"kind": "nvlink", "bandwidth_gbs": 450.0, "latency_us": 2.0},
        "inter_node": {"kind": "ib", "bandwidth_gbs": 50.0, "latency_us": 5.0}});
    let created = post(a.port, "/v1/systems", &system);
    assert_eq!(created.status, 201, "{}", String::from_utf8_lossy(&created.body));
    assert_eq!(get(b.port, "/v1/systems/lab").status, 200);

    // Uploads through A are read through B; the same bytes through both store one profile.
    let mut acknowledged = Vec::new();
    for serial in 0..6 {
        let (bytes, id) = upload(serial, 3000);
        let port = if serial % 2 == 0 { a.port } else { b.port };
        let r = send_upload(port, &bytes).unwrap();
        assert!(r.status == 201, "{} {}", r.status, String::from_utf8_lossy(&r.body));
        acknowledged.push((id, 3000));
    }
    let (dup, dup_id) = upload(0, 3000);
    assert_eq!(send_upload(b.port, &dup).unwrap().status, 200, "the same bytes through B are a duplicate");
    assert_eq!(get(b.port, &format!("/v1/profiles/{dup_id}")).status, 200);

    // A retrain asked of A runs on the trainer; both replicas serve its models within seconds.
    let job = post(a.port, "/v1/regressors/retrain", &json!({"grid": "minimal", "force": true}));
    assert_eq!(job.status, 202, "{}", String::from_utf8_lossy(&job.body));
    let done = wait_job(b.port, job.json()["id"].as_i64().unwrap(), Duration::from_secs(120));
    assert_eq!(done["state"], "succeeded", "{done}");
    let t0 = Instant::now();
    while ready(&mut a)["active_models"].as_u64() == Some(0) || ready(&mut b)["active_models"].as_u64() == Some(0) {
        assert!(t0.elapsed() < Duration::from_secs(10), "a replica does not serve the new models");
        std::thread::sleep(Duration::from_millis(100));
    }
    // The other replica got them through its poll; the trainer swapped them in itself and, one poll (2 s) later,
    // has not loaded them a second time.
    std::thread::sleep(Duration::from_millis(2500));
    const RELOADED: &str = "active models changed in the database; reloaded";
    let (trainer_log, other_log) =
        if a.log().contains("elected trainer") { (a.log(), b.log()) } else { (b.log(), a.log()) };
    assert!(other_log.contains(RELOADED), "the replica that did not train never reloaded:\n{other_log}");
    assert!(!trainer_log.contains(RELOADED), "the trainer reloaded the models it had just swapped in:\n{trainer_log}");

    // The trainer is killed mid-retrain; the survivor finishes the job. Uploads go to both meanwhile.
    let trainer_is_a = a.log().contains("elected trainer");
    assert!(trainer_is_a || b.log().contains("elected trainer"), "no trainer elected");
    let (mut trainer, survivor) = if trainer_is_a { (a, b) } else { (b, a) };
    let job = post(survivor.port, "/v1/regressors/retrain", &json!({"force": true}));
    assert_eq!(job.status, 202);
    let id = job.json()["id"].as_i64().unwrap();
    let t0 = Instant::now();
    while get(survivor.port, &format!("/v1/jobs/{id}")).json()["state"] != "running" {
        assert!(t0.elapsed() < Duration::from_secs(30), "the retrain never started");
        std::thread::sleep(Duration::from_millis(10));
    }
    let (trainer_port, survivor_port) = (trainer.port, survivor.port);
    let uploader = std::thread::spawn(move || {
        let mut acked = Vec::new();
        for serial in 100..130u64 {
            let (bytes, id) = upload(serial, 500);
            let port = if serial % 2 == 0 { trainer_port } else { survivor_port };
            if let Ok(r) = send_upload(port, &bytes) {
                if r.status == 201 || r.status == 200 {
                    acked.push((id, 500));
                }
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        acked
    });
    std::thread::sleep(Duration::from_millis(200));
    trainer.kill();
    acknowledged.extend(uploader.join().unwrap());
    let done = wait_job(survivor.port, id, Duration::from_secs(300));
    assert_eq!(done["state"], "succeeded", "{done}\n{}", survivor.log());
    assert!(done["attempts"].as_i64().unwrap() >= 2, "the job was not re-run: {done}");
    assert!(survivor.log().contains("elected trainer"), "the survivor was never elected");

    // Not one acknowledged upload lost.
    for (id, samples) in &acknowledged {
        let p = get(survivor.port, &format!("/v1/profiles/{id}"));
        assert_eq!(p.status, 200, "acknowledged upload {id} lost");
        assert_eq!(p.json()["samples"].as_u64(), Some(*samples), "upload {id}");
    }
    eprintln!("two replicas: {} acknowledged uploads all stored; retrain re-run after the kill", acknowledged.len());
}

#[test]
fn two_replicas_starting_on_an_empty_database_create_one_first_key() {
    let Some(url) = postgres_database("first-key") else {
        return;
    };
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let bin = Path::new(env!("CARGO_BIN_EXE_perfcast"));
    let envs = [("PERFCAST_BUNDLED_MODELS", "false"), ("PERFCAST_AUTO_RETRAIN", "false")];
    // Both start at once with no configured key.
    let mut a = Server::start(bin, dir.path(), &url, None, dir.path().join("a.log"), &envs);
    let mut b = Server::start(bin, dir.path(), &url, None, dir.path().join("b.log"), &envs);
    ready(&mut a);
    ready(&mut b);
    // A printed key is `pck_` + 12 hex digits + `_` + 64 hex digits: 81 characters.
    let printed = |log: &str| -> Vec<String> {
        log.split_whitespace().filter(|w| w.starts_with("pck_") && w.len() == 81).map(str::to_string).collect()
    };
    let (la, lb) = (a.log(), b.log());
    let keys: Vec<String> = printed(&la).into_iter().chain(printed(&lb)).collect();
    assert_eq!(keys.len(), 1, "first keys printed: {keys:?}\n--- a ---\n{la}\n--- b ---\n{lb}");
    let stored = rt.block_on(async {
        let store = perfcast::store::Store::connect(&url).await.unwrap();
        let keys = store.list_keys().await.unwrap();
        store.close().await;
        keys
    });
    assert_eq!(stored.len(), 1, "{stored:?}");
    assert_eq!(format!("pck_{}_", stored[0].key_id), keys[0][..17], "the stored key is the printed one");
    // The printed key writes through either replica.
    for (server, name) in [(&a, "lab-a"), (&b, "lab-b")] {
        let system = json!({"name": name, "gpu": "H100-SXM5-80GB", "gpus_per_node": 8, "nodes": 1,
            "intra_node": {"kind": "nvlink", "bandwidth_gbs": 450.0, "latency_us": 2.0},
            "inter_node": {"kind": "ib", "bandwidth_gbs": 50.0, "latency_us": 5.0}});
        let r = support::post_json(server.port, &keys[0], "/v1/systems", &system).unwrap();
        assert_eq!(r.status, 201, "{}", r.text());
    }
}

#[test]
fn db_copy_moves_a_sqlite_installation_to_postgres() {
    let Some(url) = postgres_database("db copy") else {
        return;
    };
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("perfcast.db");
    // A SQLite installation with the bundled measurements and models, a system, an upload and a key.
    let source = format!("sqlite://{}", db.display());
    let run = |args: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_perfcast"))
            .args(args)
            .current_dir(dir.path())
            .env_remove("PERFCAST_TEST_POSTGRES_URL")
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).to_string(),
            String::from_utf8_lossy(&out.stderr).to_string(),
        )
    };
    let (code, _, err) = run(&["keys", "create", "--name", "ci", "--database-url", &source]);
    assert_eq!(code, Some(0), "{err}");
    let counts = |store: &perfcast::store::Store| {
        rt.block_on(async {
            (
                store.list_profiles(1, 0).await.unwrap().1,
                store.list_regressors().await.unwrap().len(),
                store.list_systems().await.unwrap().len(),
                store.list_keys().await.unwrap().len(),
                store.models_fingerprint().await.unwrap(),
            )
        })
    };
    let src = rt.block_on(perfcast::store::Store::connect(&source)).unwrap();
    let startup = std::sync::Arc::default();
    rt.block_on(perfcast::app::install_bundle(&src, &startup, perfcast::app::Show::Quiet)).unwrap();
    let before = counts(&src);
    rt.block_on(src.close());
    assert!(before.0 > 0 && before.1 > 0, "{before:?}");

    let (code, out, err) = run(&["db", "copy", "--from", &source, "--to", &url]);
    assert_eq!(code, Some(0), "{err}");
    let copied: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(copied["copied"]["profiles"].as_u64(), Some(before.0));
    let dst = rt.block_on(perfcast::store::Store::connect(&url)).unwrap();
    assert_eq!(counts(&dst), before, "the copy differs from its source");
    // The copy serves: new rows get ids after the copied ones; a second copy into it is refused.
    let job = rt.block_on(dst.create_job("calibrate", &json!({"system": "dgx-h100"}), false)).unwrap();
    assert!(job.id > 0);
    rt.block_on(dst.close());
    let (code, _, err) = run(&["db", "copy", "--from", &source, "--to", &url]);
    assert_eq!(code, Some(2), "{err}");
}
