//! Background jobs: typed work that survives crashes. A job is a row of the `jobs` table (`kind`, `params`,
//! `result`); [`Job`] is its typed form, and each kind has one file that does its IO: [`retrain`] (learned
//! models), [`calibrate`] (a system's communication fit), [`search`] (a large configuration search). The
//! [`runner`] claims queued jobs one at a time, records their end, re-queues jobs a crash interrupted and queues an
//! automatic retrain when uploads have been quiet for the debounce.
//!
//! Direction: `service` enqueues jobs and shares their IO helpers; jobs use the store and the domain core, never
//! `service`, `api`, `app` or `config` (the search job gets the service's search through [`search::SearchRunner`]).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::sync::Notify;
use utoipa::ToSchema;

use crate::learn::Grid;
use crate::llm::search::SearchRequest;
use crate::store::jobs::{FollowUpJob, JobRecord};
use crate::store::{Store, StoreError};

pub mod calibrate;
pub mod calibrate_training;
pub mod models;
pub mod retrain;
pub mod runner;
pub mod search;

pub use models::{load_registry, load_registry_at_start, stale_models, REGISTRY_SWAP};
pub use runner::{spawn, spawn_after};

/// The kinds of job, as stored in the `kind` column.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum JobKind {
    /// Train the learned models whose samples changed ([`retrain`]).
    Retrain,
    /// Fit a system's communication models to its samples ([`calibrate`]).
    Calibrate,
    /// Run a configuration search too large to answer inline ([`search`]).
    Search,
    /// Refit a system × framework's training calibration to its uploaded runs ([`calibrate_training`]).
    CalibrateTraining,
}

impl JobKind {
    /// Every kind the runner claims.
    pub const ALL: [JobKind; 4] = [JobKind::Retrain, JobKind::Calibrate, JobKind::Search, JobKind::CalibrateTraining];

    /// The stored name (`retrain`, `calibrate`, `search`, `calibrate_training`).
    pub fn as_str(self) -> &'static str {
        match self {
            JobKind::Retrain => "retrain",
            JobKind::Calibrate => "calibrate",
            JobKind::Search => "search",
            JobKind::CalibrateTraining => "calibrate_training",
        }
    }

    /// The kind of a stored name; None for a name this build does not know.
    pub fn parse(s: &str) -> Option<JobKind> {
        JobKind::ALL.into_iter().find(|k| k.as_str() == s)
    }
}

/// Parameters of a retrain job (`POST /v1/regressors/retrain`).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RetrainParams {
    /// Only these keys (`linear.fwd.fp32`; per-GPU models of a key are included). Default: every key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub keys: Option<Vec<String>>,
    /// Hyper-parameter grid. Default: the configured one (`full`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grid: Option<Grid>,
    /// Retrain keys whose samples did not change since their last version. Default false.
    #[serde(default)]
    pub force: bool,
}

/// Why a retrain was queued without a request: stored as `{"reason": "new samples"}` (the runner, after uploads)
/// or `{"reason": "eval"}`; it retrains every changed key on the configured grid.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RetrainTrigger {
    /// Free text shown in the job's parameters.
    pub reason: String,
}

/// The parameters of a stored retrain job: a request's, or an automatic trigger's.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum RetrainJob {
    /// Requested through the API or the CLI.
    Requested(RetrainParams),
    /// Queued by the runner or an evaluation.
    Automatic(RetrainTrigger),
}

impl RetrainJob {
    /// The retrain parameters (an automatic retrain uses the defaults).
    pub fn params(&self) -> RetrainParams {
        match self {
            RetrainJob::Requested(p) => p.clone(),
            RetrainJob::Automatic(_) => RetrainParams::default(),
        }
    }

    /// An automatic retrain with `reason`.
    pub fn automatic(reason: &str) -> RetrainJob {
        RetrainJob::Automatic(RetrainTrigger { reason: reason.to_string() })
    }
}

/// Parameters of a calibration job.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CalibrateParams {
    /// The system to calibrate (its name).
    pub system: String,
}

/// One job: its kind and typed parameters. Serialized as the table stores it: `{"kind": …, "params": …}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", content = "params", rename_all = "lowercase")]
pub enum Job {
    Retrain(RetrainJob),
    Calibrate(CalibrateParams),
    Search(Box<SearchRequest>),
    #[serde(rename = "calibrate_training")]
    CalibrateTraining(calibrate_training::CalibrateTrainingParams),
}

