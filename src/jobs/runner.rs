//! The job runner: wakes when samples arrive (debounced) or a job is queued, claims queued jobs one at a time,
//! runs each through its kind's file and records its end. A job left `running` by a crash is queued again at the
//! next start and re-run; until a retrain commits, the previous active models keep serving.
//!
//! Several replicas on one PostgreSQL database each run a runner: a job is claimed by exactly one of them
//! (`FOR UPDATE SKIP LOCKED`) under a lease its heartbeat renews, a job whose replica died is claimed again once
//! its lease expires, and only the elected trainer ([`TrainerLock`]) claims retrain jobs. Idle runners poll the
//! table every second there, since a job queued through another replica wakes only that replica's runner.

use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;
use tokio::task::JoinHandle;

use super::search::SearchRunner;
use super::{calibrate, calibrate_training, retrain, search, Job, JobKind, RetrainJob, WorkerConfig, WorkerHandle};
use crate::learn::SharedRegistry;
use crate::store::jobs::JobRecord;
use crate::store::replicas::TrainerLock;
use crate::store::{Engine, Store};

/// What the runner needs besides the store: the registry retrains publish to, its settings, the handle it
/// listens on, and the service's search.
struct Runner {
    store: Store,
    registry: SharedRegistry,
    config: WorkerConfig,
    handle: WorkerHandle,
    search: Arc<dyn SearchRunner>,
    /// This replica's name in the `owner` column of the jobs it runs (process id and a random suffix).
    owner: String,
}

/// A name for this process that no other replica has: `<pid>-<16 random hex digits>`.
fn owner_id() -> String {
    let mut bytes = [0u8; 8];
    if getrandom::getrandom(&mut bytes).is_err() {
        // No randomness: the start time still separates replicas.
        let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos());
        bytes = (nanos.unwrap_or(0) as u64).to_le_bytes();
    }
    format!("{}-{}", std::process::id(), hex::encode(bytes))
}

/// Starts the runner on the current tokio runtime: first re-queues jobs a crash interrupted, then serves jobs
/// until the task is aborted (a job in flight is then re-run at the next start).
pub fn spawn(
    store: Store,
    registry: SharedRegistry,
    config: WorkerConfig,
    handle: WorkerHandle,
    search: Arc<dyn SearchRunner>,
) -> JoinHandle<()> {
    spawn_after(std::future::ready(()), store, registry, config, handle, search)
}

/// [`spawn`], the runner beginning once `first` is done, in the same task (aborting it aborts both): a first
/// start installs the bundled samples after it is ready, and no job may train or calibrate on half of them.
pub fn spawn_after(
    first: impl std::future::Future<Output = ()> + Send + 'static,
    store: Store,
    registry: SharedRegistry,
    config: WorkerConfig,
    handle: WorkerHandle,
    search: Arc<dyn SearchRunner>,
) -> JoinHandle<()> {
    let runner = Runner { store, registry, config, handle, search, owner: owner_id() };
    tokio::spawn(async move {
        first.await;
        runner.serve().await
    })
}

impl Runner {
    async fn serve(self) {
        match self.store.requeue_interrupted_jobs().await {
            Ok(0) => {}
            Ok(n) => tracing::warn!(jobs = n, "re-queued jobs interrupted by a restart"),
            Err(e) => tracing::error!(error = %e, "cannot re-queue interrupted jobs"),
        }
        let mut trainer = TrainerLock::new();
        let mut was_trainer = false;
        let idle = match self.store.engine() {
            Engine::Sqlite => Duration::from_secs(60),
            Engine::Postgres => Duration::from_secs(1),
        };
        loop {
            let is_trainer = trainer.held(&self.store).await.unwrap_or_else(|e| {
                tracing::warn!(error = %e, "cannot take part in the trainer election");
                false
            });
            if is_trainer != was_trainer && self.store.engine() == Engine::Postgres {
                if is_trainer {
                    tracing::info!(owner = %self.owner, "elected trainer: this replica runs the retrain jobs");
                } else {
                    tracing::warn!(owner = %self.owner, "no longer the trainer (lost the database connection)");
                }
            }
            was_trainer = is_trainer;
            self.drain(is_trainer).await;
            tokio::select! {
                _ = self.handle.notified() => {}
                _ = tokio::time::sleep(idle) => {}
            }
            if self.handle.samples_pending() && self.config.auto_retrain {
                // Debounce: wait until uploads have been quiet for `debounce`.
                while self.handle.take_samples_changed() {
                    tokio::time::sleep(self.config.debounce).await;
                }
                if let Err(e) = super::enqueue(&self.store, &Job::Retrain(RetrainJob::automatic("new samples"))).await {
                    tracing::error!(error = %e, "cannot queue an automatic retrain");
                }
            }
        }
    }

