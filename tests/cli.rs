//! The `perfcast` binary: `predict` answers like the API; `serve` honours --bind/--db and stops cleanly on
//! SIGTERM.

#[path = "api/common.rs"]
mod common;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::TestApp;

const BIN: &str = env!("CARGO_BIN_EXE_perfcast");

#[tokio::test]
async fn predict_prints_the_same_json_as_the_api() {
    let dir = tempfile::tempdir().unwrap();
    let example = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/perlmutter-a100-40g/gpt-20b_pp4-tp4-dp8.json");
    // Both without the bundled models (TestApp's default): the same database contents.
    let out = Command::new(BIN)
        .args(["--db", dir.path().join("cli.db").to_str().unwrap(), "predict", example])
        .env("PERFCAST_BUNDLED_MODELS", "false")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let cli: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();

    let app = TestApp::new().await;
    let req: serde_json::Value = serde_json::from_slice(&std::fs::read(example).unwrap()).unwrap();
    let api = app.post_json("/v1/predictions/training", &req).await.json();
    assert_eq!(cli, api);
}

#[test]
fn predict_reports_bad_requests_as_problems_on_stderr() {
    let dir = tempfile::tempdir().unwrap();
    let req = dir.path().join("bad.json");
    std::fs::write(
        &req,
        r#"{"system": "dgx-h100", "model": {"layers": 2, "hidden": 64, "heads": 3, "seq_len": 8,
        "vocab": 10}, "parallelism": {}}"#,
    )
    .unwrap();
    let out = Command::new(BIN)
        // `--quiet`: on this new database the command installs the bundled measurements first and would say so
        // on stderr before the problem.
        .args(["--quiet", "--db", dir.path().join("cli.db").to_str().unwrap(), "predict", req.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let problem: serde_json::Value = serde_json::from_slice(&out.stderr).unwrap();
    assert_eq!(problem["status"], 422);
    assert_eq!(problem["errors"][0]["field"], "model.hidden");
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

fn http_get(port: u16, path: &str) -> Option<String> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(s, "GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n").ok()?;
    let mut buf = String::new();
    s.read_to_string(&mut buf).ok()?;
    Some(buf)
}

fn http_post_json(port: u16, path: &str, body: &str) -> Option<String> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(
        s,
        "POST {path} HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\
         Connection: close\r\n\r\n{body}",
        body.len()
    )
    .ok()?;
    let mut buf = String::new();
    s.read_to_string(&mut buf).ok()?;
    Some(buf)
}

/// Status code, lowercased head and body of a raw HTTP/1.1 response.
fn split(reply: &str) -> (u16, String, &str) {
    let (head, body) = reply.split_once("\r\n\r\n").unwrap_or((reply, ""));
    let status = head.split_whitespace().nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
    (status, head.to_ascii_lowercase(), body)
}