/// Why a stored job cannot be run.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum JobError {
    /// The `kind` column names a kind this build does not know (a newer release wrote it, or a hand edit).
    #[error("unknown job kind {0:?}: this build runs {kinds}", kinds = JobKind::ALL.map(JobKind::as_str).join(", "))]
    UnknownKind(String),
    /// The `params` column does not parse as the kind's parameters.
    #[error("{0}")]
    BadParams(String),
}

impl Job {
    /// The job's kind.
    pub fn kind(&self) -> JobKind {
        match self {
            Job::Retrain(_) => JobKind::Retrain,
            Job::Calibrate(_) => JobKind::Calibrate,
            Job::Search(_) => JobKind::Search,
            Job::CalibrateTraining(_) => JobKind::CalibrateTraining,
        }
    }

    /// The stored `params` JSON.
    pub fn params(&self) -> serde_json::Value {
        let v = match self {
            Job::Retrain(p) => serde_json::to_value(p),
            Job::Calibrate(p) => serde_json::to_value(p),
            Job::Search(r) => serde_json::to_value(r),
            Job::CalibrateTraining(p) => serde_json::to_value(p),
        };
        v.unwrap_or_else(|_| serde_json::json!({}))
    }

    /// Whether queueing it returns an equal job already queued instead of a second one: automatic and default
    /// retrains and calibrations do (running them twice gives the same models); searches and retrains with
    /// parameters do not.
    pub fn dedupe(&self) -> bool {
        match self {
            Job::Retrain(RetrainJob::Automatic(_)) | Job::Calibrate(_) | Job::CalibrateTraining(_) => true,
            Job::Retrain(RetrainJob::Requested(p)) => *p == RetrainParams::default(),
            Job::Search(_) => false,
        }
    }

    /// The typed job of a stored row. Errors: an unknown kind; parameters that do not parse as the kind's.
    pub fn from_record(record: &JobRecord) -> Result<Job, JobError> {
        let kind = JobKind::parse(&record.kind).ok_or_else(|| JobError::UnknownKind(record.kind.clone()))?;
        let params = record.params.clone();
        let bad = |e: serde_json::Error| match kind {
            JobKind::Search => JobError::BadParams(format!("the job's request does not parse: {e}")),
            _ => JobError::BadParams(format!("the job's {} parameters do not parse: {e}", kind.as_str())),
        };
        Ok(match kind {
            JobKind::Retrain => Job::Retrain(serde_json::from_value(params).map_err(bad)?),
            JobKind::Calibrate => Job::Calibrate(serde_json::from_value(params).map_err(bad)?),
            JobKind::Search => Job::Search(serde_json::from_value(params).map_err(bad)?),
            JobKind::CalibrateTraining => Job::CalibrateTraining(serde_json::from_value(params).map_err(bad)?),
        })
    }
}

/// Queues `job` (or returns the equal one already queued, see [`Job::dedupe`]). Wake the runner afterwards
/// ([`WorkerHandle::wake`]).
pub async fn enqueue(store: &Store, job: &Job) -> Result<JobRecord, StoreError> {
    store.create_job(job.kind().as_str(), &job.params(), job.dedupe()).await
}

/// `job` as a follow-up of another write, queued in that write's transaction (see [`FollowUpJob`]).
pub fn follow_up(job: &Job) -> FollowUpJob {
    FollowUpJob { kind: job.kind().as_str().to_string(), params: job.params(), dedupe: job.dedupe() }
}

/// Settings of the job runner (built from the service configuration by `app`).
#[derive(Debug, Clone, PartialEq)]
pub struct WorkerConfig {
    /// Quiet time after new samples before an automatic retrain starts.
    pub debounce: Duration,
    /// Grid of automatic retrains.
    pub grid: Grid,
    /// Samples a GPU needs for (class, phase, dtype) before a per-GPU model is tried.
    pub per_gpu_min_samples: u64,
    /// Retrain automatically when samples arrive.
    pub auto_retrain: bool,
    /// Most rows one model trains on; larger sample sets are thinned to a uniform sample (by split key) so a
    /// retrain's memory and time stay bounded.
    pub max_training_rows: usize,
    /// Wall-clock budget of one retrain; keys not reached in time are skipped (reported, and tried again by the
    /// next retrain because their samples still differ from the last trained count).
    pub time_limit: Duration,
    /// How long this replica's claim on a running job holds without a heartbeat (renewed every third of it); a
    /// job whose replica died is re-run by another replica after it.
    pub lease: Duration,
}

