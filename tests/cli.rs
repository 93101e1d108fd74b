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
        .args(["--db", dir.path().join("cli.db").to_str().unwrap(), "predict", req.to_str().unwrap()])
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

/// The README's first command on a new database, from a directory holding nothing but the binary's database: it
/// comes up within seconds, answering from the bundled models (embedded in the binary), and stops on SIGTERM.
#[test]
fn serve_uses_the_flags_creates_the_database_and_stops_on_sigterm() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("nested/dir/perfcast.db");
    let port = free_port();
    let mut child = Command::new(BIN)
        .args(["serve", "--bind", &format!("127.0.0.1:{port}"), "--db", db.to_str().unwrap()])
        .current_dir(dir.path())
        .env_remove("PERFCAST_BUNDLED_MODELS")
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let start = Instant::now();
    let reply = loop {
        if let Some(r) = http_get(port, "/healthz") {
            break r;
        }
        assert!(start.elapsed() < Duration::from_secs(60), "server did not come up");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(reply.starts_with("HTTP/1.1 200"), "{reply}");
    assert!(reply.contains("\"status\":\"ok\""));
    assert!(reply.to_ascii_lowercase().contains("x-request-id:"), "{reply}");
    assert!(db.exists(), "database file not created");
    let systems = http_get(port, "/v1/systems").unwrap();
    assert!(systems.contains("perlmutter-a100-40g"));
    println!("first start on a new database (bundle installed): {:.1} s", start.elapsed().as_secs_f64());
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
