//! Storage: all SQL lives here, one module per table group. Two engines behind one pool of `sqlx::Any`
//! connections: SQLite by default (one file; WAL, STRICT tables, foreign keys, `BEGIN IMMEDIATE` for writes) and
//! PostgreSQL for several replicas sharing one database. Each operation has one query text where the SQL is
//! portable (`$1` placeholders, `ON CONFLICT`, `RETURNING`); the few engine-specific fragments (the clock, JSON
//! access, row locks) come from [`Engine`] (`dialect.rs`). Migrations (`migrations/sqlite/`,
//! `migrations/postgres/`) are embedded and applied at open.
//!
//! May import: the domain core (`hw`, `op`, `samples`, `comm`, …). Must not import `ingest`, `service`, `jobs`,
//! `api`, `app`, `cli` or `eval`.

pub mod bundles;
pub mod calibrations;
pub mod copy;
mod dialect;
pub mod gpus;
pub mod jobs;
pub mod keys;
pub mod profiles;
pub mod regressors;
pub mod replicas;
pub mod systems;
pub mod training_runs;
#[doc(hidden)]
pub mod testing;

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Once};
use std::time::Duration;

use sqlx::any::AnyPoolOptions;
use sqlx::AnyPool;
use sqlx::{Any, Executor, Transaction};

pub use dialect::Engine;

/// Storage failures. `Conflict` and `NotFound` are the client's business; the rest are ours.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// A row with this key exists.
    #[error("{0} already exists")]
    Conflict(String),
    /// No row with this key.
    #[error("{0} not found")]
    NotFound(String),
    /// A stored value no longer parses (a bug or a hand-edited database).
    #[error("stored data is corrupt: {0}")]
    Corrupt(String),
    #[error("database error: {0}")]
    Db(#[from] sqlx::Error),
    #[error("migration failed: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
    #[error("cannot create the database directory {path}: {source}")]
    Io { path: String, source: std::io::Error },
    /// A `database_url` that names neither engine.
    #[error("unsupported database URL {0:?}: use sqlite://PATH or postgres://USER@HOST/DATABASE")]
    Url(String),
}

/// The database: a connection pool over one SQLite file or one PostgreSQL database.
#[derive(Debug, Clone)]
pub struct Store {
    pool: AnyPool,
    engine: Engine,
    /// The URL without its password, for logs and `/readyz`.
    url: Arc<str>,
    /// Committed writes to what a prediction resolves a system with (systems, calibrations, imported GPUs),
    /// counted so that caches of resolved systems can tell they are stale (see [`Store::system_changes`]). On
    /// PostgreSQL the replica poller ([`replicas`]) also counts the writes other replicas committed.
    system_changes: Arc<AtomicU64>,
}

static DRIVERS: Once = Once::new();

impl Store {
    /// Opens the database at `url` — `sqlite://PATH` (created with its directory when missing) or
    /// `postgres://USER:PASSWORD@HOST:PORT/DATABASE` (which must exist) — applies the migrations and seeds the
    /// preset systems.
    ///
    /// Errors: an unsupported URL, the database cannot be reached or created, a migration fails.
    pub async fn connect(url: &str) -> Result<Store, StoreError> {
        if let Some(path) = url.strip_prefix("sqlite://").or_else(|| url.strip_prefix("sqlite:")) {
            let path = path.split('?').next().unwrap_or(path);
            return Store::open(Path::new(path)).await;
        }
        if !(url.starts_with("postgres://") || url.starts_with("postgresql://")) {
            return Err(StoreError::Url(dialect::redact(url)));
        }
        DRIVERS.call_once(sqlx::any::install_default_drivers);
        let pool = AnyPoolOptions::new()
            .max_connections(16)
            .acquire_timeout(Duration::from_secs(10))
            .connect(url)
            .await?;
        Store::from_pool(pool, Engine::Postgres, dialect::redact(url)).await
    }

