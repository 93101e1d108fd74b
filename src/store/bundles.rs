//! The `bundles` table and the one transaction that installs a bundled measurement set (`crate::bundle`): its
//! systems, its profiles with their samples, its model versions, the calibrations its samples call for, and the
//! row that records the installed version.

use super::jobs::{create_job_in, FollowUpJob};
use super::profiles::{insert_profile_in, NewProfile, SampleBatch, Stored};
use super::regressors::{insert_regressors_in, NewRegressor, RegressorRecord};
use super::{Store, StoreError};
use crate::hw::SystemSpec;

/// SQLite page cache of the connection that installs a bundle, KiB: room for the whole install's pages.
const INSTALL_CACHE_KIB: u64 = 128 * 1024;

/// One profile of a bundle: the profile (its `raw` = the decompressed part), its gzip'd bytes as shipped, and its
/// samples.
#[derive(Debug, Clone)]
pub struct BundleProfile<'a> {
    pub profile: NewProfile<'a>,
    pub raw_gzip: Vec<u8>,
    pub samples: SampleBatch,
}

/// Everything one bundle installs.
#[derive(Debug, Clone)]
pub struct BundleInstall<'a> {
    /// The bundle's version (a hash of its contents).
    pub version: &'a str,
    /// Its manifest (stored with the version).
    pub manifest: &'a serde_json::Value,
    /// Systems its communication samples were measured on; created when missing (existing ones are left alone).
    pub systems: &'a [SystemSpec],
    /// Its profiles. Profiles of other bundle versions (label `bundle`) are deleted with their samples first.
    pub profiles: Vec<BundleProfile<'a>>,
    /// Its model versions, with their activation decided by the caller.
    pub regressors: &'a [NewRegressor],
    /// Jobs to queue with it (calibrations of its systems, a retrain).
    pub follow_ups: &'a [FollowUpJob],
}

/// What an install reports while it runs (the caller shows it: `service::startup`). Every method defaults to
/// doing nothing.
pub trait InstallObserver: Sync {
    /// Another process holds the install lock (a replica installing the same bundle on PostgreSQL); this one waits.
    fn waiting_for_replica(&self) {}
    /// The lock is held: writing begins.
    fn writing(&self) {}
    /// `n` more samples were written (inside the transaction).
    fn samples_written(&self, _n: u64) {}
    /// `n` more model versions were written (inside the transaction).
    fn models_written(&self, _n: u64) {}
    /// Everything is written; the commit runs.
    fn committing(&self) {}
}

/// An observer that ignores everything.
impl InstallObserver for () {}

/// What an install wrote.
#[derive(Debug, Clone, PartialEq)]
pub struct BundleInstalled {
    /// Profiles created (a profile whose bytes were uploaded before is not created twice).
    pub profiles: usize,
    /// Samples of the created profiles.
    pub samples: u64,
    /// Profiles of earlier bundle versions deleted.
    pub removed_profiles: u64,
    /// The model versions stored.
    pub regressors: Vec<RegressorRecord>,
}

impl Store {
    /// Whether bundle `version` is installed in this database.
    pub async fn bundle_installed(&self, version: &str) -> Result<bool, StoreError> {
        let n: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM bundles WHERE version = $1")
            .bind(version)
            .fetch_one(self.pool())
            .await?;
        Ok(n > 0)
    }

    /// The installed bundle versions with their install times, oldest first.
    pub async fn installed_bundles(&self) -> Result<Vec<(String, String)>, StoreError> {
        Ok(sqlx::query_as("SELECT version, installed_at FROM bundles ORDER BY installed_at, version")
            .fetch_all(self.pool())
            .await?)
    }

