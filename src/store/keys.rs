//! The `api_keys` table. Keys are `pck_<key_id>_<secret>`; only their SHA-256 is stored.

use sqlx::Row;

use super::{Store, StoreError};

/// A stored key (never the key itself).
#[derive(Debug, Clone, PartialEq)]
pub struct KeyRecord {
    pub key_id: String,
    pub name: String,
    /// `read` or `write` (write includes read).
    pub scope: String,
    /// Hex SHA-256 of the whole key.
    pub sha256: String,
    pub created_at: String,
    pub revoked_at: Option<String>,
    pub last_used_at: Option<String>,
}

fn decode(r: &sqlx::any::AnyRow) -> Result<KeyRecord, StoreError> {
    Ok(KeyRecord {
        key_id: r.try_get("key_id")?,
        name: r.try_get("name")?,
        scope: r.try_get("scope")?,
        sha256: r.try_get("sha256")?,
        created_at: r.try_get("created_at")?,
        revoked_at: r.try_get("revoked_at")?,
        last_used_at: r.try_get("last_used_at")?,
    })
}

const COLUMNS: &str = "key_id, name, scope, sha256, created_at, revoked_at, last_used_at";

/// Inserts one key row inside `tx` and returns it (both engines: `RETURNING`).
async fn insert(
    tx: &mut sqlx::Transaction<'_, sqlx::Any>,
    key_id: &str,
    name: &str,
    scope: &str,
    sha256: &str,
) -> Result<sqlx::any::AnyRow, sqlx::Error> {
    sqlx::query(&format!(
        "INSERT INTO api_keys (key_id, name, scope, sha256) VALUES ($1, $2, $3, $4) RETURNING {COLUMNS}"
    ))
    .bind(key_id)
    .bind(name)
    .bind(scope)
    .bind(sha256)
    .fetch_one(&mut **tx)
    .await
}

impl Store {
    /// Stores a key's id, name, scope and hash.
    pub async fn insert_key(
        &self,
        key_id: &str,
        name: &str,
        scope: &str,
        sha256: &str,
    ) -> Result<KeyRecord, StoreError> {
        let mut tx = self.begin().await?;
        let r = insert(&mut tx, key_id, name, scope, sha256).await.map_err(|e| match e {
            // Another replica provisioned the same configured key at the same moment.
            sqlx::Error::Database(d) if d.is_unique_violation() => StoreError::Conflict(format!("key {key_id}")),
            e => e.into(),
        })?;
        tx.commit().await?;
        decode(&r)
    }

    /// Stores the database's first key (id, name, scope, hash) unless a key exists; None when one does. Atomic
    /// across replicas starting at once on one empty database, so exactly one of them creates (and prints) a
    /// first key: on SQLite the check and the insert share one `BEGIN IMMEDIATE` transaction (one writer at a
    /// time); on PostgreSQL a transaction-scoped advisory lock ([`super::replicas::FIRST_KEY_LOCK`]) serializes
    /// them, and each check runs after the previous holder committed.
    pub async fn insert_first_key(
        &self,
        key_id: &str,
        name: &str,
        scope: &str,
        sha256: &str,
    ) -> Result<Option<KeyRecord>, StoreError> {
        let mut tx = self.begin().await?;
        if self.engine() == super::Engine::Postgres {
            sqlx::query("SELECT pg_advisory_xact_lock($1)")
                .bind(super::replicas::FIRST_KEY_LOCK)
                .execute(&mut *tx)
                .await?;
        }
        let existing: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM api_keys").fetch_one(&mut *tx).await?;
        if existing > 0 {
            tx.rollback().await?;
            return Ok(None);
        }
        let r = insert(&mut tx, key_id, name, scope, sha256).await?;
        tx.commit().await?;
        decode(&r).map(Some)
    }

    /// The key with this id, if any.
    pub async fn key(&self, key_id: &str) -> Result<Option<KeyRecord>, StoreError> {
        let r = sqlx::query(&format!("SELECT {COLUMNS} FROM api_keys WHERE key_id = $1"))
            .bind(key_id)
            .fetch_optional(self.pool())
            .await?;
        r.as_ref().map(decode).transpose()
    }

