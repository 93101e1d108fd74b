//! The job runner: wakes when samples arrive (debounced) or a job is queued, claims queued jobs one at a time,
//! runs each through its kind's file and records its end. A job left `running` by a crash is queued again at the
//! next start and re-run; until a retrain commits, the previous active models keep serving.

use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;
use tokio::task::JoinHandle;

use super::search::SearchRunner;
use super::{calibrate, retrain, search, Job, JobKind, RetrainJob, WorkerConfig, WorkerHandle};
use crate::learn::SharedRegistry;
use crate::store::jobs::JobRecord;
use crate::store::Store;

/// What the runner needs besides the store: the registry retrains publish to, its settings, the handle it
/// listens on, and the service's search.
struct Runner {
    store: Store,
    registry: SharedRegistry,
    config: WorkerConfig,
    handle: WorkerHandle,
    search: Arc<dyn SearchRunner>,
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
    let runner = Runner { store, registry, config, handle, search };
    tokio::spawn(async move { runner.serve().await })
}

impl Runner {
    async fn serve(self) {
        match self.store.requeue_interrupted_jobs().await {
            Ok(0) => {}
            Ok(n) => tracing::warn!(jobs = n, "re-queued jobs interrupted by a restart"),
            Err(e) => tracing::error!(error = %e, "cannot re-queue interrupted jobs"),
        }
        loop {
            self.drain().await;
            tokio::select! {
                _ = self.handle.notified() => {}
                _ = tokio::time::sleep(Duration::from_secs(60)) => {}
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

    /// Claims and runs queued jobs until none is left (or the store fails).
    async fn drain(&self) {
        let kinds = JobKind::ALL.map(JobKind::as_str);
        loop {
            let job = match self.store.claim_job(&kinds).await {
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
            let outcome = self.run(&job).await;
            crate::metrics::job(&job.kind, outcome.is_ok(), started.elapsed().as_secs_f64());
            let finished = match outcome {
                Ok((msg, result)) => {
                    tracing::info!(job = id, %msg, "job finished");
                    self.store.finish_job(id, true, &msg, &result).await
                }
                Err(e) => {
                    tracing::error!(job = id, error = %e, "job failed");
                    self.store.finish_job(id, false, &e, &serde_json::json!({})).await
                }
            };
            if let Err(e) = finished {
                tracing::error!(job = id, error = %e, "cannot record the job's end");
            }
        }
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
