//! What the tests that run the real `perfcast` binary share (`tests/crash/`, `tests/replicas.rs`, each through
//! `mod support;`): a minimal HTTP/1.1 client over a std `TcpStream` (one request per connection) and a server
//! process started with `perfcast serve` on a free loopback port, its log in a file, SIGKILLed on drop.
//!
//! Each test binary uses a part of it, hence `dead_code` is allowed here.
#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

/// A complete HTTP response: status code and (de-chunked) body.
#[derive(Debug)]
pub struct Reply {
    pub status: u16,
    pub body: Vec<u8>,
}

impl Reply {
    /// The body as JSON; panics (naming the body) when it is not.
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("body is not JSON ({e}): {}", String::from_utf8_lossy(&self.body)))
    }

    /// The body as text (lossy), for failure messages.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

fn dechunk(mut b: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    loop {
        let eol = find(b, b"\r\n")?;
        let size = usize::from_str_radix(std::str::from_utf8(&b[..eol]).ok()?.split(';').next()?.trim(), 16).ok()?;
        b = &b[eol + 2..];
        if size == 0 {
            return Some(out);
        }
        if b.len() < size + 2 {
            return None;
        }
        out.extend_from_slice(&b[..size]);
        b = &b[size + 2..];
    }
}

/// Sends one request (`Connection: close`) to `127.0.0.1:port`; an error means no complete response arrived
/// (refused, reset, truncated). Reads time out after 60 s.
pub fn http(port: u16, method: &str, path: &str, headers: &[(&str, &str)], body: &[u8]) -> std::io::Result<Reply> {
    let broken = |what: &str| std::io::Error::new(std::io::ErrorKind::UnexpectedEof, what.to_string());
    let mut s = TcpStream::connect(("127.0.0.1", port))?;
    s.set_read_timeout(Some(Duration::from_secs(60)))?;
    s.set_write_timeout(Some(Duration::from_secs(60)))?;
    let mut req = format!("{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n");
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str(&format!("Content-Length: {}\r\n\r\n", body.len()));
    s.write_all(req.as_bytes())?;
    s.write_all(body)?;
    let mut raw = Vec::new();
    s.read_to_end(&mut raw)?;
    let end = find(&raw, b"\r\n\r\n").ok_or_else(|| broken("no complete response head"))?;
    let head = String::from_utf8_lossy(&raw[..end]).to_ascii_lowercase();
    let status: u16 =
        head.split_whitespace().nth(1).and_then(|s| s.parse().ok()).ok_or_else(|| broken("no status code"))?;
    let rest = &raw[end + 4..];
    let body = if head.contains("transfer-encoding: chunked") {
        dechunk(rest).ok_or_else(|| broken("truncated chunked body"))?
    } else {
        let length = head
            .lines()
            .find_map(|l| l.strip_prefix("content-length:"))
            .and_then(|v| v.trim().parse::<usize>().ok())
            .unwrap_or(rest.len());
        if rest.len() < length {
            return Err(broken("truncated body"));
        }
        rest[..length].to_vec()
    };
    Ok(Reply { status, body })
}

/// `GET path` without credentials.
pub fn get(port: u16, path: &str) -> std::io::Result<Reply> {
    http(port, "GET", path, &[], b"")
}

/// `POST path` with a JSON body, authenticated with the write key `key`.
pub fn post_json(port: u16, key: &str, path: &str, body: &Value) -> std::io::Result<Reply> {
    let auth = format!("Bearer {key}");
    let headers = [("Authorization", auth.as_str()), ("Content-Type", "application/json")];
    http(port, "POST", path, &headers, &serde_json::to_vec(body).unwrap())
}

/// A loopback port free at the time of the call.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// `perfcast serve` as a child process.
pub struct Server {
    pub child: Child,
    pub port: u16,
    pub log: PathBuf,
}

impl Server {
    /// Starts `bin serve` on a free port over the database at `url` (`sqlite://…` or `postgres://…`), in `dir`,
    /// stdout and stderr to `log`. The caller's `PERFCAST_*` and `RUST_LOG` variables are removed; the server gets
    /// `key` as its write key, rate limits it cannot reach, `info` logs, and then `envs`.
    pub fn start(bin: &Path, dir: &Path, url: &str, key: Option<&str>, log: PathBuf, envs: &[(&str, &str)]) -> Server {
        let port = free_port();
        let out = std::fs::File::create(&log).unwrap();
        let mut cmd = Command::new(bin);
        for (k, _) in std::env::vars() {
            if k.starts_with("PERFCAST_") || k == "RUST_LOG" {
                cmd.env_remove(k);
            }
        }
        cmd.args(["serve", "--bind", &format!("127.0.0.1:{port}"), "--database-url", url])
            .current_dir(dir)
            .env("PERFCAST_RATE_LIMIT_PER_S", "1000000")
            .env("PERFCAST_RATE_LIMIT_BURST", "1000000")
            .env("PERFCAST_LOG", "info");
        if let Some(key) = key {
            cmd.env("PERFCAST_API_KEY", key);
        }
        for (k, v) in envs {
            cmd.env(k, v);
        }
        let child = cmd.stdin(Stdio::null()).stdout(out.try_clone().unwrap()).stderr(out).spawn().unwrap();
        Server { child, port, log }
    }

    /// The whole log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// The last 40 lines of the log.
    pub fn log_tail(&self) -> String {
        let text = self.log();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(40)..].join("\n")
    }

    /// Waits until `/readyz` answers 200 and returns its body. Errors (with the log's tail): the process exited,
    /// or it is not ready after `limit`.
    pub fn wait_ready(&mut self, limit: Duration) -> Result<Value, String> {
        let start = Instant::now();
        loop {
            if let Ok(r) = get(self.port, "/readyz") {
                if r.status == 200 {
                    return Ok(r.json());
                }
            }
            if let Some(status) = self.child.try_wait().unwrap() {
                return Err(format!("the server exited at startup ({status})"));
            }
            if start.elapsed() > limit {
                return Err(format!("not ready after {limit:?}"));
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// SIGKILL, and reap the process.
    pub fn kill(&mut self) {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
