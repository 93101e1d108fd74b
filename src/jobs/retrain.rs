//! Retrain jobs: train the learned models whose samples changed — operator models here (a cross-GPU model per
//! (class, phase, dtype) and per-GPU models where a GPU has enough samples), communication ([`comm`]) and kernel
//! ([`kernels`]) corrections beside — apply the promotion rule ([`crate::learn::promotion`]), write every new
//! version in one transaction and hot-swap the registry. Every CPU-heavy step (training sets, fits, hold-out
//! evaluations, loading the new registry) runs on niced threads of its own ([`niced`]), never on the runtime's
//! workers: requests keep their latency while a retrain runs.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use serde::Serialize;
use serde_json::json;

use super::models::load_registry;
use super::{RetrainParams, WorkerConfig};
use crate::hw::{GpuSpec, Precision};
use crate::learn::fit::{FitError, Fitted};
use crate::learn::op_key;
use crate::learn::promotion::Promotion;
use crate::learn::{FitSummary, SharedRegistry};
use crate::op::{KernelFamily, OpClass, Phase};
use crate::store::regressors::{NewRegressor, Provenance};
use crate::store::{Store, StoreError};

pub mod comm;
pub mod kernels;
pub mod niced;
mod ops;

/// One key's line in a retrain's report.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum KeyReport {
    /// A version was trained (`analytic_validation_mape` absent for per-GPU models).
    Trained {
        key: String,
        /// Training rows.
        rows: usize,
        /// The chosen candidate's validation MAPE (fraction).
        validation_mape: f64,
        /// The analytic baseline's MAPE on the same rows (fraction).
        #[serde(skip_serializing_if = "Option::is_none")]
        analytic_validation_mape: Option<f64>,
        promotion: Promotion,
    },
    /// The key was not trained, and why.
    Skipped { key: String, skipped: String },
}

impl KeyReport {
    fn skipped(key: &str, why: impl Into<String>) -> KeyReport {
        KeyReport::Skipped { key: key.to_string(), skipped: why.into() }
    }

    /// The report of a trained version.
    fn trained(key: &str, rows: usize, f: &Fitted, analytic: bool, promotion: Promotion) -> KeyReport {
        KeyReport::Trained {
            key: key.to_string(),
            rows,
            validation_mape: f.validation.mape,
            analytic_validation_mape: analytic.then_some(f.analytic_validation.mape),
            promotion,
        }
    }
}

/// A stored version, as the retrain result lists it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct VersionLine {
    /// The model key.
    pub key: String,
    /// The version stored.
    pub version: i64,
    /// Whether it was activated.
    pub active: bool,
}

/// The result of a retrain job.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RetrainResult {
    /// Versions stored.
    pub trained: usize,
    /// Of those, versions activated.
    pub activated: usize,
    /// Every stored version.
    pub versions: Vec<VersionLine>,
    /// One line per key considered, trained or skipped.
    pub keys: Vec<KeyReport>,
}

impl RetrainResult {
    /// The job's message.
    pub fn message(&self) -> String {
        format!("trained {} model(s), activated {}", self.trained, self.activated)
    }
}

/// Why a retrain failed.
#[derive(Debug, thiserror::Error)]
pub enum RetrainError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("training failed for {key}: {source}")]
    Fit { key: String, source: FitError },
    #[error("training task panicked: {0}")]
    Join(String),
}

struct KeyGroup {
    class: OpClass,
    phase: Phase,
    dtype: Precision,
    /// The engine of the key ([`op_key`]: None for the models of engine-neutral and vLLM measurements).
    family: Option<KernelFamily>,
    total: u64,
    per_gpu: BTreeMap<String, u64>,
}

/// The engine segment of the key a sample stored with `engine` (the `engine` column) trains: SGLang's and
/// TensorRT-LLM's samples their own keys, vLLM's and engine-neutral ones ('') the keys without a segment.
fn key_family(engine: &str) -> Option<KernelFamily> {
    KernelFamily::parse(engine).filter(|f| f.key_segment().is_some())
}

/// The `engine` column values a key of `family` trains on (the inverse of [`key_family`]).
pub(crate) fn stored_engines(family: Option<KernelFamily>) -> Vec<&'static str> {
    match family.filter(|f| f.key_segment().is_some()) {
        Some(f) => vec![f.as_str()],
        None => vec!["", KernelFamily::Vllm.as_str()],
    }
}

fn parse_group(op: &str, phase: &str, dtype: &str) -> Option<(OpClass, Phase, Precision)> {
    let class = OpClass::ALL.into_iter().find(|c| c.as_str() == op)?;
    let phase = match phase {
        "fwd" => Phase::Fwd,
        "bwd" => Phase::Bwd,
        _ => return None,
    };
    Some((class, phase, Precision::parse(dtype)?))
}

/// The provenance of a version trained here on rows of `datasets` (the API shows the version's `created_at` as
/// its training time).
pub(crate) fn trained_here(datasets: Vec<String>) -> Provenance {
    Provenance {
        bundled: false,
        bundle: None,
        datasets,
        commit: option_env!("PERFCAST_GIT_COMMIT").map(str::to_string),
        perfcast_version: Some(env!("CARGO_PKG_VERSION").to_string()),
        trained_at: None,
    }
}

