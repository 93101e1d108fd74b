//! The `bundles` table and the transactions that install a bundled measurement set (`crate::bundle`) in two
//! steps, so that a first start serves as soon as the models are in:
//!
//! 1. [`Store::install_bundle_models`], one transaction: its systems and its model versions (and the removal of
//!    an earlier bundle version's profiles). Predictions need nothing else.
//! 2. [`Store::install_bundle_profile`], one transaction per part: a profile with its samples (whole or not at all;
//!    a part stored before, by an interrupted start or a replica, is found by its SHA-256 and not written twice),
//!    then [`Store::finish_bundle`], one transaction: the calibrations and retrain its samples call for and the row
//!    that records the installed version — written only once every part is stored.
//!
//! A crash anywhere leaves every record whole; the next start finds the version unrecorded and goes on where the
//! last one stopped.

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

/// The first step of an install ([`Store::install_bundle_models`]).
#[derive(Debug, Clone)]
pub struct BundleModels<'a> {
    /// The bundle's version (a hash of its contents).
    pub version: &'a str,
    /// Systems its communication samples were measured on; created when missing (existing ones are left alone).
    pub systems: &'a [SystemSpec],
    /// Its model versions, with their activation decided by the caller (none for an install of the samples alone).
    pub regressors: &'a [NewRegressor],
}

/// What an install reports while it runs (the caller shows it: `service::startup`). Every method defaults to
/// doing nothing.
pub trait InstallObserver: Sync {
    /// Another process holds the install lock (a replica installing the same bundle on PostgreSQL); this one waits.
    fn waiting_for_replica(&self) {}
    /// `n` more samples were written (inside the transaction).
    fn samples_written(&self, _n: u64) {}
    /// `n` more model versions were written (inside the transaction).
    fn models_written(&self, _n: u64) {}
    /// Everything is written; the commit runs.
    fn committing(&self) {}
}

/// An observer that ignores everything.
impl InstallObserver for () {}

/// What [`Store::install_bundle_models`] did.
#[derive(Debug, Clone, PartialEq)]
pub enum ModelsInstalled {
    /// The version is installed already (its row is in `bundles`): nothing written.
    BundleInstalled,
    /// This version's models were stored by an earlier start that did not get to finish the samples (or by a
    /// replica): nothing written; the samples are still to install.
    StoredBefore,
    /// Written now: the model versions stored, and the profiles of earlier bundle versions deleted.
    Stored { regressors: Vec<RegressorRecord>, removed_profiles: u64 },
}

impl Store {
    /// Whether bundle `version` is installed in this database.
    pub async fn bundle_installed(&self, version: &str) -> Result<bool, StoreError> {
        bundle_row(self.pool(), version).await
    }

    /// Whether model versions of bundle `version` are stored (its first install step is done; the version may still
    /// lack its samples).
    pub async fn bundle_models_stored(&self, version: &str) -> Result<bool, StoreError> {
        Ok(bundle_regressors(self.pool(), self.engine(), version, Active::Any).await? > 0)
    }

    /// The installed bundle versions with their install times, oldest first.
    pub async fn installed_bundles(&self) -> Result<Vec<(String, String)>, StoreError> {
        Ok(sqlx::query_as("SELECT version, installed_at FROM bundles ORDER BY installed_at, version")
            .fetch_all(self.pool())
            .await?)
    }

    /// The first step of installing bundle `b.version` (module doc), in one transaction (`BEGIN IMMEDIATE` on
    /// SQLite; on PostgreSQL under the bundle lock, so replicas starting at once on one new database write it once):
    /// the profiles of other bundle versions (label `bundle`) are deleted with their samples, the systems created
    /// when missing, the model versions stored. Nothing is written when the version is installed or its models
    /// are stored already (see [`ModelsInstalled`]); a version whose `regressors` are empty (an install of the
    /// samples alone) is never "stored before". `observer` hears the progress.
    pub async fn install_bundle_models(
        &self,
        b: &BundleModels<'_>,
        observer: &dyn InstallObserver,
    ) -> Result<ModelsInstalled, StoreError> {
        let mut tx = self.begin_install(observer).await?;
        if bundle_row(&mut *tx, b.version).await? {
            return Ok(ModelsInstalled::BundleInstalled);
        }
        let bundle = self.engine().json_text("labels", "bundle");
        let stored = bundle_regressors(&mut *tx, self.engine(), b.version, Active::Any).await?;
        if stored > 0 && !b.regressors.is_empty() {
            return Ok(ModelsInstalled::StoredBefore);
        }
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
        let mut regressors = Vec::with_capacity(b.regressors.len());
        for r in b.regressors {
            regressors.extend(insert_regressors_in(&mut tx, None, std::slice::from_ref(r)).await?);
            observer.models_written(1);
        }
        observer.committing();
        tx.commit().await?;
        self.note_system_change();
        Ok(ModelsInstalled::Stored { regressors, removed_profiles: removed })
    }

