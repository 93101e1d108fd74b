//! Learned models: retrain jobs, the model list, jobs.

use super::{Service, ServiceError};
use crate::jobs::{self, Job, RetrainJob, RetrainParams};
use crate::learn::accuracy_plot;
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

    /// The accuracy plot of `key`'s active version (SVG): its stored validation rows, measured vs the hold-out
    /// model's prediction and the analytic time, log–log with the y = x line; the title names the version and its
    /// validation MAPE on all its validation rows.
    ///
    /// Errors: `NotFound` for an unknown key; `NotReady` when the key has no active version, or its active version
    /// has no stored validation rows (trained before they were stored: a forced retrain stores them).
    pub async fn regressor_plot(&self, key: &str) -> Result<String, ServiceError> {
        let versions = self.store.regressor_versions(key).await?;
        let Some(active) = versions.iter().find(|v| v.active) else {
            return Err(ServiceError::NotReady {
                detail: format!(
                    "regressor {key:?} has no active version ({} trained, none promoted): there is no model to plot",
                    versions.len()
                ),
            });
        };
        let points = match self.store.validation_points(active.id).await? {
            Some(p) if !p.is_empty() => p,
            _ => {
                return Err(ServiceError::NotReady {
                    detail: format!(
                        "version {} of regressor {key:?} has no stored validation rows (it was trained before they \
                         were stored); POST /v1/regressors/retrain with {{\"keys\": [{key:?}], \"force\": true}} \
                         stores them with a new version",
                        active.version
                    ),
                })
            }
        };
        let title = format!(
            "{key} v{}: MAPE {:.1} % (analytic {:.1} %)",
            active.version,
            active.fit.validation_mape * 100.0,
            active.fit.analytic_validation_mape * 100.0
        );
        let shown = if points.len() as u64 == active.fit.validation_rows {
            String::new()
        } else {
            format!(", {} shown", points.len())
        };
        let subtitle = format!("predicted vs measured on {} validation rows{shown}", active.fit.validation_rows);
        accuracy_plot::svg(&title, &subtitle, &points)
            .map_err(|e| ServiceError::Internal(crate::store::StoreError::Corrupt(e.to_string())))
    }
}