/// The README's first command on a new database, from a directory holding nothing but the binary's database: it
/// listens at once — `/healthz` answers while the bundled models install, `/readyz` answers 503 `starting` with the
/// install's progress, and a prediction meanwhile is answered 503 with `Retry-After` rather than held until the
/// install ends; stderr says what it does. Then it is ready, answers from the bundled models (embedded in the
/// binary) while their training samples install (`/readyz` counting them), and stops on SIGTERM.
#[test]
fn serve_listens_at_once_on_a_new_database_says_how_far_its_start_is_and_stops_on_sigterm() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("nested/dir/perfcast.db");
    let port = free_port();
    let stderr = dir.path().join("stderr.log");
    let mut child = Command::new(BIN)
        .args(["serve", "--bind", &format!("127.0.0.1:{port}"), "--db", db.to_str().unwrap()])
        .current_dir(dir.path())
        .env_remove("PERFCAST_BUNDLED_MODELS")
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&stderr).unwrap())
        .spawn()
        .unwrap();
    let start = Instant::now();
    let reply = loop {
        if let Some(r) = http_get(port, "/healthz") {
            break r;
        }
        assert!(start.elapsed() < Duration::from_secs(60), "server did not come up");
        std::thread::sleep(Duration::from_millis(5));
    };
    let listening = start.elapsed();
    assert!(reply.starts_with("HTTP/1.1 200"), "{reply}");
    assert!(reply.contains("\"status\":\"ok\""));
    assert!(reply.to_ascii_lowercase().contains("x-request-id:"), "{reply}");
    assert!(db.exists(), "database file not created");

    // The install's size, from the manifest embedded in the binary.
    let manifest = perfcast::bundle::Bundle::embedded().unwrap().manifest;
    let samples_total: u64 = manifest.parts.iter().map(|p| p.samples).sum();
    let models_total = manifest.models.len() as u64;
    // While it installs (seconds: 231,468 rows), /readyz says how far it is and a prediction is refused at once.
    let example = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/examples/perlmutter-a100-40g/gpt-20b_pp4-tp4-dp8.json"
    ))
    .unwrap();
    let (mut progress, mut refused) = (Vec::new(), None);
    let ready = loop {
        let r = http_get(port, "/readyz").expect("/readyz answers during the start");
        let (status, head, body) = split(&r);
        if status == 200 {
            break serde_json::from_str::<serde_json::Value>(body).unwrap();
        }
        assert_eq!(status, 503, "{r}");
        assert!(head.contains("content-type: application/problem+json"), "{r}");
        let p: serde_json::Value = serde_json::from_str(body).unwrap();
        assert_eq!(p["type"], "urn:perfcast:problem:starting", "{p}");
        progress.push(p["startup"].clone());
        if refused.is_none() {
            let t = Instant::now();
            let r = http_post_json(port, "/v1/predictions/training", &example).unwrap();
            refused = Some((r, t.elapsed()));
        }
        assert!(start.elapsed() < Duration::from_secs(120), "not ready after 120 s: {:?}", progress.last());
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(!progress.is_empty(), "/readyz never answered 503 before ready (healthz after {listening:?})");
    let mut last_done = 0;
    for p in &progress {
        let phase = p["phase"].as_str().unwrap();
        // The models come first and are all a prediction needs: the server is ready before any sample is written.
        assert!(["checking", "reading", "writing_models", "committing", "loading_models"].contains(&phase), "{p}");
        // Totals from the start of the install on (the check for an installed version comes first).
        if phase != "checking" {
            assert_eq!(
                (p["samples_total"].as_u64(), p["models_total"].as_u64()),
                (Some(samples_total), Some(models_total)),
                "{p}"
            );
        }
        assert_eq!(p["samples_done"], 0, "{p}");
        let done = p["models_done"].as_u64().unwrap();
        assert!(done >= last_done && done <= models_total, "models written go up to the total: {progress:?}");
        last_done = done;
    }
    let (refused, took) = refused.unwrap();
    let (status, head, body) = split(&refused);
    assert_eq!(status, 503, "{refused}");
    assert!(took < Duration::from_secs(5), "refused at once, not held until the install ends ({took:?})");
    let retry: u64 = head
        .lines()
        .find_map(|l| l.strip_prefix("retry-after:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no Retry-After: {refused}"));
    assert!((1..=30).contains(&retry), "{refused}");
    let p: serde_json::Value = serde_json::from_str(body).unwrap();
    assert_eq!((p["type"].as_str(), p["status"].as_u64()), (Some("urn:perfcast:problem:starting"), Some(503)));
    // The same progress as /readyz: the install's totals once the check for an installed version has found none
    // (they are set at the end of the check, just before the phase moves on, so a `checking` answer may carry 0 or
    // the totals, never anything else).
    let total = p["startup"]["samples_total"].as_u64();
    if p["startup"]["phase"] == "checking" {
        assert!(total == Some(0) || total == Some(samples_total), "{p}");
    } else {
        assert_eq!(total, Some(samples_total), "{p}");
    }
    assert_eq!(ready["status"], "ready");
    assert_eq!(ready["active_models"], models_total, "every shipped model is served");
    let log = std::fs::read_to_string(&stderr).unwrap();
    let begins = format!(
        "perfcast: installing bundled measurements: {} samples, {models_total} models …",
        perfcast::service::startup::thousands(samples_total)
    );
    assert!(log.contains(&begins), "stderr says what the start does:\n{log}");
    assert!(log.contains(&format!("{} models … done in ", models_total)), "and when it is done:\n{log}");

    let systems = http_get(port, "/v1/systems").unwrap();
    assert!(systems.contains("perlmutter-a100-40g"));
    let ready_after = start.elapsed();
    // The samples follow while it serves: /readyz says how far (until they are all in), then every part is a profile.
    let mut last = 0;
    let installed = loop {
        let r = http_get(port, "/readyz").unwrap();
        let (status, _, body) = split(&r);
        assert_eq!(status, 200, "ready stays ready while the samples install: {r}");
        let v: serde_json::Value = serde_json::from_str(body).unwrap();
        let Some(b) = v.get("bundled_samples") else { break start.elapsed() };
        let done = b["samples_done"].as_u64().unwrap();
        assert_eq!(b["samples_total"].as_u64(), Some(samples_total), "{v}");
        assert!(done >= last && done <= samples_total, "{v}");
        last = done;
        assert!(start.elapsed() < Duration::from_secs(180), "samples not in after 180 s: {v}");
        std::thread::sleep(Duration::from_millis(50));
    };
    let profiles: serde_json::Value =
        serde_json::from_str(split(&http_get(port, "/v1/profiles?limit=1").unwrap()).2).unwrap();
    assert_eq!(profiles["total"].as_u64(), Some(manifest.parts.len() as u64), "{profiles}");
    let log = std::fs::read_to_string(&stderr).unwrap();
    let done = format!(
        "perfcast: writing {} bundled samples … done in ",
        perfcast::service::startup::thousands(samples_total)
    );
    assert!(log.contains(&done), "stderr says when the samples are in:\n{log}");
    println!(
        "first start on a new database: /healthz after {:.2} s, ready after {:.1} s, samples in after {:.1} s",
        listening.as_secs_f64(),
        ready_after.as_secs_f64(),
        installed.as_secs_f64()
    );
    let estimate = http_post_json(
        port,
        "/v1/estimates/operator",
        r#"{"gpu": "NVIDIA H100 80GB HBM3", "op": "linear", "phase": "fwd", "dtype": "bf16",
            "dims": {"M": 4096, "N": 4096, "K": 4096}}"#,
    )
    .unwrap();
    assert!(estimate.contains("\"source\":\"regressor:linear.fwd.bf16"), "{estimate}");

    let status = Command::new("kill").args(["-TERM", &child.id().to_string()]).status().unwrap();
    assert!(status.success());
    let start = Instant::now();
    let code = loop {
        if let Some(code) = child.try_wait().unwrap() {
            break code;
        }
        assert!(start.elapsed() < Duration::from_secs(15), "server did not stop on SIGTERM");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(code.success(), "exit status {code}");
}
