//! Crash safety of the real server process on each engine: one SQLite file, and — when
//! `PERFCAST_TEST_POSTGRES_URL` names a server (`scripts/test`, `scripts/pg-temp`) — a fresh PostgreSQL database.
//! On each, a loop of SIGKILLs at random points (mid-upload, mid-retrain, mid-calibration), and the invariants
//! checked after every kill and every restart:
//!
//! - every acknowledged upload (`201`, or `200` for a retried duplicate) is stored with exactly its samples, and
//!   an upload that was not acknowledged is stored either whole or not at all;
//! - no profile's stored sample rows differ from its `samples` column;
//! - no row points at a missing parent (samples without their profile, versions without their job, …); on SQLite
//!   also `PRAGMA integrity_check` is `ok`;
//! - at most one active version per regressor key, no empty model text, and every active model loads after the
//!   restart (`/readyz` counts what `GET /v1/regressors` lists as active) and serves estimates;
//! - no communication sample is left out of both its system's calibration and a pending calibration job;
//! - the bundled measurements and models (installed at the first start, in one transaction) are there whole or not
//!   at all — the first start is killed partway through its install once;
//! - jobs a kill left `running` are queued again at the restart (on PostgreSQL: claimed again once their 2 s lease
//!   expires) and re-run (`attempts` grows; they end `succeeded`).
//!
//! At the end the last server is left to finish its jobs: every job succeeded, the calibration and the newest
//! model version of every key cover every stored sample, at least one job was interrupted and re-run, at least
//! one kill landed while an upload was in flight, and no acknowledged upload was lost.
//!
//! The database is read through `sqlx::Any` with the URL the server was given (read-only on SQLite), with one
//! query text for both engines; JSON columns are parsed here rather than in SQL.
//!
//! Lives are random (20 ms–2.5 s), and one in three ends a few milliseconds after a calibration job starts (every
//! life does, from the loop's middle on, until one kill has landed mid-calibration), so kills land mid-upload,
//! mid-retrain and mid-calibration; the summary line counts each.
//!
//! With PostgreSQL at hand the rounds are split (14 on SQLite, 12 on PostgreSQL), else SQLite gets all 24, so the
//! test costs about the same either way. The run is seeded: the seed is printed (and named in every failure);
//! `PERFCAST_CRASH_SEED=<n>` replays it (the PostgreSQL loop runs with seed + 1).

mod support;

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::io::Write;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use sqlx::{AnyConnection, Connection, Row};
use support::{get, http, Reply, Server};

/// SIGKILLs in the loop when it runs on SQLite alone (the issue asks for at least 20).
const KILLS: usize = 24;
/// SIGKILLs on SQLite and on PostgreSQL when both run (together at least [`KILLS`]).
const KILLS_SQLITE_BESIDE_POSTGRES: usize = 14;
const KILLS_POSTGRES: usize = 12;
/// Concurrent uploaders while the server runs.
const UPLOADERS: usize = 2;
/// The write key the server is provisioned with (`PERFCAST_API_KEY`).
const KEY: &str = "pck_c0ffee000001_7c8d2f0a4b6e1d3c5a7f9b0e2d4c6a8f1e3b5d7c9a0f2e4d6b8c1a3e5f7d9b0c";
/// The system communication samples are uploaded for (a preset of every new database).
const SYSTEM: &str = "dgx-h100";
const OP_KEYS: [&str; 2] = ["linear.fwd.fp16", "layernorm.fwd.bf16"];
/// The job kind of a communication calibration.
const CALIBRATE: &str = "calibrate";

// ---------------------------------------------------------------------------------------------------------------
// A seeded random number generator (SplitMix64): the whole schedule of a run follows from its seed.

#[derive(Debug, Clone)]
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `lo..hi`.
    fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.next() % (hi - lo).max(1)
    }

    fn chance(&mut self, p: f64) -> bool {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64 <= p
    }

    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.range(0, items.len() as u64) as usize]
    }
}

fn post_json(port: u16, path: &str, body: &Value) -> std::io::Result<Reply> {
    support::post_json(port, KEY, path, body)
}

// ---------------------------------------------------------------------------------------------------------------
// Uploads: perfcast JSON-lines files of distinct content with known sample counts.

#[derive(Debug, Clone)]
struct Upload {
    /// The profile id the server must give it: the first 16 hex digits of the SHA-256 of the decoded bytes.
    id: String,
    /// What is sent (gzip-compressed when `gzip`).
    wire: Vec<u8>,
    gzip: bool,
    query: String,
    ops: u64,
    comms: u64,
}

impl Upload {
    fn samples(&self) -> u64 {
        self.ops + self.comms
    }
}

