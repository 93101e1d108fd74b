//! Test support (not part of the API): the store's tests run on every engine at hand — a fresh SQLite file always,
//! and a fresh PostgreSQL database when `PERFCAST_TEST_POSTGRES_URL` names a server (`scripts/test` starts a
//! throwaway one; `scripts/pg-temp` does it by hand). Without it the PostgreSQL half is skipped with a notice.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};

use sqlx::AnyConnection;
use sqlx::{Connection, Executor};

use super::{Store, StoreError};

/// The variable naming the PostgreSQL server of the tests (a URL whose user may create databases).
pub const POSTGRES_URL_VAR: &str = "PERFCAST_TEST_POSTGRES_URL";

/// A store for one test; a SQLite one's directory is removed when it is dropped.
#[derive(Debug)]
pub struct TestStore {
    /// The store.
    pub store: Store,
    /// Its URL (with the password): another replica or a restart opens it again.
    pub url: String,
    dir: Option<PathBuf>,
}

impl TestStore {
    /// The same database opened again (a restart, or a second replica).
    pub async fn reopen(&self) -> Store {
        Store::connect(&self.url).await.unwrap_or_else(|e| panic!("reopening the test store: {e}"))
    }
}

impl std::ops::Deref for TestStore {
    type Target = Store;
    fn deref(&self) -> &Store {
        &self.store
    }
}

impl Drop for TestStore {
    fn drop(&mut self) {
        if let Some(dir) = &self.dir {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

static COUNTER: AtomicU64 = AtomicU64::new(0);

fn unique(prefix: &str) -> String {
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0);
    format!("{prefix}_{}_{}_{}", std::process::id(), COUNTER.fetch_add(1, Ordering::SeqCst), nanos % 1_000_000_000)
}

/// A fresh store on every engine at hand: SQLite first, then PostgreSQL when [`POSTGRES_URL_VAR`] is set (else a
/// notice on stderr). Panics when a store cannot be made (tests only).
pub async fn stores() -> Vec<TestStore> {
    let mut out = vec![sqlite().await];
    match postgres().await {
        Some(s) => out.push(s),
        None => eprintln!("note: {POSTGRES_URL_VAR} is not set; the PostgreSQL half of this store test is skipped"),
    }
    out
}

/// A fresh SQLite store in a temporary directory.
pub async fn sqlite() -> TestStore {
    let dir = std::env::temp_dir().join(unique("perfcast-test"));
    let path = dir.join("perfcast.db");
    let store = Store::open(&path).await.unwrap_or_else(|e| panic!("test SQLite store: {e}"));
    TestStore { store, url: format!("sqlite://{}", path.display()), dir: Some(dir) }
}

/// A fresh PostgreSQL store (a new database on the test server), or None without [`POSTGRES_URL_VAR`].
pub async fn postgres() -> Option<TestStore> {
    let url = fresh_postgres_database().await?.unwrap_or_else(|e| panic!("test PostgreSQL database: {e}"));
    let store = Store::connect(&url).await.unwrap_or_else(|e| panic!("test PostgreSQL store: {e}"));
    Some(TestStore { store, url, dir: None })
}

/// Creates an empty database on the test server and returns its URL; None without [`POSTGRES_URL_VAR`].
pub async fn fresh_postgres_database() -> Option<Result<String, StoreError>> {
    let admin = std::env::var(POSTGRES_URL_VAR).ok().filter(|u| !u.is_empty())?;
    let name = unique("perfcast_test");
    Some(
        async {
            sqlx::any::install_default_drivers();
            let mut conn = AnyConnection::connect(&admin).await?;
            conn.execute(format!("CREATE DATABASE {name}").as_str()).await?;
            conn.close().await?;
            Ok(with_database(&admin, &name))
        }
        .await,
    )
}

/// `url` naming database `name` instead of its own.
pub fn with_database(url: &str, name: &str) -> String {
    let (head, query) = match url.split_once('?') {
        Some((h, q)) => (h, format!("?{q}")),
        None => (url, String::new()),
    };
    let start = head.find("://").map(|i| i + 3).unwrap_or(0);
    let base = match head[start..].find('/') {
        Some(i) => &head[..start + i],
        None => head,
    };
    format!("{base}/{name}{query}")
}

#[cfg(test)]
mod tests {
    #[test]
    fn database_names_are_replaced() {
        assert_eq!(super::with_database("postgres://u@h:5/postgres", "t1"), "postgres://u@h:5/t1");
        assert_eq!(super::with_database("postgres://u@h:5", "t1"), "postgres://u@h:5/t1");
        assert_eq!(super::with_database("postgres://u@h/p?sslmode=disable", "t"), "postgres://u@h/t?sslmode=disable");
    }
}