    /// Every key, oldest first.
    pub async fn list_keys(&self) -> Result<Vec<KeyRecord>, StoreError> {
        let rows = sqlx::query(&format!("SELECT {COLUMNS} FROM api_keys ORDER BY created_at, key_id"))
            .fetch_all(self.pool())
            .await?;
        rows.iter().map(decode).collect()
    }

    /// Revokes the keys whose id or name is `which`; returns how many.
    pub async fn revoke_key(&self, which: &str) -> Result<u64, StoreError> {
        let n = sqlx::query(&format!(
            "UPDATE api_keys SET revoked_at = {} WHERE (key_id = $1 OR name = $1) AND revoked_at IS NULL",
            self.engine().now()
        ))
        .bind(which)
        .execute(self.pool())
        .await?
        .rows_affected();
        Ok(n)
    }

    /// Notes a key's use (best effort; at most once a minute per key).
    pub async fn touch_key(&self, key_id: &str) -> Result<(), StoreError> {
        let e = self.engine();
        sqlx::query(&format!(
            "UPDATE api_keys SET last_used_at = {} WHERE key_id = $1 AND (last_used_at IS NULL OR last_used_at < {})",
            e.now(),
            e.now_plus(-60)
        ))
        .bind(key_id)
        .execute(self.pool())
        .await?;
        Ok(())
    }

    /// Whether any key exists (revoked ones included).
    pub async fn has_keys(&self) -> Result<bool, StoreError> {
        let n: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM api_keys").fetch_one(self.pool()).await?;
        Ok(n > 0)
    }
}

#[cfg(test)]
mod tests {
    use crate::store::testing::stores;

    /// Two replicas (two stores on one database, their connections opened beforehand) start eight bootstraps
    /// each at the same instant (a barrier) on the empty database: exactly one first key is stored, the one whose
    /// bootstrap answered Some; a later bootstrap creates none. Three rounds on fresh databases. (With the advisory
    /// lock removed, PostgreSQL stored 4–5 first keys in each of three runs of this test.)
    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn racing_first_key_bootstraps_store_exactly_one_key() {
        const TASKS: usize = 16;
        for _round in 0..3 {
            for store in stores().await {
                let other = store.reopen().await;
                // Open the pools' connections first, so the bootstraps below do not start staggered by connects.
                let warm = (0..TASKS).map(|i| if i % 2 == 0 { store.store.clone() } else { other.clone() });
                let warm: Vec<_> = warm.map(|s| tokio::spawn(async move { s.has_keys().await.unwrap() })).collect();
                for t in warm {
                    assert!(!t.await.unwrap());
                }
                let barrier = std::sync::Arc::new(tokio::sync::Barrier::new(TASKS));
                let mut tasks = Vec::new();
                for i in 0..TASKS {
                    let s = if i % 2 == 0 { store.store.clone() } else { other.clone() };
                    let barrier = barrier.clone();
                    tasks.push(tokio::spawn(async move {
                        let id = format!("{i:012x}");
                        barrier.wait().await;
                        s.insert_first_key(&id, "initial", "write", &format!("{i:064x}"))
                            .await
                            .unwrap()
                            .map(|k| k.key_id)
                    }));
                }
                let mut created = Vec::new();
                for t in tasks {
                    created.extend(t.await.unwrap());
                }
                assert_eq!(created.len(), 1, "first keys created on {}: {created:?}", store.engine().as_str());
                let keys = other.list_keys().await.unwrap();
                assert_eq!(keys.iter().map(|k| k.key_id.clone()).collect::<Vec<_>>(), created);
                assert_eq!((keys[0].name.as_str(), keys[0].scope.as_str()), ("initial", "write"));
                assert_eq!(store.insert_first_key("ffffffffffff", "late", "write", "f").await.unwrap(), None);
                assert_eq!(store.list_keys().await.unwrap().len(), 1);
            }
        }
    }
}