/// An operator sample near what the GPU would measure (roofline with a plausible efficiency and noise).
fn op_line(rng: &mut Rng, serial: u64) -> String {
    let (gpu, tflops, gbs) = *rng.pick(&[("H100-SXM5-80GB", 989.0, 3350.0), ("A100-SXM4-80GB", 312.0, 2039.0)]);
    let noise = 1.0 + (rng.range(0, 2001) as f64 - 1000.0) / 10_000.0;
    if rng.chance(0.6) {
        let (m, n, k) = (64 * rng.range(1, 128), 64 * rng.range(1, 128), 64 * rng.range(1, 128));
        let t = (2.0 * (m * n * k) as f64 / (tflops * 0.6e6) + 4.0) * noise;
        format!(
            r#"{{"op": "linear", "phase": "fwd", "dtype": "fp16", "gpu": "{gpu}", "dims": {{"M": {m}, "N": {n}, "K": {k}}}, "time_us": {t:.4}, "attributes": {{"upload": {serial}}}}}"#
        )
    } else {
        let (b, h) = (256 * rng.range(1, 64), 256 * rng.range(1, 32));
        let t = (4.0 * (b * h) as f64 / (gbs * 0.7e3) + 3.0) * noise;
        format!(
            r#"{{"op": "layernorm", "phase": "fwd", "dtype": "bf16", "gpu": "{gpu}", "dims": {{"B": {b}, "H": {h}}}, "time_us": {t:.4}, "attributes": {{"upload": {serial}}}}}"#
        )
    }
}

/// A communication sample on [`SYSTEM`] (NVSwitch within a node, NDR across nodes).
fn comm_line(rng: &mut Rng, serial: u64) -> String {
    let noise = 1.0 + (rng.range(0, 2001) as f64 - 1000.0) / 10_000.0;
    let bytes = 1u64 << rng.range(10, 31);
    let (collective, ranks, nodes, lat, gbs, factor) = *rng.pick(&[
        ("all_reduce", 8, 1, 8.0, 450.0, 1.75),
        ("all_reduce", 16, 2, 15.0, 50.0, 1.875),
        ("send_recv", 2, 1, 2.5, 450.0, 1.0),
        ("send_recv", 2, 2, 6.0, 50.0, 1.0),
    ]);
    let t = (lat + factor * bytes as f64 / (gbs * 1e3)) * noise;
    format!(
        r#"{{"kind": "comm", "collective": "{collective}", "bytes": {bytes}, "ranks": {ranks}, "nodes": {nodes}, "gpus_per_node": {}, "time_us": {t:.4}, "attributes": {{"upload": {serial}}}}}"#,
        ranks / nodes
    )
}

fn new_upload(rng: &mut Rng, serial: u64) -> Upload {
    let comm = rng.chance(0.3);
    let (n_ops, n_comms) = if comm { (rng.range(0, 100), rng.range(100, 300)) } else { (rng.range(200, 500), 0) };
    let mut lines: Vec<String> = (0..n_ops).map(|_| op_line(rng, serial)).collect();
    lines.extend((0..n_comms).map(|_| comm_line(rng, serial)));
    let raw = (lines.join("\n") + "\n").into_bytes();
    let id = hex::encode(Sha256::digest(&raw))[..16].to_string();
    let gzip = rng.chance(0.4);
    let wire = if gzip {
        let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        enc.write_all(&raw).unwrap();
        enc.finish().unwrap()
    } else {
        raw
    };
    let query = if comm {
        format!("/v1/profiles?system={SYSTEM}&ci_run={serial}")
    } else {
        format!("/v1/profiles?format=perfcast_jsonl&ci_run={serial}")
    };
    Upload { id, wire, gzip, query, ops: n_ops, comms: n_comms }
}

fn send_upload(port: u16, u: &Upload) -> std::io::Result<Reply> {
    let auth = format!("Bearer {KEY}");
    let mut headers = vec![("Authorization", auth.as_str()), ("Content-Type", "application/x-ndjson")];
    if u.gzip {
        headers.push(("Content-Encoding", "gzip"));
    }
    http(port, "POST", &u.query, &headers, &u.wire)
}

// ---------------------------------------------------------------------------------------------------------------
// The database under test.

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Engine {
    Sqlite,
    Postgres,
}

/// Where one loop's database lives.
#[derive(Debug, Clone)]
struct Database {
    engine: Engine,
    /// The URL the server is started with.
    url: String,
    /// The URL the checks read it through (read-only on SQLite).
    read_url: String,
}

impl Database {
    fn sqlite(path: &Path) -> Database {
        let url = format!("sqlite://{}", path.display());
        Database { engine: Engine::Sqlite, read_url: format!("{url}?mode=ro"), url }
    }

    fn postgres(url: String) -> Database {
        Database { engine: Engine::Postgres, read_url: url.clone(), url }
    }

    fn name(&self) -> &'static str {
        match self.engine {
            Engine::Sqlite => "SQLite",
            Engine::Postgres => "PostgreSQL",
        }
    }
}

