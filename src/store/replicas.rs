//! What replicas sharing one PostgreSQL database coordinate through it: the advisory locks (the elected trainer,
//! bundle installation, the first API key, same-bytes uploads) and the cheap fingerprints a replica polls to notice
//! what others committed (new active model versions; systems, calibrations and imported GPUs). On SQLite (one process) the
//! trainer lock is always held and the fingerprints serve the same purpose for other processes on the file.

use sqlx::AnyConnection;
use sqlx::{Connection, Row};

use super::{Engine, Store, StoreError};

/// Advisory lock key of the elected trainer (session-scoped, on a dedicated connection).
pub(crate) const TRAINER_LOCK: i64 = 0x7065_7266_0001;
/// Advisory lock key of the bundle installation (transaction-scoped).
pub(crate) const BUNDLE_LOCK: i64 = 0x7065_7266_0002;
/// Advisory lock key of the first API key's creation on an empty database (transaction-scoped).
pub(crate) const FIRST_KEY_LOCK: i64 = 0x7065_7266_0003;

/// Advisory lock key of the upload with this SHA-256 (hex): its first 15 hex digits (transaction-scoped).
pub(crate) fn upload_lock(sha256: &str) -> i64 {
    let digits: String = sha256.chars().filter(|c| c.is_ascii_hexdigit()).take(15).collect();
    i64::from_str_radix(&digits, 16).unwrap_or(0)
}

/// The election of the one replica that retrains: a PostgreSQL session advisory lock held on a connection of its
/// own. When the holder dies its connection closes and the lock is released, so another replica's next
/// [`TrainerLock::held`] wins it.
#[derive(Debug, Default)]
pub struct TrainerLock {
    /// The connection holding the lock (PostgreSQL), or trying to.
    conn: Option<AnyConnection>,
    held: bool,
}

impl TrainerLock {
    /// A lock not yet tried.
    pub fn new() -> TrainerLock {
        TrainerLock::default()
    }

    /// Whether this process is the trainer, trying to become it when it is not. Always true on SQLite (one
    /// process serves a file). On PostgreSQL, checks that the holding connection is alive (a lost connection lost
    /// the lock) and otherwise tries `pg_try_advisory_lock`. Errors: the database cannot be reached (not the
    /// trainer until it can).
    pub async fn held(&mut self, store: &Store) -> Result<bool, StoreError> {
        if store.engine() == Engine::Sqlite {
            return Ok(true);
        }
        if self.conn.is_none() {
            self.held = false;
            self.conn = Some(store.pool().acquire().await?.detach());
        }
        let Some(conn) = self.conn.as_mut() else { return Ok(false) };
        let outcome = if self.held {
            conn.ping().await.map(|_| true)
        } else {
            sqlx::query("SELECT pg_try_advisory_lock($1)")
                .bind(TRAINER_LOCK)
                .fetch_one(&mut *conn)
                .await
                .and_then(|r| r.try_get::<bool, _>(0))
        };
        match outcome {
            Ok(held) => {
                self.held = held;
                Ok(held)
            }
            Err(e) => {
                self.conn = None;
                self.held = false;
                Err(e.into())
            }
        }
    }
}

impl Store {
    /// A fingerprint of the active model versions (highest active id and how many): it changes whenever any
    /// replica activates a version.
    pub async fn models_fingerprint(&self) -> Result<(i64, i64), StoreError> {
        let r = sqlx::query("SELECT COALESCE(MAX(id), 0) AS top, COUNT(*) AS n FROM regressors WHERE active = 1")
            .fetch_one(self.pool())
            .await?;
        Ok((r.try_get("top")?, r.try_get("n")?))
    }

    /// A fingerprint of what a prediction resolves a system with (how many systems, the newest calibration and
    /// imported GPU): it changes whenever any replica writes one of them.
    pub async fn systems_fingerprint(&self) -> Result<String, StoreError> {
        let r = sqlx::query(
            "SELECT (SELECT COUNT(*) FROM systems) AS systems,
                    (SELECT COALESCE(MAX(created_at), '') FROM system_calibrations) AS calibrated,
                    (SELECT COUNT(*) FROM system_calibrations) AS calibrations,
                    (SELECT COALESCE(MAX(created_at), '') FROM training_calibrations) AS training,
                    (SELECT COALESCE(MAX(updated_at), '') FROM gpus) AS gpus",
        )
        .fetch_one(self.pool())
        .await?;
        Ok(format!(
            "{}/{}/{}/{}/{}",
            r.try_get::<i64, _>("systems")?,
            r.try_get::<String, _>("calibrated")?,
            r.try_get::<i64, _>("calibrations")?,
            r.try_get::<String, _>("training")?,
            r.try_get::<String, _>("gpus")?
        ))
    }

    /// Counts a write another replica committed to systems, calibrations or GPUs (seen by the replica poller), so
    /// caches keyed by [`Store::system_changes`] reload.
    pub fn note_external_system_change(&self) {
        self.note_system_change();
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn upload_locks_fit_in_a_bigint() {
        assert_eq!(super::upload_lock("ffffffffffffffffff"), 0x0fff_ffff_ffff_ffff);
        assert_eq!(super::upload_lock("0000000000000001ab"), 0);
    }
}
