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
//! - the bundled measurements and models (installed at the first start: the models in one transaction, then each
//!   part of the samples in one, then the version's row) leave no part half-written, and the version is recorded
//!   only with every part — the first start is killed partway through its install once, and the next start goes
//!   on where it stopped;
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

#[path = "../support/mod.rs"]
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

mod database;
mod run;
mod uploads;

use database::*;
use run::*;
use uploads::*;

/// Waits until the server is ready and its bundled samples are in (`/readyz` 200 without `bundled_samples`: a start
/// after the first installs nothing, but the restart after the kill during the first start's install goes on with
/// it after it is ready, and the job runner begins only then). The limit only guards against a hang: on a loaded
/// 2-core machine the install took 60 s before it was made fast.
fn wait_ready(run: &Run, server: &mut Server) {
    let start = Instant::now();
    loop {
        let left = Duration::from_secs(180).saturating_sub(start.elapsed());
        match server.wait_ready(left) {
            Err(e) => run.fail(Some(server), e),
            Ok(ready) if ready.get("bundled_samples").is_none() => return,
            Ok(_) if left.is_zero() => run.fail(Some(server), "the bundled samples were not in after 180 s".into()),
            Ok(_) => std::thread::sleep(Duration::from_millis(50)),
        }
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

    // The first start installs the bundled models, then the samples (seconds): kill it partway.
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
        // middle on, every life does until a kill has landed mid-calibration (short loops cover it too), and waits
        // up to 120 s: a retrain that outlasts 6 s (a loaded machine) would otherwise be killed and re-queued ahead
        // of the calibration in every life, which then never runs.
        let hunt = iteration >= rounds / 2 && !run.kills_mid_job.contains_key(CALIBRATE);
        if rng.chance(1.0 / 3.0) || hunt {
            let deadline = Instant::now() + Duration::from_secs(if hunt { 120 } else { 6 });
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
    // A hang guard, not a speed target: the queued retrains each read 10⁵ rows and train; on the 2-core VM with
    // four builds beside it (load average 11) one took 30–60 s, and six were queued.
    let deadline = Instant::now() + Duration::from_secs(600);
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
                    "not settled after 600 s: jobs {:?}; op samples {:?}, newest versions trained on {:?}; \
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
