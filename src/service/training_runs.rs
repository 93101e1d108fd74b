//! Training runs users upload to calibrate a system × framework's training predictions: parse the log
//! ([`crate::ingest::training_log`]), predict its configuration uncalibrated, store the pair and queue the
//! calibration job in one transaction ([`crate::jobs::calibrate_training`]).

use super::{Service, ServiceError};
use crate::ingest::training_log::{step_times, LogFormat, RunScale};
use crate::jobs::calibrate_training::CalibrateTrainingParams;
use crate::jobs::{self, Job};
use crate::llm::calibration::TrainingCalibration;
use crate::llm::TrainingRequest;
use crate::store::jobs::JobRecord;
use crate::store::training_runs::{NewTrainingRun, StoredTrainingRun};

/// Most bytes of one uploaded log (the JSON body limit bounds it too).
pub const MAX_LOG_BYTES: usize = 16 << 20;

/// An uploaded run: the log, its format and the configuration that ran it.
#[derive(Debug, Clone)]
pub struct TrainingRunUpload {
    pub format: LogFormat,
    /// The configuration, as a training-prediction request (its `system` is the run's system).
    pub config: TrainingRequest,
    /// The body of the request's `config`, stored as given.
    pub config_json: serde_json::Value,
    pub log: String,
}

/// A system's runs and its calibrations.
#[derive(Debug, Clone)]
pub struct TrainingRuns {
    pub runs: Vec<StoredTrainingRun>,
    pub calibrations: Vec<TrainingCalibration>,
}

impl Service {
    /// Stores one run of `system` and queues its system × framework's calibration (both or neither); returns the
    /// stored run and the job. Nothing is stored on an error. Errors: `NotFound` for an unknown system;
    /// `Invalid` naming `config.system` (another system than the path's) or the configuration's field as
    /// `config.<field>`, or `log` when it is too long; `Unparseable` naming the log line that is a step line of
    /// the format but does not parse (or no line for a log without two step lines).
    pub async fn upload_training_run(
        &self,
        system: &str,
        upload: &TrainingRunUpload,
    ) -> Result<(StoredTrainingRun, JobRecord), ServiceError> {
        self.system_context(system, "system").await?;
        if upload.config.system != system {
            return Err(ServiceError::invalid(
                "config.system",
                format!("the configuration names system `{}`, the run is uploaded to `{system}`", upload.config.system),
            ));
        }
        if upload.log.len() > MAX_LOG_BYTES {
            return Err(ServiceError::invalid("log", format!("the log is longer than {MAX_LOG_BYTES} bytes")));
        }
        let predicted = self.predict_training_uncalibrated(&upload.config).await.map_err(|e| match e {
            ServiceError::Invalid { field, message } => {
                ServiceError::Invalid { field: format!("config.{field}"), message }
            }
            other => other,
        })?;
        let scale = RunScale {
            global_batch: predicted.config.global_batch,
            seq_len: upload.config.model.seq_len as u64,
            gpus: predicted.config.gpus,
        };
        let times = step_times(upload.format, &upload.log, &scale).map_err(|e| ServiceError::Unparseable {
            line: (e.line > 0).then_some(e.line),
            column: None,
            message: e.message,
        })?;
        let job = jobs::follow_up(&Job::CalibrateTraining(CalibrateTrainingParams {
            system: system.to_string(),
            framework: upload.config.framework,
        }));
        let run = NewTrainingRun {
            system,
            framework: upload.config.framework.as_str(),
            format: upload.format.as_str(),
            config: &upload.config_json,
            log: &upload.log,
            steps: times.steps.len() as u64,
            warmup_steps: times.warmup_dropped as u64,
            measured_iteration_s: times.iteration_s,
            predicted_iteration_s: predicted.iteration_time_s,
        };
        let stored = self.store.insert_training_run(&run, &job).await?;
        self.worker.wake();
        Ok(stored)
    }

    /// The runs uploaded to `system` and its calibrations. Errors: `NotFound` for an unknown system.
    pub async fn training_runs(&self, system: &str) -> Result<TrainingRuns, ServiceError> {
        self.system_context(system, "system").await?;
        Ok(TrainingRuns {
            runs: self.store.training_runs(system).await?,
            calibrations: self.store.training_calibrations(system).await?,
        })
    }
}