    /// Claims and runs queued jobs (retrain jobs only when `trainer`) until none is left (or the store fails).
    async fn drain(&self, trainer: bool) {
        let kinds: Vec<&str> =
            JobKind::ALL.into_iter().filter(|k| trainer || *k != JobKind::Retrain).map(JobKind::as_str).collect();
        let lease_s = self.config.lease.as_secs().max(1) as i64;
        loop {
            let job = match self.store.claim_job_for(&kinds, &self.owner, lease_s).await {
                Ok(Some(job)) => job,
                Ok(None) => break,
                Err(e) => {
                    tracing::error!(error = %e, "cannot claim a job");
                    break;
                }
            };
            let id = job.id;
            tracing::info!(job = id, kind = %job.kind, attempt = job.attempts, "job started");
            let started = std::time::Instant::now();
            let heartbeat = self.heartbeat(id, lease_s);
            let outcome = self.run(&job).await;
            heartbeat.abort();
            crate::metrics::job(&job.kind, outcome.is_ok(), started.elapsed().as_secs_f64());
            let finished = match &outcome {
                Ok((msg, result)) => self.store.finish_job(id, &self.owner, true, msg, result).await,
                Err(e) => self.store.finish_job(id, &self.owner, false, e, &serde_json::json!({})).await,
            };
            match (finished, &outcome) {
                (Ok(true), Ok((msg, _))) => tracing::info!(job = id, %msg, "job finished"),
                (Ok(true), Err(e)) => tracing::error!(job = id, error = %e, "job failed"),
                // Another replica claimed the job after this one's lease expired (or a restart queued it again):
                // its run is the one that counts.
                (Ok(false), _) => tracing::warn!(
                    job = id,
                    succeeded = outcome.is_ok(),
                    "job ended here after this replica lost its lease; its result is discarded, the current owner's stands"
                ),
                (Err(e), _) => tracing::error!(job = id, error = %e, "cannot record the job's end"),
            }
        }
    }

    /// Renews this replica's lease on job `id` every third of the lease until aborted.
    fn heartbeat(&self, id: i64, lease_s: i64) -> JoinHandle<()> {
        let (store, owner) = (self.store.clone(), self.owner.clone());
        let every = Duration::from_millis((lease_s as u64 * 1000 / 3).max(500));
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(every).await;
                match store.renew_job_lease(id, &owner, lease_s).await {
                    Ok(true) => {}
                    Ok(false) => {
                        tracing::warn!(job = id, "lost the lease on a running job (another replica took it over)");
                        return;
                    }
                    Err(e) => tracing::warn!(job = id, error = %e, "cannot renew the lease on a running job"),
                }
            }
        })
    }

    /// Runs one claimed job; returns its message and result, or why it failed (the job's message).
    async fn run(&self, record: &JobRecord) -> Result<(String, serde_json::Value), String> {
        match Job::from_record(record).map_err(|e| e.to_string())? {
            Job::Retrain(params) => {
                let result = retrain::retrain(&self.store, &self.registry, &self.config, record.id, &params.params())
                    .await
                    .map_err(|e| e.to_string())?;
                Ok((result.message(), to_json(&result)?))
            }
            Job::Calibrate(params) => {
                let (msg, result) = calibrate::run(&self.store, &params).await.map_err(|e| e.to_string())?;
                Ok((msg, to_json(&result)?))
            }
            Job::CalibrateTraining(params) => {
                let (msg, result) = calibrate_training::run(&self.store, &params).await.map_err(|e| e.to_string())?;
                Ok((msg, to_json(&result)?))
            }
            Job::Search(req) => {
                let result = search::run(&self.store, self.search.as_ref(), record.id, *req).await?;
                Ok((search::message(&result), to_json(&result)?))
            }
        }
    }
}

fn to_json<T: Serialize>(result: &T) -> Result<serde_json::Value, String> {
    serde_json::to_value(result).map_err(|e| e.to_string())
}