    /// Stores one part of bundle `version` (module doc): profile `p` with its samples, in one transaction on
    /// `conn` (a connection the caller holds for all the parts: on SQLite it gets a page cache with room for the
    /// largest part). A part stored before is not written again ([`Stored::Duplicate`]). `observer` hears the
    /// samples written.
    pub async fn install_bundle_profile(
        &self,
        conn: &mut InstallConnection,
        p: &BundleProfile<'_>,
        observer: &dyn InstallObserver,
    ) -> Result<Stored, StoreError> {
        let mut tx = match self.engine() {
            super::Engine::Sqlite => sqlx::Connection::begin_with(&mut *conn.0, "BEGIN IMMEDIATE").await?,
            super::Engine::Postgres => sqlx::Connection::begin(&mut *conn.0).await?,
        };
        let written = &|n| observer.samples_written(n);
        let stored =
            insert_profile_in(&mut tx, self.engine(), &p.profile, p.raw_gzip.clone(), &p.samples, written).await?;
        tx.commit().await?;
        Ok(stored)
    }

    /// A connection for [`Store::install_bundle_profile`]: on SQLite with a page cache of 128 MiB while it is held
    /// (SQLite's 2 MiB default spills dirty pages into the WAL while a part is written and writes them again when
    /// they change), back to the default when dropped through [`Store::end_install`].
    pub async fn install_connection(&self) -> Result<InstallConnection, StoreError> {
        let mut conn = self.pool().acquire().await?;
        if self.engine() == super::Engine::Sqlite {
            sqlx::query(&format!("PRAGMA cache_size = -{INSTALL_CACHE_KIB}")).execute(&mut *conn).await?;
        }
        Ok(InstallConnection(conn))
    }

    /// Returns `conn` to the pool with SQLite's default page cache (or closes it, if that fails).
    pub async fn end_install(&self, mut conn: InstallConnection) {
        if self.engine() == super::Engine::Sqlite
            && sqlx::query("PRAGMA cache_size = -2000").execute(&mut *conn.0).await.is_err()
        {
            let _ = conn.0.close().await;
        }
    }

    /// The last step of installing bundle `version` (module doc), once every part is stored: queues `follow_ups`
    /// (the calibrations of its systems), and a retrain when one of its model versions was stored inactive (a
    /// model trained in this database is active for that key: the retrain compares them on the same held-out
    /// rows), then records the version with its `manifest` — in one transaction, under the bundle lock on
    /// PostgreSQL. Returns false (nothing written) when the version is recorded already (a replica finished first).
    pub async fn finish_bundle(
        &self,
        version: &str,
        manifest: &serde_json::Value,
        follow_ups: &[FollowUpJob],
        retrain: &FollowUpJob,
    ) -> Result<bool, StoreError> {
        let mut tx = self.begin_install(&()).await?;
        if bundle_row(&mut *tx, version).await? {
            return Ok(false);
        }
        let inactive = bundle_regressors(&mut *tx, self.engine(), version, Active::Inactive).await?;
        for job in follow_ups.iter().chain((inactive > 0).then_some(retrain)) {
            create_job_in(&mut tx, self.engine(), &job.kind, &job.params, job.dedupe).await?;
        }
        sqlx::query("INSERT INTO bundles (version, manifest) VALUES ($1, $2)")
            .bind(version)
            .bind(manifest.to_string())
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(true)
    }

    /// A write transaction for an install step: `BEGIN IMMEDIATE` on SQLite; on PostgreSQL the bundle's advisory
    /// lock (replicas starting at once on one new database: one writes, the others wait here, then find its rows).
    async fn begin_install(
        &self,
        observer: &dyn InstallObserver,
    ) -> Result<sqlx::Transaction<'static, sqlx::Any>, StoreError> {
        let mut tx = self.begin().await?;
        if self.engine() == super::Engine::Postgres {
            let free: bool = sqlx::query_scalar("SELECT pg_try_advisory_xact_lock($1)")
                .bind(super::replicas::BUNDLE_LOCK)
                .fetch_one(&mut *tx)
                .await?;
            if !free {
                observer.waiting_for_replica();
                sqlx::query("SELECT pg_advisory_xact_lock($1)")
                    .bind(super::replicas::BUNDLE_LOCK)
                    .execute(&mut *tx)
                    .await?;
            }
        }
        Ok(tx)
    }
}

/// A connection held for the parts of an install ([`Store::install_connection`]).
pub struct InstallConnection(sqlx::pool::PoolConnection<sqlx::Any>);

impl std::fmt::Debug for InstallConnection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("InstallConnection")
    }
}

/// Whether `version` is recorded in `bundles`, read through `db` (the pool, or a transaction).
async fn bundle_row<'c, E>(db: E, version: &str) -> Result<bool, StoreError>
where
    E: sqlx::Executor<'c, Database = sqlx::Any>,
{
    let n: i64 =
        sqlx::query_scalar("SELECT COUNT(*) FROM bundles WHERE version = $1").bind(version).fetch_one(db).await?;
    Ok(n > 0)
}

/// Which model versions [`bundle_regressors`] counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Active {
    Any,
    /// Stored inactive (a model trained in this database was active for the key).
    Inactive,
}

/// The model versions (`regressors` rows) whose provenance names bundle `version`, read through `db` (the pool, or
/// a transaction on `engine`).
async fn bundle_regressors<'c, E>(db: E, engine: super::Engine, version: &str, which: Active) -> Result<i64, StoreError>
where
    E: sqlx::Executor<'c, Database = sqlx::Any>,
{
    let of_version = engine.json_text("provenance", "bundle");
    let inactive = if which == Active::Inactive { " AND active = 0" } else { "" };
    let sql = format!("SELECT COUNT(*) FROM regressors WHERE {of_version} = $1{inactive}");
    Ok(sqlx::query_scalar(&sql).bind(version).fetch_one(db).await?)
}