/// A server on `db`, configured so that kills land in every kind of work: retrains start at once after uploads
/// and finish in about a second; on PostgreSQL a 2 s job lease, so an interrupted job is claimed again soon after
/// the restart.
fn start_server(bin: &Path, dir: &Path, db: &Database, log: &str) -> Server {
    let mut envs = vec![
        ("PERFCAST_RETRAIN_GRID", "fast"),
        ("PERFCAST_RETRAIN_DEBOUNCE_S", "0"),
        ("PERFCAST_PER_GPU_MIN_SAMPLES", "1000000"),
        // Retrains on at most 20,000 rows take about a second: jobs also finish between kills, so the
        // calibrations queued behind them run (and get killed) too.
        ("PERFCAST_MAX_TRAINING_ROWS", "20000"),
    ];
    if db.engine == Engine::Postgres {
        envs.push(("PERFCAST_JOB_LEASE_S", "2"));
    }
    Server::start(bin, dir, &db.url, Some(KEY), dir.join(log), &envs)
}

// ---------------------------------------------------------------------------------------------------------------
// The database as the killed process left it, read while no server runs (or, at the end, beside the running one:
// SQLite's WAL readers do not disturb it; PostgreSQL readers never do).

#[derive(Debug, Default)]
struct Snapshot {
    /// `PRAGMA integrity_check` (SQLite; PostgreSQL has no per-database equivalent).
    integrity: Option<Vec<String>>,
    /// Rows whose parent row is missing, per `child → parent` relation.
    orphans: Vec<(&'static str, i64)>,
    /// id → (samples column, stored rows of every kind, op rows, comm rows).
    profiles: HashMap<String, (u64, u64, u64, u64)>,
    /// Keys with more than one active version.
    multi_active: Vec<String>,
    active: Vec<(String, i64)>,
    empty_models: i64,
    /// (id, kind, state, attempts).
    jobs: Vec<(i64, String, String, i64, Value)>,
    /// The calibration's sample count and the stored communication samples of [`SYSTEM`].
    calibrated: Option<i64>,
    comm_samples: i64,
    /// Op samples per key and the newest version's sample count per key.
    op_counts: BTreeMap<String, i64>,
    latest_trained: BTreeMap<String, i64>,
    /// Installed bundle versions; the bundled profiles' (samples column, stored rows).
    bundles: Vec<String>,
    bundled_profiles: Vec<(u64, u64)>,
}

impl Snapshot {
    fn jobs_in(&self, states: &[&str]) -> Vec<&(i64, String, String, i64, Value)> {
        self.jobs.iter().filter(|j| states.contains(&j.2.as_str())).collect()
    }