    /// Opens (creating when missing) the SQLite database at `path`, applies the migrations and seeds the preset
    /// systems. The parent directory is created when missing.
    ///
    /// Errors: the directory or file cannot be created, the file is not a SQLite database, a migration fails.
    pub async fn open(path: &Path) -> Result<Store, StoreError> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)
                .map_err(|source| StoreError::Io { path: dir.display().to_string(), source })?;
        }
        let absolute = std::path::absolute(path)
            .map_err(|source| StoreError::Io { path: path.display().to_string(), source })?;
        DRIVERS.call_once(sqlx::any::install_default_drivers);
        let url = format!("sqlite://{}?mode=rwc", dialect::encode_path(&absolute.to_string_lossy()));
        let pool = AnyPoolOptions::new()
            .max_connections(8)
            .after_connect(|conn, _| {
                Box::pin(async move {
                    conn.execute("PRAGMA busy_timeout = 10000").await?;
                    conn.execute("PRAGMA journal_mode = WAL").await?;
                    conn.execute("PRAGMA synchronous = FULL").await?;
                    conn.execute("PRAGMA foreign_keys = ON").await?;
                    Ok(())
                })
            })
            .connect(&url)
            .await?;
        Store::from_pool(pool, Engine::Sqlite, format!("sqlite://{}", path.display())).await
    }

    /// Wraps a pool of `engine`, applying the migrations and seeding presets.
    async fn from_pool(pool: AnyPool, engine: Engine, url: String) -> Result<Store, StoreError> {
        match engine {
            Engine::Sqlite => sqlx::migrate!("./migrations/sqlite").run(&pool).await?,
            Engine::Postgres => sqlx::migrate!("./migrations/postgres").run(&pool).await?,
        }
        let store = Store { pool, engine, url: url.into(), system_changes: Arc::new(AtomicU64::new(0)) };
        store.seed_presets().await?;
        Ok(store)
    }

    /// The pool, for modules of this layer.
    pub(crate) fn pool(&self) -> &AnyPool {
        &self.pool
    }

    /// Which engine this store runs on.
    pub fn engine(&self) -> Engine {
        self.engine
    }

    /// The database's URL without its password (`sqlite://data/perfcast.db`, `postgres://perfcast@db/perfcast`).
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Starts a write transaction: `BEGIN IMMEDIATE` on SQLite (one writer at a time, no upgrade deadlocks), a
    /// plain `BEGIN` (read committed) on PostgreSQL.
    pub(crate) async fn begin(&self) -> Result<Transaction<'static, Any>, StoreError> {
        Ok(match self.engine {
            Engine::Sqlite => self.pool.begin_with("BEGIN IMMEDIATE").await?,
            Engine::Postgres => self.pool.begin().await?,
        })
    }

    /// How many writes to systems, calibrations and imported GPUs this store (and its clones) committed or, on
    /// PostgreSQL, saw other replicas commit: a value read before reading those tables tags what was read; a later
    /// different value means it may be stale.
    pub fn system_changes(&self) -> u64 {
        self.system_changes.load(Ordering::SeqCst)
    }

    /// Counts a committed write to systems, calibrations or imported GPUs (after the commit).
    pub(crate) fn note_system_change(&self) {
        self.system_changes.fetch_add(1, Ordering::SeqCst);
    }

    /// Checks that the database answers.
    pub async fn ping(&self) -> Result<(), StoreError> {
        sqlx::query("SELECT 1").execute(&self.pool).await?;
        Ok(())
    }

    /// Closes the pool, waiting for connections to finish (graceful shutdown).
    pub async fn close(&self) {
        self.pool.close().await;
    }
}

/// `insert` (an `INSERT INTO t (columns)`) with `rows` rows of `columns` placeholders each: `VALUES ($1, $2), ($3,
/// $4)` on PostgreSQL, `VALUES (?, ?), (?, ?)` on SQLite. SQLite gets anonymous placeholders because sqlx binds
/// every argument after asking SQLite for its parameter's name, and `sqlite3_bind_parameter_name` scans the
/// statement's list of named parameters: with `$N` names a statement of n parameters costs O(n²) — 90 % of a first
/// start's install was spent there (6,500 parameters per statement) — with `?` it costs O(n).
pub(crate) fn values_sql(engine: Engine, insert: &str, columns: usize, rows: usize) -> String {
    let mut sql = String::with_capacity(insert.len() + rows * columns * 6);
    sql.push_str(insert);
    sql.push_str(" VALUES ");
    for r in 0..rows {
        sql.push_str(if r == 0 { "(" } else { ", (" });
        for c in 0..columns {
            if c > 0 {
                sql.push_str(", ");
            }
            match engine {
                Engine::Sqlite => sql.push('?'),
                Engine::Postgres => {
                    sql.push('$');
                    sql.push_str(&(r * columns + c + 1).to_string());
                }
            }
        }
        sql.push(')');
    }
    sql
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_have_numbered_placeholders_on_postgres_and_anonymous_ones_on_sqlite() {
        let insert = "INSERT INTO t (a, b)";
        assert_eq!(values_sql(Engine::Postgres, insert, 2, 2), "INSERT INTO t (a, b) VALUES ($1, $2), ($3, $4)");
        assert_eq!(values_sql(Engine::Sqlite, insert, 2, 2), "INSERT INTO t (a, b) VALUES (?, ?), (?, ?)");
        assert_eq!(values_sql(Engine::Sqlite, insert, 3, 1), "INSERT INTO t (a, b) VALUES (?, ?, ?)");
    }
}