    /// Installs a bundle in one `BEGIN IMMEDIATE` transaction: a crash leaves the database as it was before or
    /// with the whole bundle, and a start that finds it missing installs it again. Installing a version that is
    /// installed already is a no-op (returns `None`). `observer` hears the progress.
    pub async fn install_bundle(
        &self,
        b: &BundleInstall<'_>,
        observer: &dyn InstallObserver,
    ) -> Result<Option<BundleInstalled>, StoreError> {
        let mut conn = self.pool().acquire().await?;
        if self.engine() != super::Engine::Sqlite {
            return self.install_bundle_on(&mut conn, b, observer).await;
        }
        // SQLite's page cache (2 MiB by default) spills dirty pages into the WAL while the transaction writes and
        // writes them again when they change: this connection gets room for the whole install (76 MB of pages)
        // while it runs, then the default again (or is closed, if that fails).
        sqlx::query(&format!("PRAGMA cache_size = -{INSTALL_CACHE_KIB}")).execute(&mut *conn).await?;
        let result = self.install_bundle_on(&mut conn, b, observer).await;
        if sqlx::query("PRAGMA cache_size = -2000").execute(&mut *conn).await.is_err() {
            let _ = conn.close().await;
        }
        result
    }

    /// [`Store::install_bundle`] on connection `conn`.
    async fn install_bundle_on(
        &self,
        conn: &mut sqlx::pool::PoolConnection<sqlx::Any>,
        b: &BundleInstall<'_>,
        observer: &dyn InstallObserver,
    ) -> Result<Option<BundleInstalled>, StoreError> {
        let mut tx = match self.engine() {
            super::Engine::Sqlite => sqlx::Connection::begin_with(&mut **conn, "BEGIN IMMEDIATE").await?,
            super::Engine::Postgres => sqlx::Connection::begin(&mut **conn).await?,
        };
        if self.engine() == super::Engine::Postgres {
            // Replicas starting at once on a new database: one installs, the others wait here, then find the row.
            let free: bool = sqlx::query_scalar("SELECT pg_try_advisory_xact_lock($1)")
                .bind(super::replicas::BUNDLE_LOCK)
                .fetch_one(&mut *tx)
                .await?;
            if !free {
                observer.waiting_for_replica();
                sqlx::query("SELECT pg_advisory_xact_lock($1)").bind(super::replicas::BUNDLE_LOCK).execute(&mut *tx).await?;
            }
        }
        let installed: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM bundles WHERE version = $1")
            .bind(b.version)
            .fetch_one(&mut *tx)
            .await?;
        if installed > 0 {
            return Ok(None);
        }
        observer.writing();
        let bundle = self.engine().json_text("labels", "bundle");
        let removed = sqlx::query(&format!("DELETE FROM profiles WHERE {bundle} IS NOT NULL AND {bundle} <> $1"))
        .bind(b.version)
        .execute(&mut *tx)
        .await?
        .rows_affected();
        for s in b.systems {
            let json = serde_json::to_string(s).map_err(|e| StoreError::Corrupt(e.to_string()))?;
            sqlx::query("INSERT INTO systems (name, spec) VALUES ($1, $2) ON CONFLICT DO NOTHING")
                .bind(&s.name)
                .bind(json)
                .execute(&mut *tx)
                .await?;
        }
        let (mut profiles, mut samples) = (0, 0);
        for p in &b.profiles {
            let written = &|n| observer.samples_written(n);
            if let Stored::Created(r) =
                insert_profile_in(&mut tx, self.engine(), &p.profile, p.raw_gzip.clone(), &p.samples, written).await?
            {
                profiles += 1;
                samples += r.samples;
            }
        }
        let mut regressors = Vec::with_capacity(b.regressors.len());
        for r in b.regressors {
            regressors.extend(insert_regressors_in(&mut tx, None, std::slice::from_ref(r)).await?);
            observer.models_written(1);
        }
        for job in b.follow_ups {
            create_job_in(&mut tx, self.engine(), &job.kind, &job.params, job.dedupe).await?;
        }
        sqlx::query("INSERT INTO bundles (version, manifest) VALUES ($1, $2)")
            .bind(b.version)
            .bind(b.manifest.to_string())
            .execute(&mut *tx)
            .await?;
        observer.committing();
        tx.commit().await?;
        self.note_system_change();
        Ok(Some(BundleInstalled { profiles, samples, removed_profiles: removed, regressors }))
    }
}