    fn calibration_pending(&self) -> bool {
        self.jobs_in(&["queued", "running"]).iter().any(|j| j.1 == "calibrate" && j.4["system"] == SYSTEM)
    }
}

/// The foreign keys of the schema (both engines' migrations): a query counting the rows that break each.
const ORPHANS: [(&str, &str); 9] = [
    ("op_samples → profiles", "SELECT COUNT(*) FROM op_samples WHERE profile_id NOT IN (SELECT id FROM profiles)"),
    ("comm_samples → profiles", "SELECT COUNT(*) FROM comm_samples WHERE profile_id NOT IN (SELECT id FROM profiles)"),
    (
        "kernel_samples → profiles",
        "SELECT COUNT(*) FROM kernel_samples WHERE profile_id NOT IN (SELECT id FROM profiles)",
    ),
    (
        "timer_samples → profiles",
        "SELECT COUNT(*) FROM timer_samples WHERE profile_id NOT IN (SELECT id FROM profiles)",
    ),
    (
        "profiles → systems",
        "SELECT COUNT(*) FROM profiles WHERE system IS NOT NULL AND system NOT IN (SELECT name FROM systems)",
    ),
    (
        "comm_samples → systems",
        "SELECT COUNT(*) FROM comm_samples WHERE system IS NOT NULL AND system NOT IN (SELECT name FROM systems)",
    ),
    (
        "system_calibrations → systems",
        "SELECT COUNT(*) FROM system_calibrations WHERE system NOT IN (SELECT name FROM systems)",
    ),
    (
        "regressors → jobs",
        "SELECT COUNT(*) FROM regressors WHERE job_id IS NOT NULL AND job_id NOT IN (SELECT id FROM jobs)",
    ),
    (
        "regressor_validation → regressors",
        "SELECT COUNT(*) FROM regressor_validation WHERE regressor_id NOT IN (SELECT id FROM regressors)",
    ),
];

/// A JSON text column's value (an unparsable text reads as null, which the checks then report).
fn json_column(r: &sqlx::any::AnyRow, column: &str) -> Value {
    serde_json::from_str(&r.get::<String, _>(column)).unwrap_or(Value::Null)
}

async fn snapshot(db: &Database) -> Result<Snapshot, sqlx::Error> {
    let mut c = AnyConnection::connect(&db.read_url).await?;
    let mut s = Snapshot::default();
    if db.engine == Engine::Sqlite {
        s.integrity = Some(sqlx::query_scalar("PRAGMA integrity_check").fetch_all(&mut c).await?);
    }
    for (relation, sql) in ORPHANS {
        let n: i64 = sqlx::query_scalar(sql).fetch_one(&mut c).await?;
        if n > 0 {
            s.orphans.push((relation, n));
        }
    }
    for r in sqlx::query(
        "SELECT p.id, p.samples, p.labels,
            (SELECT COUNT(*) FROM op_samples WHERE profile_id = p.id) AS ops,
            (SELECT COUNT(*) FROM comm_samples WHERE profile_id = p.id) AS comms,
            (SELECT COUNT(*) FROM kernel_samples WHERE profile_id = p.id)
              + (SELECT COUNT(*) FROM timer_samples WHERE profile_id = p.id) AS others
         FROM profiles p",
    )
    .fetch_all(&mut c)
    .await?
    {
        let (ops, comms, others): (i64, i64, i64) = (r.get("ops"), r.get("comms"), r.get("others"));
        let rows = (ops + comms + others) as u64;
        if !json_column(&r, "labels")["bundle"].is_null() {
            s.bundled_profiles.push((r.get::<i64, _>("samples") as u64, rows));
            continue;
        }
        s.profiles.insert(r.get("id"), (r.get::<i64, _>("samples") as u64, rows, ops as u64, comms as u64));
    }
    s.bundles = sqlx::query_scalar("SELECT version FROM bundles").fetch_all(&mut c).await?;
    s.multi_active = sqlx::query_scalar("SELECT key FROM regressors WHERE active = 1 GROUP BY key HAVING COUNT(*) > 1")
        .fetch_all(&mut c)
        .await?;
    s.active = sqlx::query("SELECT key, version FROM regressors WHERE active = 1 ORDER BY key")
        .fetch_all(&mut c)
        .await?
        .iter()
        .map(|r| (r.get("key"), r.get("version")))
        .collect();
    // Bundled versions ship without their hold-out twin (crate::bundle); every other version has both texts.
    let no_model: i64 =
        sqlx::query_scalar("SELECT COUNT(*) FROM regressors WHERE length(model) = 0").fetch_one(&mut c).await?;
    let no_holdout =
        sqlx::query("SELECT provenance FROM regressors WHERE length(model) > 0 AND length(holdout_model) = 0")
            .fetch_all(&mut c)
            .await?
            .iter()
            .filter(|r| json_column(r, "provenance")["bundled"] != true)
            .count();
    s.empty_models = no_model + no_holdout as i64;
    s.jobs = sqlx::query("SELECT id, kind, state, attempts, params FROM jobs ORDER BY id")
        .fetch_all(&mut c)
        .await?
        .iter()
        .map(|r| (r.get("id"), r.get("kind"), r.get("state"), r.get("attempts"), json_column(r, "params")))
        .collect();
    s.calibrated = sqlx::query_scalar("SELECT samples FROM system_calibrations WHERE system = $1")
        .bind(SYSTEM)
        .fetch_optional(&mut c)
        .await?;
    s.comm_samples = sqlx::query_scalar("SELECT COUNT(*) FROM comm_samples WHERE system = $1")
        .bind(SYSTEM)
        .fetch_one(&mut c)
        .await?;
    for r in sqlx::query("SELECT op || '.' || phase || '.' || dtype AS key, COUNT(*) AS n FROM op_samples GROUP BY 1")
        .fetch_all(&mut c)
        .await?
    {
        s.op_counts.insert(r.get("key"), r.get("n"));
    }
    for r in sqlx::query(
        "SELECT key, samples FROM regressors r WHERE version = (SELECT MAX(version) FROM regressors WHERE key = r.key)",
    )
    .fetch_all(&mut c)
    .await?
    {
        s.latest_trained.insert(r.get("key"), r.get("samples"));
    }
    c.close().await?;
    Ok(s)
}

// ---------------------------------------------------------------------------------------------------------------
// The run: its ledger of uploads and what it observed.

struct Run {
    seed: u64,
    rt: tokio::runtime::Runtime,
    db: Database,
    /// Every upload sent, by id.
    sent: HashMap<String, Upload>,
    /// Acknowledged uploads, by id.
    acked: BTreeMap<String, Upload>,
    /// Sent but not acknowledged (the kill came first): retried by the next server.
    pending: VecDeque<Upload>,
    /// Jobs a kill interrupted: id → attempts when killed.
    interrupted: BTreeMap<i64, i64>,
    kills: usize,
    kills_mid_upload: usize,
    kills_mid_job: BTreeMap<String, usize>,
    retried_duplicates: usize,
}

impl Run {
    fn fail(&self, server: Option<&Server>, msg: String) -> ! {
        let log = server.map(|s| format!("\n--- server log (tail) ---\n{}", s.log_tail())).unwrap_or_default();
        let engine = self.db.name();
        panic!("{engine}: {msg}\n(seed {seed}: rerun with PERFCAST_CRASH_SEED={seed}){log}", seed = self.seed);
    }

    fn check(&self, ok: bool, server: Option<&Server>, msg: impl FnOnce() -> String) {
        if !ok {
            self.fail(server, msg());
        }
    }

