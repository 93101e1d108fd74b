//! The database under test, the server started on it, and the snapshot of what a killed process left behind.

use super::*;

// The database under test.

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Engine {
    Sqlite,
    Postgres,
}

/// Where one loop's database lives.
#[derive(Debug, Clone)]
pub struct Database {
    pub engine: Engine,
    /// The URL the server is started with.
    pub url: String,
    /// The URL the checks read it through (read-only on SQLite).
    pub read_url: String,
}

impl Database {
    pub fn sqlite(path: &Path) -> Database {
        let url = format!("sqlite://{}", path.display());
        Database { engine: Engine::Sqlite, read_url: format!("{url}?mode=ro"), url }
    }

    pub fn postgres(url: String) -> Database {
        Database { engine: Engine::Postgres, read_url: url.clone(), url }
    }

    pub fn name(&self) -> &'static str {
        match self.engine {
            Engine::Sqlite => "SQLite",
            Engine::Postgres => "PostgreSQL",
        }
    }
}

/// A server on `db`, configured so that kills land in every kind of work: retrains start at once after uploads
/// and finish in about a second; on PostgreSQL a 2 s job lease, so an interrupted job is claimed again soon after
/// the restart.
pub fn start_server(bin: &Path, dir: &Path, db: &Database, log: &str) -> Server {
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
pub struct Snapshot {
    /// `PRAGMA integrity_check` (SQLite; PostgreSQL has no per-database equivalent).
    pub integrity: Option<Vec<String>>,
    /// Rows whose parent row is missing, per `child → parent` relation.
    pub orphans: Vec<(&'static str, i64)>,
    /// id → (samples column, stored rows of every kind, op rows, comm rows).
    pub profiles: HashMap<String, (u64, u64, u64, u64)>,
    /// Keys with more than one active version.
    pub multi_active: Vec<String>,
    pub active: Vec<(String, i64)>,
    pub empty_models: i64,
    /// (id, kind, state, attempts).
    pub jobs: Vec<(i64, String, String, i64, Value)>,
    /// The calibration's sample count and the stored communication samples of [`SYSTEM`].
    pub calibrated: Option<i64>,
    pub comm_samples: i64,
    /// Op samples per key and the newest version's sample count per key.
    pub op_counts: BTreeMap<String, i64>,
    pub latest_trained: BTreeMap<String, i64>,
    /// Installed bundle versions; the bundled profiles' (samples column, stored rows).
    pub bundles: Vec<String>,
    pub bundled_profiles: Vec<(u64, u64)>,
}

impl Snapshot {
    pub fn jobs_in(&self, states: &[&str]) -> Vec<&(i64, String, String, i64, Value)> {
        self.jobs.iter().filter(|j| states.contains(&j.2.as_str())).collect()
    }

    pub fn calibration_pending(&self) -> bool {
        self.jobs_in(&["queued", "running"]).iter().any(|j| j.1 == "calibrate" && j.4["system"] == SYSTEM)
    }
}

/// The foreign keys of the schema (both engines' migrations): a query counting the rows that break each.
pub const ORPHANS: [(&str, &str); 9] = [
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
pub fn json_column(r: &sqlx::any::AnyRow, column: &str) -> Value {
    serde_json::from_str(&r.get::<String, _>(column)).unwrap_or(Value::Null)
}

pub async fn snapshot(db: &Database) -> Result<Snapshot, sqlx::Error> {
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
