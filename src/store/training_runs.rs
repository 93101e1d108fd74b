//! The `training_runs` and `training_calibrations` tables: the runs users uploaded to calibrate a system ×
//! framework's training predictions, and the calibration fitted to them ([`crate::llm::calibration`]).

use sqlx::Row;

use super::jobs::{create_job_in, FollowUpJob, JobRecord};
use super::{Store, StoreError};
use crate::llm::calibration::{RunPair, TrainingCalibration};

/// A run to store.
#[derive(Debug, Clone, PartialEq)]
pub struct NewTrainingRun<'a> {
    pub system: &'a str,
    /// `megatron`, `nemo`, `torchtitan`, `deepspeed` or `hf`.
    pub framework: &'a str,
    /// The log's format (`megatron`, `torchtitan`, `mllog`, `deepspeed`).
    pub format: &'a str,
    /// The configuration (a training-prediction request).
    pub config: &'a serde_json::Value,
    pub log: &'a str,
    /// Step lines the log held.
    pub steps: u64,
    /// Of them dropped as warm-up.
    pub warmup_steps: u64,
    /// Median iteration time after the warm-up, s.
    pub measured_iteration_s: f64,
    /// perfcast's uncalibrated prediction for the configuration at upload, s.
    pub predicted_iteration_s: f64,
}

/// A stored run (without its log text).
#[derive(Debug, Clone, PartialEq)]
pub struct StoredTrainingRun {
    pub id: i64,
    pub system: String,
    pub framework: String,
    pub format: String,
    pub config: serde_json::Value,
    /// Bytes of the stored log.
    pub log_bytes: u64,
    pub steps: u64,
    pub warmup_steps: u64,
    pub measured_iteration_s: f64,
    pub predicted_iteration_s: f64,
    pub created_at: String,
}

/// The columns a stored run is read from on `engine` (the log's size in bytes, not the log).
fn run_columns(engine: super::Engine) -> String {
    format!(
        "id, system, framework, format, config, {} AS log_bytes, steps, warmup_steps, measured_iteration_s, \
         predicted_iteration_s, created_at",
        engine.byte_length("log")
    )
}

fn decode_run(r: &sqlx::any::AnyRow) -> Result<StoredTrainingRun, StoreError> {
    let config: String = r.try_get("config")?;
    Ok(StoredTrainingRun {
        id: r.try_get("id")?,
        system: r.try_get("system")?,
        framework: r.try_get("framework")?,
        format: r.try_get("format")?,
        config: serde_json::from_str(&config).map_err(|e| StoreError::Corrupt(e.to_string()))?,
        log_bytes: r.try_get::<i64, _>("log_bytes")? as u64,
        steps: r.try_get::<i64, _>("steps")? as u64,
        warmup_steps: r.try_get::<i64, _>("warmup_steps")? as u64,
        measured_iteration_s: r.try_get("measured_iteration_s")?,
        predicted_iteration_s: r.try_get("predicted_iteration_s")?,
        created_at: r.try_get("created_at")?,
    })
}

impl Store {
    /// Stores `run` and queues `follow_up` (the system × framework's calibration job) in one transaction: both
    /// or neither. Errors: database errors (an unknown system is a foreign-key error: check it first).
    pub async fn insert_training_run(
        &self,
        run: &NewTrainingRun<'_>,
        follow_up: &FollowUpJob,
    ) -> Result<(StoredTrainingRun, JobRecord), StoreError> {
        let mut tx = self.begin().await?;
        let id: i64 = sqlx::query_scalar(
            "INSERT INTO training_runs (system, framework, format, config, log, steps, warmup_steps,
                 measured_iteration_s, predicted_iteration_s)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) RETURNING id",
        )
        .bind(run.system)
        .bind(run.framework)
        .bind(run.format)
        .bind(run.config.to_string())
        .bind(run.log)
        .bind(run.steps as i64)
        .bind(run.warmup_steps as i64)
        .bind(run.measured_iteration_s)
        .bind(run.predicted_iteration_s)
        .fetch_one(&mut *tx)
        .await?;
        let job = create_job_in(&mut tx, self.engine(), &follow_up.kind, &follow_up.params, follow_up.dedupe).await?;
        let row = sqlx::query(&format!("SELECT {} FROM training_runs WHERE id = $1", run_columns(self.engine())))
            .bind(id)
            .fetch_one(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok((decode_run(&row)?, job))
    }

    /// The runs stored for `system`, oldest first.
    pub async fn training_runs(&self, system: &str) -> Result<Vec<StoredTrainingRun>, StoreError> {
        let rows = sqlx::query(&format!(
            "SELECT {} FROM training_runs WHERE system = $1 ORDER BY id",
            run_columns(self.engine())
        ))
        .bind(system)
        .fetch_all(self.pool())
        .await?;
        rows.iter().map(decode_run).collect()
    }

    /// (measured, predicted) iteration times of `system`'s runs with `framework`, oldest first.
    pub async fn training_run_pairs(&self, system: &str, framework: &str) -> Result<Vec<RunPair>, StoreError> {
        let rows = sqlx::query(
            "SELECT measured_iteration_s, predicted_iteration_s FROM training_runs
             WHERE system = $1 AND framework = $2 ORDER BY id",
        )
        .bind(system)
        .bind(framework)
        .fetch_all(self.pool())
        .await?;
        rows.iter()
            .map(|r| {
                Ok(RunPair {
                    measured_s: r.try_get("measured_iteration_s")?,
                    predicted_s: r.try_get("predicted_iteration_s")?,
                })
            })
            .collect()
    }

    /// Stores (replaces) the calibration of its system × framework; returns it with its `created_at`.
    pub async fn put_training_calibration(&self, cal: &TrainingCalibration) -> Result<TrainingCalibration, StoreError> {
        let framework = framework_name(cal)?;
        let mut tx = self.begin().await?;
        let json = serde_json::to_string(cal).map_err(|e| StoreError::Corrupt(e.to_string()))?;
        let created_at: String = sqlx::query_scalar(&format!(
            "INSERT INTO training_calibrations (system, framework, calibration, accepted) VALUES ($1, $2, $3, $4)
             ON CONFLICT(system, framework) DO UPDATE SET calibration = excluded.calibration,
                 accepted = excluded.accepted, created_at = {}
             RETURNING created_at",
            self.engine().now()
        ))
        .bind(&cal.system)
        .bind(&framework)
        .bind(json)
        .bind(cal.accepted as i64)
        .fetch_one(&mut *tx)
        .await?;
        tx.commit().await?;
        self.note_system_change();
        Ok(TrainingCalibration { created_at, ..cal.clone() })
    }

    /// Every calibration of `system` (accepted or not), by framework.
    pub async fn training_calibrations(&self, system: &str) -> Result<Vec<TrainingCalibration>, StoreError> {
        let rows = sqlx::query(
            "SELECT calibration, created_at FROM training_calibrations WHERE system = $1 ORDER BY framework",
        )
        .bind(system)
        .fetch_all(self.pool())
        .await?;
        rows.iter()
            .map(|r| {
                let json: String = r.try_get("calibration")?;
                let cal: TrainingCalibration =
                    serde_json::from_str(&json).map_err(|e| StoreError::Corrupt(e.to_string()))?;
                Ok(TrainingCalibration { created_at: r.try_get("created_at")?, ..cal })
            })
            .collect()
    }
}

fn framework_name(cal: &TrainingCalibration) -> Result<String, StoreError> {
    match serde_json::to_value(cal.framework) {
        Ok(serde_json::Value::String(s)) => Ok(s),
        _ => Err(StoreError::Corrupt("framework does not serialize as a name".into())),
    }
}