    /// Whether a job of `kind` is running now (read beside the live server, which readers do not disturb).
    fn running(&self, kind: &str) -> bool {
        self.rt
            .block_on(async {
                let mut c = AnyConnection::connect(&self.db.read_url).await.ok()?;
                let n: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM jobs WHERE state = 'running' AND kind = $1")
                    .bind(kind)
                    .fetch_one(&mut c)
                    .await
                    .ok()?;
                c.close().await.ok()?;
                Some(n > 0)
            })
            .unwrap_or(false)
    }

    fn snapshot(&self) -> Snapshot {
        self.rt.block_on(snapshot(&self.db)).unwrap_or_else(|e| self.fail(None, format!("cannot read the db: {e}")))
    }

    /// Records an upload's answer: an acknowledgement must name the expected id and sample count.
    fn record(&mut self, u: Upload, reply: std::io::Result<Reply>, server: &Server) {
        match reply {
            Ok(r) if r.status == 201 || r.status == 200 => {
                let body = r.json();
                self.check(body["id"] == u.id.as_str(), Some(server), || format!("upload {} answered {body}", u.id));
                self.check(body["samples"] == u.samples(), Some(server), || {
                    format!("upload {} of {} samples answered {body}", u.id, u.samples())
                });
                self.check(body["duplicate"] == (r.status == 200), Some(server), || format!("{}: {body}", r.status));
                if r.status == 201 {
                    let kinds = &body["samples_by_kind"];
                    self.check(kinds["op"] == u.ops && kinds["comm"] == u.comms, Some(server), || format!("{body}"));
                } else {
                    self.check(self.sent.contains_key(&u.id), Some(server), || format!("unexpected duplicate {body}"));
                    self.retried_duplicates += 1;
                }
                self.acked.insert(u.id.clone(), u);
            }
            Ok(r) => self.fail(
                Some(server),
                format!("upload {} answered {}: {}", u.id, r.status, String::from_utf8_lossy(&r.body)),
            ),
            Err(_) => self.pending.push_back(u),
        }
    }

    /// The database as a kill left it.
    fn check_offline(&self, s: &Snapshot, when: &str) {
        if let Some(integrity) = &s.integrity {
            self.check(integrity == &["ok"], None, || format!("{when}: integrity_check: {integrity:?}"));
        }
        self.check(s.orphans.is_empty(), None, || format!("{when}: rows without their parent: {:?}", s.orphans));
        for (id, u) in &self.acked {
            let stored = s.profiles.get(id);
            self.check(stored == Some(&(u.samples(), u.samples(), u.ops, u.comms)), None, || {
                format!(
                    "{when}: LOST acknowledged upload {id} ({} op + {} comm samples): stored {stored:?}",
                    u.ops, u.comms
                )
            });
        }
        for (id, &(column, rows, ops, comms)) in &s.profiles {
            let u = self.sent.get(id);
            self.check(u.is_some(), None, || format!("{when}: profile {id} was never sent"));
            let u = u.unwrap();
            self.check((column, rows, ops, comms) == (u.samples(), u.samples(), u.ops, u.comms), None, || {
                format!(
                    "{when}: partial profile {id}: samples column {column}, {rows} rows ({ops} op, {comms} comm); \
                     sent {} op + {} comm",
                    u.ops, u.comms
                )
            });
        }
        self.check(s.multi_active.is_empty(), None, || {
            format!("{when}: several active versions: {:?}", s.multi_active)
        });
        self.check(s.empty_models == 0, None, || format!("{when}: {} versions without model text", s.empty_models));
        // The bundle: whole (its version recorded, every part with every sample) or not at all.
        let manifest = perfcast::bundle::Bundle::embedded().unwrap().manifest;
        let expected: u64 = manifest.parts.iter().map(|p| p.samples).sum();
        let stored: u64 = s.bundled_profiles.iter().map(|p| p.1).sum();
        let whole = s.bundles == [manifest.version.clone()]
            && s.bundled_profiles.len() == manifest.parts.len()
            && s.bundled_profiles.iter().all(|(column, rows)| column == rows)
            && stored == expected;
        self.check(whole || (s.bundles.is_empty() && s.bundled_profiles.is_empty()), None, || {
            format!(
                "{when}: partial bundle: versions {:?}, {} profiles with {stored} samples (expected {} with {expected})",
                s.bundles,
                s.bundled_profiles.len(),
                manifest.parts.len()
            )
        });
        // Communication samples are calibrated, or a calibration of their system is pending.
        self.check(s.calibrated == Some(s.comm_samples) || s.comm_samples == 0 || s.calibration_pending(), None, || {
            format!(
                "{when}: {} communication samples on {SYSTEM}, calibrated on {:?}, and no calibration job pending: {:?}",
                s.comm_samples, s.calibrated, s.jobs
            )
        });
    }