/// A version to store from fit `f` of `key` (not active until promotion decides; its provenance lists no dataset
/// until the caller sets them).
pub(crate) fn new_regressor(
    key: &str,
    family: &str,
    scope: &str,
    features: &[&str],
    f: &Fitted,
    samples: u64,
    summary: serde_json::Value,
) -> NewRegressor {
    NewRegressor {
        key: key.to_string(),
        family: family.to_string(),
        scope: scope.to_string(),
        model: f.model_text.clone(),
        holdout_model: f.holdout_text.clone(),
        feature_names: features.iter().map(|s| s.to_string()).collect(),
        fit: FitSummary::of(f, samples, summary),
        promotion: json!({}),
        provenance: trained_here(Vec::new()),
        activate: false,
        validation_points: f.validation_points.clone(),
    }
}

/// One retrain: every (class, phase, dtype) whose samples changed (or the requested keys), a cross-GPU model
/// and per-GPU models where a GPU has enough samples; promotion on the same held-out rows; one transaction;
/// registry swap. `job_id` receives the progress. Errors: the store, a fit that fails, a training task that
/// panics.
pub async fn retrain(
    store: &Store,
    registry: &SharedRegistry,
    config: &WorkerConfig,
    job_id: i64,
    params: &RetrainParams,
) -> Result<RetrainResult, RetrainError> {
    let grid = params.grid.unwrap_or(config.grid);
    let mut groups: BTreeMap<String, KeyGroup> = BTreeMap::new();
    for c in store.op_sample_counts().await? {
        let Some((class, phase, dtype)) = parse_group(&c.op, &c.phase, &c.dtype) else { continue };
        let family = key_family(&c.engine);
        let key = op_key(class, phase, dtype, family, None);
        let g =
            groups.entry(key).or_insert(KeyGroup { class, phase, dtype, family, total: 0, per_gpu: BTreeMap::new() });
        g.total += c.samples;
        *g.per_gpu.entry(c.gpu).or_default() += c.samples;
    }
    if let Some(keys) = &params.keys {
        groups.retain(|k, _| keys.iter().any(|want| want == k || want.starts_with(&format!("{k}."))));
    }
    // Operator models first, then communication and kernel corrections (below).
    let mut gpu_cache: HashMap<String, Option<GpuSpec>> = HashMap::new();
    let directory = store.gpu_directory().await?;
    let mut new: Vec<NewRegressor> = Vec::new();
    let mut report = Vec::new();
    let n_groups = groups.len().max(1);
    let started = std::time::Instant::now();
    for (i, (key, g)) in groups.iter().enumerate() {
        if started.elapsed() > config.time_limit {
            let why = format!("retrain time limit of {} s reached", config.time_limit.as_secs());
            report.push(KeyReport::skipped(key, why));
            continue;
        }
        store
            .job_progress(job_id, i as f64 / n_groups as f64, &format!("training {key} ({}/{n_groups})", i + 1))
            .await?;
        if !params.force && params.keys.is_none() && store.latest_trained_samples(key).await? == g.total {
            report.push(KeyReport::skipped(key, "samples unchanged since the last version"));
            continue;
        }
        let engines = stored_engines(g.family);
        let rows = store.op_rows(g.class.as_str(), g.phase.as_str(), g.dtype.as_str(), &engines).await?;
        let datasets = store.op_datasets(g.class.as_str(), g.phase.as_str(), g.dtype.as_str(), &engines).await?;
        for r in &rows {
            gpu_cache.entry(r.gpu.clone()).or_insert_with(|| directory.spec(&r.gpu));
        }
        let gpus: HashMap<String, Option<GpuSpec>> =
            g.per_gpu.keys().map(|name| (name.clone(), gpu_cache.get(name).cloned().flatten())).collect();
        let mut active_per_gpu = HashMap::new();
        for spec in gpus.values().flatten() {
            let gkey = op_key(g.class, g.phase, g.dtype, g.family, Some(&spec.name));
            if let Some((_, text)) = store.active_holdout(&gkey).await? {
                active_per_gpu.insert(gkey, text);
            }
        }
        let input = ops::OpKey {
            key: key.clone(),
            class: g.class,
            phase: g.phase,
            dtype: g.dtype,
            family: g.family,
            total: g.total,
            per_gpu: g.per_gpu.clone(),
            rows,
            gpus,
            datasets,
            active: store.active_holdout(key).await?,
            active_per_gpu,
            grid,
            max_training_rows: config.max_training_rows,
            per_gpu_min_samples: config.per_gpu_min_samples,
        };
        let (versions, lines) = niced::niced(move || ops::train_op_key(input)).await??;
        new.extend(versions);
        report.extend(lines);
    }
    comm::retrain_comm(store, grid, params.force, params.keys.as_deref(), &mut new, &mut report).await?;
    kernels::retrain_kernels(store, grid, params.force, params.keys.as_deref(), &mut new, &mut report).await?;
    // Commit and swap under the lock the replica poller takes before reloading: it then finds the new versions
    // already served here instead of loading them again.
    let swap = super::models::REGISTRY_SWAP.lock().await;
    let stored = store.insert_regressors(Some(job_id), &new).await?;
    let activated = stored.iter().filter(|r| r.active).count();
    if activated > 0 {
        registry.store(Arc::new(load_registry(store).await?));
    }
    drop(swap);
    Ok(RetrainResult {
        trained: stored.len(),
        activated,
        versions: stored
            .iter()
            .map(|r| VersionLine { key: r.key.clone(), version: r.version, active: r.active })
            .collect(),
        keys: report,
    })
}
