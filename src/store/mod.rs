//! Storage: all SQL lives here, one module per table group. SQLite by default (WAL, STRICT tables, foreign
//! keys, `BEGIN IMMEDIATE` for writes); migrations from `migrations/` are embedded and applied at open.
//!
//! May import: the domain core (`hw`, `op`, `samples`, `comm`, …). Must not import `ingest`, `service`, `jobs`,
//! `api`, `app`, `cli` or `eval`.

pub mod bundles;
pub mod calibrations;
pub mod gpus;
pub mod jobs;
pub mod keys;
pub mod profiles;
pub mod regressors;
pub mod systems;

use std::path::Path;
use std::str::FromStr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteSynchronous};

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
}

/// The database: a connection pool over one SQLite file.
#[derive(Debug, Clone)]
pub struct Store {
    pool: SqlitePool,
    /// Committed writes to what a prediction resolves a system with (systems, calibrations, imported GPUs),
    /// counted so that caches of resolved systems can tell they are stale (see [`Store::system_changes`]).
    system_changes: Arc<AtomicU64>,
}

impl Store {
    /// Opens (creating when missing) the SQLite database at `path`, applies the migrations and seeds the preset
    /// systems. The parent directory is created when missing.
    ///
    /// Errors: the directory or file cannot be created, the file is not a SQLite database, a migration fails.
    pub async fn open(path: &Path) -> Result<Store, StoreError> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)
                .map_err(|source| StoreError::Io { path: dir.display().to_string(), source })?;
        }
        let options = SqliteConnectOptions::from_str("sqlite://")?
            .filename(path)
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Full)
            .foreign_keys(true)
            .busy_timeout(Duration::from_secs(10));
        let pool = SqlitePoolOptions::new().max_connections(8).connect_with(options).await?;
        Store::from_pool(pool).await
    }

    /// Wraps an existing pool (tests use `#[sqlx::test]`'s), applying migrations and seeding presets.
    pub async fn from_pool(pool: SqlitePool) -> Result<Store, StoreError> {
        sqlx::migrate!("./migrations").run(&pool).await?;
        let store = Store { pool, system_changes: Arc::new(AtomicU64::new(0)) };
        store.seed_presets().await?;
        Ok(store)
    }

    /// The pool, for modules of this layer.
    pub(crate) fn pool(&self) -> &SqlitePool {
        &self.pool
    }

    /// How many writes to systems, calibrations and imported GPUs this store (and its clones) committed: a value
    /// read before reading those tables tags what was read; a later different value means it may be stale.
    /// Writes by other processes on the same file are not counted.
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