impl Default for WorkerConfig {
    fn default() -> Self {
        WorkerConfig {
            debounce: Duration::from_secs(5),
            grid: Grid::Full,
            per_gpu_min_samples: 300,
            auto_retrain: true,
            max_training_rows: 200_000,
            time_limit: Duration::from_secs(3600),
            lease: Duration::from_secs(15),
        }
    }
}

/// Wakes the job runner.
#[derive(Debug, Clone, Default)]
pub struct WorkerHandle {
    notify: Arc<Notify>,
    samples_changed: Arc<AtomicBool>,
}

impl WorkerHandle {
    /// New samples were committed: retrain after the debounce.
    pub fn samples_changed(&self) {
        self.samples_changed.store(true, Ordering::SeqCst);
        self.notify.notify_one();
    }

    /// A job was queued: look now.
    pub fn wake(&self) {
        self.notify.notify_one();
    }

    /// Resolves when woken.
    async fn notified(&self) {
        self.notify.notified().await
    }

    /// Whether samples changed since the last call (clears the flag).
    fn take_samples_changed(&self) -> bool {
        self.samples_changed.swap(false, Ordering::SeqCst)
    }

    /// Whether samples changed and were not yet taken.
    fn samples_pending(&self) -> bool {
        self.samples_changed.load(Ordering::SeqCst)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn record(kind: &str, params: serde_json::Value) -> JobRecord {
        JobRecord {
            id: 1,
            kind: kind.into(),
            state: crate::store::jobs::JobState::Running,
            progress: 0.0,
            message: String::new(),
            params,
            result: None,
            attempts: 1,
            created_at: String::new(),
            started_at: None,
            finished_at: None,
        }
    }

    /// The stored `kind`/`params` of every job stay what earlier releases wrote, so existing databases run.
    #[test]
    fn stored_jobs_keep_their_kind_and_params() {
        let auto = Job::Retrain(RetrainJob::automatic("new samples"));
        assert_eq!((auto.kind().as_str(), auto.params()), ("retrain", json!({"reason": "new samples"})));
        assert!(auto.dedupe());
        let forced = Job::Retrain(RetrainJob::Requested(RetrainParams { force: true, ..Default::default() }));
        assert_eq!(forced.params(), json!({"force": true}));
        assert!(!forced.dedupe());
        let default = Job::Retrain(RetrainJob::Requested(RetrainParams::default()));
        assert_eq!(default.params(), json!({"force": false}));
        assert!(default.dedupe());
        let cal = Job::Calibrate(CalibrateParams { system: "dgx".into() });
        assert_eq!((cal.kind().as_str(), cal.params()), ("calibrate", json!({"system": "dgx"})));
        for job in [auto, forced, default, cal] {
            assert_eq!(Job::from_record(&record(job.kind().as_str(), job.params())).unwrap(), job);
            let tagged = serde_json::to_value(&job).unwrap();
            assert_eq!((tagged["kind"].as_str(), &tagged["params"]), (Some(job.kind().as_str()), &job.params()));
        }
        assert_eq!(
            Job::from_record(&record("retrain", json!({"keys": ["linear.fwd.fp32"], "grid": "fast"}))).unwrap(),
            Job::Retrain(RetrainJob::Requested(RetrainParams {
                keys: Some(vec!["linear.fwd.fp32".into()]),
                grid: Some(Grid::Fast),
                force: false
            }))
        );
    }

    #[test]
    fn an_unknown_kind_or_bad_params_are_errors_not_a_retrain() {
        assert_eq!(Job::from_record(&record("defrag", json!({}))), Err(JobError::UnknownKind("defrag".into())));
        assert!(Job::from_record(&record("retrain", json!({"keys": 3}))).is_err());
        assert!(Job::from_record(&record("calibrate", json!({}))).is_err());
        let e = Job::from_record(&record("search", json!({"nope": 1}))).unwrap_err().to_string();
        assert!(e.starts_with("the job's request does not parse"), "{e}");
    }
}
