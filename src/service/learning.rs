//! Learned models: retrain jobs, the model list, jobs.

use super::{Service, ServiceError};
use crate::jobs::{self, Job, RetrainJob, RetrainParams};
use crate::store::jobs::JobRecord;
use crate::store::regressors::RegressorRecord;

impl Service {
    /// Queues a retrain job (or returns the one already queued with the same parameters) and wakes the worker.
    pub async fn request_retrain(&self, params: &RetrainParams) -> Result<JobRecord, ServiceError> {
        if let Some(keys) = &params.keys {
            if keys.is_empty() {
                return Err(ServiceError::invalid("keys", "give at least one key, or leave keys out for all"));
            }
        }
        let job = jobs::enqueue(&self.store, &Job::Retrain(RetrainJob::Requested(params.clone()))).await?;
        self.worker.wake();
        Ok(job)
    }

    /// One job. Errors: `NotFound`.
    pub async fn job(&self, id: i64) -> Result<JobRecord, ServiceError> {
        Ok(self.store.get_job(id).await?)
    }

    /// Every model version, by key and version.
    pub async fn regressors(&self) -> Result<Vec<RegressorRecord>, ServiceError> {
        Ok(self.store.list_regressors().await?)
    }

    /// All versions of one key, newest first. Errors: `NotFound`.
    pub async fn regressor(&self, key: &str) -> Result<Vec<RegressorRecord>, ServiceError> {
        Ok(self.store.regressor_versions(key).await?)
    }
}