    /// What a restarted server answers: ready with every active model loaded, the interrupted jobs queued again,
    /// recent acknowledged uploads readable with their samples, estimates served by the active model.
    fn check_restarted(&self, server: &Server, before: &Snapshot, rng: &mut Rng) {
        let port = server.port;
        // Every active model loads: the registry holds as many models as the store marks active (a retrain that
        // commits meanwhile changes both: retry until two reads agree).
        let mut agreed = None;
        for _ in 0..50 {
            let ready = get(port, "/readyz").unwrap().json();
            let list = get(port, "/v1/regressors").unwrap().json();
            let active: Vec<(String, i64)> = list
                .as_array()
                .unwrap()
                .iter()
                .filter(|r| r["active"] == true)
                .map(|r| (r["key"].as_str().unwrap().to_string(), r["version"].as_i64().unwrap()))
                .collect();
            if ready["active_models"] == active.len() && get(port, "/readyz").unwrap().json() == ready {
                agreed = Some(active);
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let active = agreed.unwrap_or_else(|| {
            self.fail(Some(server), "the loaded models never matched the active versions (one does not load)".into())
        });
        for (key, version) in &before.active {
            self.check(active.iter().any(|(k, v)| k == key && v >= version), Some(server), || {
                format!("active {key}@v{version} before the restart, after it: {active:?}")
            });
        }
        if let Some((_, v)) = active.iter().find(|(k, _)| k == "linear.fwd.fp16") {
            let e = post_json(
                port,
                "/v1/estimates/operator",
                &json!({"gpu": "H100-SXM5-80GB", "op": "linear", "dtype": "fp16", "dims": {"M": 4096, "N": 4096, "K": 4096}}),
            )
            .unwrap();
            self.check(e.status == 200, Some(server), || String::from_utf8_lossy(&e.body).into_owned());
            let source = e.json()["source"].as_str().unwrap_or_default().to_string();
            // The fp16 model answers when it was trained on H100 rows (this run's uploads); the bundled one (DeepBench's
            // P100/T4/V100) yields to the H100's own bf16 model, which runs at the same tensor-core rate.
            let detail = get(port, "/v1/regressors/linear.fwd.fp16").unwrap().json();
            let newest_active = detail["active_version"] == detail["versions"][0]["version"];
            let knows_h100 = detail["training_set"]["gpus"].get("H100-SXM5-80GB").is_some();
            let ok = source.starts_with("regressor:linear.fwd.fp16@v")
                || (!(newest_active && knows_h100) && source.starts_with("regressor:linear.fwd.bf16.H100-SXM5-80GB@v"));
            self.check(ok, Some(server), || {
                format!("active linear.fwd.fp16@v{v} (trained on H100 rows: {knows_h100}) but the estimate's source is {source:?}")
            });
        }
        // Jobs left running are queued again (or already re-run).
        let deadline = Instant::now() + Duration::from_secs(15);
        for &(id, _, _, attempts, _) in before.jobs_in(&["running"]) {
            loop {
                let j = get(port, &format!("/v1/jobs/{id}")).unwrap().json();
                if j["state"] != "running" || j["attempts"].as_i64() > Some(attempts) {
                    break;
                }
                self.check(Instant::now() < deadline, Some(server), || format!("job {id} still running: {j}"));
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        // Acknowledged uploads through the API: a sample of them (the read-only check covers every one).
        let ids: Vec<&String> = self.acked.keys().collect();
        for _ in 0..ids.len().min(8) {
            let id = *rng.pick(&ids);
            let u = &self.acked[id];
            let p = get(port, &format!("/v1/profiles/{id}")).unwrap();
            self.check(p.status == 200 && p.json()["samples"] == u.samples(), Some(server), || {
                format!("GET /v1/profiles/{id}: {} {}", p.status, String::from_utf8_lossy(&p.body))
            });
            let page = get(port, &format!("/v1/profiles/{id}/samples?limit=1")).unwrap().json();
            self.check(page["total"] == u.samples(), Some(server), || format!("samples of {id}: {page}"));
        }
    }
}

fn wait_ready(run: &Run, server: &mut Server) {
    if let Err(e) = server.wait_ready(Duration::from_secs(60)) {
        run.fail(Some(server), e);
    }
}

#[test]
fn sigkill_at_random_points_loses_no_acknowledged_upload_and_restarts_consistent() {
    let seed = std::env::var("PERFCAST_CRASH_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or_else(|| {
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64
    });
    println!("crash loop seed {seed} (replay: PERFCAST_CRASH_SEED={seed})");
    sqlx::any::install_default_drivers();
    let dir = tempfile::tempdir().unwrap();
    // Run a copy: the binary in the target directory may be replaced by another build while this test runs.
    let bin = dir.path().join("perfcast-under-test");
    std::fs::copy(env!("CARGO_BIN_EXE_perfcast"), &bin).unwrap();
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let postgres = rt.block_on(perfcast::store::testing::fresh_postgres_database());
    drop(rt);
    let sqlite_kills = if postgres.is_some() { KILLS_SQLITE_BESIDE_POSTGRES } else { KILLS };
    let sqlite_dir = dir.path().join("sqlite");
    std::fs::create_dir_all(&sqlite_dir).unwrap();
    let mut kills = kill_loop(&bin, &sqlite_dir, Database::sqlite(&sqlite_dir.join("crash.db")), sqlite_kills, seed);
    match postgres {
        Some(url) => {
            let url = url.unwrap_or_else(|e| panic!("a fresh PostgreSQL database: {e}"));
            let pg_dir = dir.path().join("postgres");
            std::fs::create_dir_all(&pg_dir).unwrap();
            kills += kill_loop(&bin, &pg_dir, Database::postgres(url), KILLS_POSTGRES, seed.wrapping_add(1));
        }
        None => eprintln!(
            "note: {} is not set; the kill loop ran on SQLite only",
            perfcast::store::testing::POSTGRES_URL_VAR
        ),
    }
    assert!(kills >= KILLS, "{kills} kills in all");
}

/// One kill loop of `rounds` SIGKILLs on `db` (the server runs in `dir`), then the last server left to settle;
/// panics on the first broken invariant. Returns the kills made.
fn kill_loop(bin: &Path, dir: &Path, db: Database, rounds: usize, seed: u64) -> usize {
    let started = Instant::now();
    let mut run = Run {
        seed,
        rt: tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap(),
        db: db.clone(),
        sent: HashMap::new(),
        acked: BTreeMap::new(),
        pending: VecDeque::new(),
        interrupted: BTreeMap::new(),
        kills: 0,
        kills_mid_upload: 0,
        kills_mid_job: BTreeMap::new(),
        retried_duplicates: 0,
    };
    let mut rng = Rng(seed);
    let serial = Arc::new(AtomicU64::new(0));
    let mut before: Option<Snapshot> = None;

    // The first start installs the bundled measurements and models (seconds, one transaction): kill it partway.
    let mut first = start_server(bin, dir, &db, "server-install.log");
    std::thread::sleep(Duration::from_millis(rng.range(200, 3000)));
    first.kill();
    let s = run.snapshot();
    run.check_offline(&s, "after a kill during the first start's bundle install");
    let bundle_installed_before_kill = !s.bundles.is_empty();
    drop(first);

    for iteration in 0..rounds {
        let mut server = start_server(bin, dir, &db, &format!("server-{iteration}.log"));
        wait_ready(&run, &mut server);
        if let Some(b) = &before {
            run.check_restarted(&server, b, &mut rng);
        }

        // The workload: uploaders (retrying the unacknowledged uploads first), and retrain requests now and then.
        let stop = Arc::new(AtomicBool::new(false));
        let queue = Arc::new(Mutex::new(std::mem::take(&mut run.pending)));
        let outcomes = Arc::new(Mutex::new(Vec::new()));
        let in_flight: Arc<Vec<AtomicBool>> = Arc::new((0..UPLOADERS).map(|_| AtomicBool::new(false)).collect());
        let mut threads = Vec::new();
        for t in 0..UPLOADERS {
            let (stop, queue, outcomes, in_flight, serial) =
                (stop.clone(), queue.clone(), outcomes.clone(), in_flight.clone(), serial.clone());
            let mut trng = Rng(rng.next());
            let port = server.port;
            threads.push(std::thread::spawn(move || {
                while !stop.load(Ordering::SeqCst) {
                    let retry = queue.lock().unwrap().pop_front();
                    let u = retry.unwrap_or_else(|| new_upload(&mut trng, serial.fetch_add(1, Ordering::SeqCst)));
                    in_flight[t].store(true, Ordering::SeqCst);
                    let reply = send_upload(port, &u);
                    in_flight[t].store(false, Ordering::SeqCst);
                    outcomes.lock().unwrap().push((u, reply));
                    std::thread::sleep(Duration::from_millis(trng.range(5, 60)));
                }
            }));
        }
        // Mostly short lives (20–400 ms: kills land mid-upload and mid-job), now and then a longer one so that
        // jobs also finish and commit between kills.
        let life = if rng.chance(0.25) { rng.range(400, 2500) } else { rng.range(20, 400) };
        let retrain_at = rng.chance(0.5).then(|| rng.range(0, life));
        let retrain_body = if rng.chance(0.7) { json!({}) } else { json!({"keys": [OP_KEYS[0]]}) };
        let t0 = Instant::now();
        if let Some(at) = retrain_at {
            std::thread::sleep(Duration::from_millis(at));
            if let Ok(r) = post_json(server.port, "/v1/regressors/retrain", &retrain_body) {
                run.check(r.status == 202, Some(&server), || String::from_utf8_lossy(&r.body).into_owned());
            }
        }
        std::thread::sleep(Duration::from_millis(life).saturating_sub(t0.elapsed()));
        // One life in three waits (up to 6 s) until a calibration is running, then kills a few ms into it: the
        // worker runs jobs one at a time, so random lives alone mostly land in the long retrains. From the loop's
        // middle on, every life does until a kill has landed mid-calibration (short loops cover it too).
        let hunt = iteration >= rounds / 2 && !run.kills_mid_job.contains_key(CALIBRATE);
        if rng.chance(1.0 / 3.0) || hunt {
            let deadline = Instant::now() + Duration::from_secs(6);
            while Instant::now() < deadline && !run.running(CALIBRATE) {
                std::thread::sleep(Duration::from_millis(2));
            }
            std::thread::sleep(Duration::from_millis(rng.range(0, 20)));
        }
        let mid_upload = in_flight.iter().any(|f| f.load(Ordering::SeqCst));
        server.kill();
        stop.store(true, Ordering::SeqCst);
        for t in threads {
            t.join().unwrap();
        }
        run.kills += 1;
        run.kills_mid_upload += mid_upload as usize;

        let leftover: Vec<Upload> = queue.lock().unwrap().drain(..).collect();
        for (u, reply) in std::mem::take(&mut *outcomes.lock().unwrap()) {
            run.sent.insert(u.id.clone(), u.clone());
            run.record(u, reply, &server);
        }
        run.pending.extend(leftover);

        let s = run.snapshot();
        run.check_offline(&s, &format!("after kill {} ({life} ms)", run.kills));
        for &(id, ref kind, _, attempts, _) in s.jobs_in(&["running"]) {
            run.interrupted.insert(id, attempts);
            *run.kills_mid_job.entry(kind.clone()).or_default() += 1;
        }
        before = Some(s);
    }

    // The last server: retry what was never acknowledged, then let it finish every job on its own.
    let mut server = start_server(bin, dir, &db, "server-final.log");
    wait_ready(&run, &mut server);
    run.check_restarted(&server, before.as_ref().unwrap(), &mut rng);
    while let Some(u) = run.pending.pop_front() {
        let reply = send_upload(server.port, &u);
        run.check(reply.is_ok(), Some(&server), || format!("retry of {}: {reply:?}", u.id));
        run.record(u, reply, &server);
    }
    let deadline = Instant::now() + Duration::from_secs(180);
    let settled = loop {
        let s = run.snapshot();
        let up_to_date = OP_KEYS.iter().all(|k| s.op_counts.get(*k) == s.latest_trained.get(*k))
            && s.calibrated == Some(s.comm_samples);
        if s.jobs_in(&["queued", "running"]).is_empty() && up_to_date {
            break s;
        }
        if Instant::now() > deadline {
            run.fail(
                Some(&server),
                format!(
                    "not settled after 180 s: jobs {:?}; op samples {:?}, newest versions trained on {:?}; \
                     {} comm samples, calibrated on {:?}",
                    s.jobs_in(&["queued", "running"]),
                    s.op_counts,
                    s.latest_trained,
                    s.comm_samples,
                    s.calibrated
                ),
            );
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    run.check_offline(&settled, "at the end");
    run.check_restarted(&server, &settled, &mut rng);
    let failed = settled.jobs_in(&["failed"]);
    run.check(failed.is_empty(), Some(&server), || format!("failed jobs: {failed:?}"));
    for (&id, &attempts) in &run.interrupted {
        let j = settled.jobs.iter().find(|j| j.0 == id).unwrap();
        run.check(j.2 == "succeeded" && j.3 > attempts, Some(&server), || {
            format!("job {id} interrupted at attempt {attempts} ended as {j:?}")
        });
    }
    for key in OP_KEYS {
        run.check(settled.active.iter().any(|(k, _)| k == key), Some(&server), || {
            format!("no active version of {key}: {:?}", settled.active)
        });
    }

    run.check(!settled.bundles.is_empty(), Some(&server), || "the bundle was never installed".into());

    let lost: Vec<&String> = run.acked.keys().filter(|id| !settled.profiles.contains_key(*id)).collect();
    println!(
        "{}: {} kills in {:.1} s (and one during the first start's bundle install, which had {}committed): {} with an \
         upload in flight, jobs interrupted {:?} ({} distinct, all re-run); {} uploads acknowledged ({} of them as \
         duplicates of a retried upload), {} lost; {} jobs, {} active models",
        db.name(),
        run.kills,
        started.elapsed().as_secs_f64(),
        if bundle_installed_before_kill { "" } else { "not " },
        run.kills_mid_upload,
        run.kills_mid_job,
        run.interrupted.len(),
        run.acked.len(),
        run.retried_duplicates,
        lost.len(),
        settled.jobs.len(),
        settled.active.len(),
    );
    let engine = db.name();
    assert!(lost.is_empty(), "{engine}: lost acknowledged uploads: {lost:?} (seed {seed})");
    assert_eq!(run.acked.len(), run.sent.len(), "{engine}: every upload acknowledged in the end (seed {seed})");
    assert_eq!(run.kills, rounds);
    assert!(!run.interrupted.is_empty(), "{engine}: no kill interrupted a job (seed {seed})");
    for kind in ["retrain", CALIBRATE] {
        assert!(
            run.kills_mid_job.contains_key(kind),
            "{engine}: no kill landed mid-{kind}: {:?} (seed {seed})",
            run.kills_mid_job
        );
    }
    assert!(run.kills_mid_upload > 0, "{engine}: no kill landed while an upload was in flight (seed {seed})");
    run.kills
}
