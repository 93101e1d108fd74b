//! The background worker: wakes when samples arrive (debounced) or a job is queued. Retrain jobs train in
//! `spawn_blocking`, write new versions in one transaction and hot-swap the registry; search jobs run a large
//! configuration search ([`crate::llm::search`]) with progress. Jobs are rows in SQLite: one left `running` by a
//! crash (retrain or search) is queued again at the next start and re-run; until a retrain commits, the previous
//! active models keep serving.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::json;
use tokio::sync::Notify;
use tokio::task::JoinHandle;
use utoipa::ToSchema;

use crate::hw::{GpuSpec, Precision};
use crate::learn::fit::{predict_rows, split, Accuracy, FitError, Fitted};
use crate::learn::lgbm::Model;
use crate::learn::op_data::{op_training_set, OpObservation};
use crate::learn::registry::family;
use crate::learn::{fit, op_key, ActiveRegressor, Grid, Registry, SharedRegistry, TrainingSet};
use crate::llm::search::SearchRequest;
use crate::op::{OpClass, Phase};
use crate::service::predictions::{SearchProgress, SEARCH};
use crate::service::Service;
use crate::store::regressors::NewRegressor;
use crate::store::{Store, StoreError};

pub mod calibrate;
pub mod comm;
pub mod kernels;

pub use calibrate::CALIBRATE;

/// Job kind of a retrain.
pub const RETRAIN: &str = "retrain";

/// Worker settings (from the service configuration).
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
    /// Most rows one model trains on; larger sample sets are thinned evenly (every k-th row) so a retrain's memory
    /// and time stay bounded.
    pub max_training_rows: usize,
    /// Wall-clock budget of one retrain; keys not reached in time are skipped (reported, and tried again by the
    /// next retrain because their samples still differ from the last trained count).
    pub time_limit: Duration,
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
        }
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

/// Wakes the worker.
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
}

/// The feature list this build computes for a model family (`None` for an unknown family).
fn current_features(family_name: &str) -> Option<&'static [&'static str]> {
    match family_name {
        family::OP => Some(&crate::learn::features::OP_FEATURES),
        family::COMM => Some(&crate::learn::comm_features::COMM_FEATURES),
        family::KERNEL => Some(&crate::kernel::pipes::PipeFeatures::NAMES),
        _ => None,
    }
}

/// True when `r` was trained on another feature list than this build computes for its family.
fn is_stale(r: &crate::store::regressors::RegressorRecord) -> bool {
    current_features(&r.family).is_some_and(|f| !f.iter().eq(r.feature_names.iter()))
}

/// Keys of the active versions [`load_registry`] does not serve because they were trained on another feature list
/// (a database from an older release); the service queues a retrain at startup when there are any.
pub async fn stale_models(store: &Store) -> Result<Vec<String>, StoreError> {
    Ok(store.active_regressors().await?.into_iter().filter(is_stale).map(|r| r.key).collect())
}

/// Loads the active versions from the store into a registry. Versions whose model text does not load, or that
/// were trained on another feature list than this build computes (a database from an older release), are
/// skipped with a log: serving continues analytically for their keys until the next retrain replaces them.
pub async fn load_registry(store: &Store) -> Result<Registry, StoreError> {
    let records = store.active_regressors().await?;
    let mut models = Vec::with_capacity(records.len());
    for r in records {
        if is_stale(&r) {
            tracing::warn!(key = %r.key, version = r.version,
                "stored model was trained on another feature list; skipped until the next retrain replaces it");
            continue;
        }
        match Model::from_text(r.model.as_deref().unwrap_or("")) {
            Ok(model) => models.push(ActiveRegressor {
                key: r.key,
                version: r.version,
                model,
                feature_names: r.feature_names,
                validation_mape: r.validation_mape,
                summary: r.summary,
            }),
            Err(e) => tracing::error!(key = %r.key, version = r.version, error = %e, "stored model does not load"),
        }
    }
    let registry = Registry::new(models);
    crate::metrics::active_models(&registry.versions());
    Ok(registry)
}

/// Starts the worker on the current tokio runtime: first re-queues jobs a crash interrupted, then serves jobs
/// until the task is aborted.
pub fn spawn(store: Store, registry: SharedRegistry, config: WorkerConfig, handle: WorkerHandle) -> JoinHandle<()> {
    tokio::spawn(async move {
        match store.requeue_interrupted_jobs().await {
            Ok(0) => {}
            Ok(n) => tracing::warn!(jobs = n, "re-queued jobs interrupted by a restart"),
            Err(e) => tracing::error!(error = %e, "cannot re-queue interrupted jobs"),
        }
        loop {
            loop {
                match store.claim_job(&[RETRAIN, CALIBRATE, SEARCH]).await {
                    Ok(Some(job)) => {
                        let id = job.id;
                        tracing::info!(job = id, kind = %job.kind, attempt = job.attempts, "job started");
                        let started = std::time::Instant::now();
                        let outcome = run_job(&store, &registry, &config, &handle, &job).await;
                        crate::metrics::job(&job.kind, outcome.is_ok(), started.elapsed().as_secs_f64());
                        let finished = match outcome {
                            Ok((msg, result)) => {
                                tracing::info!(job = id, %msg, "job finished");
                                store.finish_job(id, true, &msg, &result).await
                            }
                            Err(e) => {
                                tracing::error!(job = id, error = %e, "job failed");
                                store.finish_job(id, false, &e.to_string(), &json!({})).await
                            }
                        };
                        if let Err(e) = finished {
                            tracing::error!(job = id, error = %e, "cannot record the job's end");
                        }
                    }
                    Ok(None) => break,
                    Err(e) => {
                        tracing::error!(error = %e, "cannot claim a job");
                        break;
                    }
                }
            }
            tokio::select! {
                _ = handle.notify.notified() => {}
                _ = tokio::time::sleep(Duration::from_secs(60)) => {}
            }
            if handle.samples_changed.load(Ordering::SeqCst) && config.auto_retrain {
                // Debounce: wait until uploads have been quiet for `debounce`.
                while handle.samples_changed.swap(false, Ordering::SeqCst) {
                    tokio::time::sleep(config.debounce).await;
                }
                let params = json!({"reason": "new samples"});
                if let Err(e) = store.create_job(RETRAIN, &params, true).await {
                    tracing::error!(error = %e, "cannot queue an automatic retrain");
                }
            }
        }
    })
}

/// Runs one claimed job; returns its message and result.
async fn run_job(
    store: &Store,
    registry: &SharedRegistry,
    config: &WorkerConfig,
    handle: &WorkerHandle,
    job: &crate::store::jobs::JobRecord,
) -> Result<(String, serde_json::Value), RetrainError> {
    match job.kind.as_str() {
        SEARCH => {
            let result = run_search_job(store, registry, handle, job).await.map_err(RetrainError::Job)?;
            let msg = format!(
                "evaluated {} configurations, {} fit",
                result["evaluated"].as_u64().unwrap_or(0),
                result["fitting"].as_u64().unwrap_or(0)
            );
            Ok((msg, result))
        }
        CALIBRATE => {
            let system = job.params["system"].as_str().unwrap_or_default().to_string();
            let (stored, cal) = calibrate::calibrate_system(store, &system).await?;
            let fitted = cal.collectives.iter().filter(|g| g.fit.is_some()).count()
                + cal.link_classes.iter().filter(|l| l.fit.is_some()).count();
            Ok((
                format!("calibrated {system} from {} samples ({fitted} fits)", stored.samples),
                json!({"system": system, "samples": stored.samples}),
            ))
        }
        _ => {
            let params: RetrainParams = serde_json::from_value(job.params.clone()).unwrap_or_default();
            let result = retrain(store, registry, config, job.id, &params).await?;
            let msg = format!(
                "trained {} model(s), activated {}",
                result["trained"].as_u64().unwrap_or(0),
                result["activated"].as_u64().unwrap_or(0)
            );
            Ok((msg, result))
        }
    }
}

/// Keeps at most `max` items, every k-th one (k = ⌈len / max⌉), so a large sample set is thinned evenly across
/// its upload order rather than truncated to its oldest rows. `max == 0` keeps everything.
pub fn thin_evenly<T>(items: Vec<T>, max: usize) -> Vec<T> {
    if max == 0 || items.len() <= max {
        return items;
    }
    let k = items.len().div_ceil(max);
    items.into_iter().step_by(k).collect()
}

/// Runs a `search` job: the stored request against the current registry, publishing progress every half
/// second. Returns the search result as JSON, or why it failed (a request that no longer validates, e.g. its
/// system was removed).
async fn run_search_job(
    store: &Store,
    registry: &SharedRegistry,
    handle: &WorkerHandle,
    job: &crate::store::jobs::JobRecord,
) -> Result<serde_json::Value, String> {
    let req: SearchRequest =
        serde_json::from_value(job.params.clone()).map_err(|e| format!("the job's request does not parse: {e}"))?;
    let service = Service::with(store.clone(), registry.clone(), handle.clone());
    // Systems may name imported GPUs: resolve them against the same directory the API uses.
    let gpus = store.gpu_directory().await.map_err(|e| e.to_string())?;
    service.gpus.store(Arc::new(gpus));
    let progress = Arc::new(SearchProgress::default());
    let run = service.run_search(&req, Some(progress.clone()));
    tokio::pin!(run);
    let mut tick = tokio::time::interval(Duration::from_millis(500));
    let result = loop {
        tokio::select! {
            r = &mut run => break r,
            _ = tick.tick() => {
                let (done, total) = (progress.done.load(Ordering::Relaxed), progress.total.load(Ordering::Relaxed));
                if total > 0 {
                    let msg = format!("evaluated {done} of {total} configurations");
                    if let Err(e) = store.job_progress(job.id, done as f64 / total as f64, &msg).await {
                        tracing::warn!(job = job.id, error = %e, "cannot record progress");
                    }
                }
            }
        }
    };
    let result = result.map_err(|e| e.to_string())?;
    serde_json::to_value(&result).map_err(|e| e.to_string())
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
    /// A search job failed (its stored request no longer validates, e.g. its system was removed).
    #[error("{0}")]
    Job(String),
}

struct KeyGroup {
    class: OpClass,
    phase: Phase,
    dtype: Precision,
    total: u64,
    per_gpu: BTreeMap<String, u64>,
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

async fn fit_blocking(set: Arc<TrainingSet>, grid: Grid, key: &str) -> Result<Fitted, RetrainError> {
    let k = key.to_string();
    tokio::task::spawn_blocking(move || fit(&set, grid, &mut |_| {}))
        .await
        .map_err(|e| RetrainError::Join(e.to_string()))?
        .map_err(|source| RetrainError::Fit { key: k, source })
}

/// Accuracy of a hold-out model text on the validation rows of `set` (None when it does not load or predict).
fn holdout_accuracy(text: &str, set: &TrainingSet) -> Option<Accuracy> {
    let model = Model::from_text(text).ok()?;
    let (_, val) = split(set);
    let pred = predict_rows(&model, set, &val).ok()?;
    let meas: Vec<f64> = val.iter().map(|&i| set.measured_us[i]).collect();
    Some(crate::learn::fit::accuracy(&pred, &meas))
}

fn new_regressor(
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
        candidate: serde_json::to_value(&f.chosen).unwrap_or_default(),
        candidates: json!(f
            .candidates
            .iter()
            .map(|(n, m)| json!({"name": n, "validation_mape": m}))
            .collect::<Vec<_>>()),
        validation_mape: f.validation.mape,
        validation_signed: f.validation.signed,
        analytic_validation_mape: f.analytic_validation.mape,
        train_rows: f.train_rows as u64,
        validation_rows: f.validation_rows as u64,
        samples,
        summary,
        importance: json!(f.importance.iter().map(|(n, g)| json!({"feature": n, "gain": g})).collect::<Vec<_>>()),
        promotion: json!({}),
        activate: false,
    }
}

/// One retrain: every (class, phase, dtype) whose samples changed (or the requested keys), a cross-GPU model
/// and per-GPU models where a GPU has enough samples; promotion on the same held-out rows; one transaction;
/// registry swap. Returns the job result.
pub async fn retrain(
    store: &Store,
    registry: &SharedRegistry,
    config: &WorkerConfig,
    job_id: i64,
    params: &RetrainParams,
) -> Result<serde_json::Value, RetrainError> {
    let grid = params.grid.unwrap_or(config.grid);
    let mut groups: BTreeMap<String, KeyGroup> = BTreeMap::new();
    for (op, phase, dtype, gpu, n) in store.op_sample_counts().await? {
        let Some((class, phase, dtype)) = parse_group(&op, &phase, &dtype) else { continue };
        let key = op_key(class, phase, dtype, None);
        let g = groups.entry(key).or_insert(KeyGroup { class, phase, dtype, total: 0, per_gpu: BTreeMap::new() });
        g.total += n;
        *g.per_gpu.entry(gpu).or_default() += n;
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
            report.push(json!({"key": key, "skipped": format!("retrain time limit of {} s reached", config.time_limit.as_secs())}));
            continue;
        }
        store
            .job_progress(job_id, i as f64 / n_groups as f64, &format!("training {key} ({}/{n_groups})", i + 1))
            .await?;
        if !params.force && params.keys.is_none() && store.latest_trained_samples(key).await? == g.total {
            report.push(json!({"key": key, "skipped": "samples unchanged since the last version"}));
            continue;
        }
        let rows = store.op_rows(g.class.as_str(), g.phase.as_str(), g.dtype.as_str()).await?;
        for r in &rows {
            gpu_cache.entry(r.gpu.clone()).or_insert_with(|| directory.spec(&r.gpu));
        }
        let observations: Vec<OpObservation> = rows
            .iter()
            .filter_map(|r| {
                gpu_cache.get(&r.gpu)?.as_ref().map(|gpu| OpObservation {
                    gpu,
                    dims: r.dims,
                    time_us: r.time_us,
                    split_key: r.split_key,
                })
            })
            .collect();
        let observations = thin_evenly(observations, config.max_training_rows);
        let (set, summary) = op_training_set(g.class, g.phase, g.dtype, &observations);
        if set.len() < crate::learn::fit::MIN_ROWS {
            report.push(json!({"key": key, "skipped": format!("{} usable samples, {} needed", set.len(), crate::learn::fit::MIN_ROWS)}));
            continue;
        }
        let set = Arc::new(set);
        let fitted = fit_blocking(set.clone(), grid, key).await?;
        // Promotion: the candidate's hold-out model against the active one's, on the same validation rows.
        let active = store.active_holdout(key).await?;
        let candidate_acc = holdout_accuracy(&fitted.holdout_text, &set).unwrap_or(fitted.validation);
        let (activate, promotion) = match &active {
            None => (
                true,
                json!({"activated": true, "reason": "first model of this key",
                                  "candidate_validation_mape": candidate_acc.mape}),
            ),
            Some((version, text)) => match holdout_accuracy(text, &set) {
                Some(a) if candidate_acc.mape > a.mape => (
                    false,
                    json!({"activated": false,
                    "reason": "worse than the active version on the same held-out rows", "active_version": version,
                    "active_validation_mape": a.mape, "candidate_validation_mape": candidate_acc.mape}),
                ),
                Some(a) => (
                    true,
                    json!({"activated": true,
                    "reason": "not worse than the active version on the same held-out rows", "active_version": version,
                    "active_validation_mape": a.mape, "candidate_validation_mape": candidate_acc.mape}),
                ),
                None => (
                    true,
                    json!({"activated": true, "reason": "the active version's hold-out model does not load",
                    "active_version": version}),
                ),
            },
        };
        let cross_holdout = if activate { Some(fitted.holdout_text.clone()) } else { active.map(|(_, t)| t) };
        let mut reg = new_regressor(
            key,
            family::OP,
            "all",
            &crate::learn::features::OP_FEATURES,
            &fitted,
            g.total,
            serde_json::to_value(&summary).unwrap_or_default(),
        );
        reg.activate = activate;
        reg.promotion = promotion.clone();
        report.push(json!({"key": key, "rows": set.len(), "validation_mape": fitted.validation.mape,
            "analytic_validation_mape": fitted.analytic_validation.mape, "promotion": promotion}));
        new.push(reg);

        // Per-GPU models where a GPU has enough samples; active only when better than the cross-GPU model.
        for (gpu_name, n) in &g.per_gpu {
            if *n < config.per_gpu_min_samples {
                continue;
            }
            let Some(Some(gpu)) = gpu_cache.get(gpu_name) else { continue };
            let canonical = gpu.name.clone();
            let obs: Vec<OpObservation> = observations.iter().filter(|o| o.gpu.name == canonical).copied().collect();
            let (gset, gsummary) = op_training_set(g.class, g.phase, g.dtype, &obs);
            if gset.len() < crate::learn::fit::MIN_ROWS {
                continue;
            }
            let gkey = op_key(g.class, g.phase, g.dtype, Some(&canonical));
            let gset = Arc::new(gset);
            let gfit = fit_blocking(gset.clone(), grid, &gkey).await?;
            let cand = holdout_accuracy(&gfit.holdout_text, &gset).unwrap_or(gfit.validation);
            let cross = cross_holdout.as_deref().and_then(|t| holdout_accuracy(t, &gset));
            let own = store.active_holdout(&gkey).await?.and_then(|(_, t)| holdout_accuracy(&t, &gset));
            let beats_cross = cross.is_none_or(|c| cand.mape < c.mape);
            let beats_own = own.is_none_or(|o| cand.mape <= o.mape);
            let promotion = json!({"activated": beats_cross && beats_own,
                "reason": if !beats_cross { "not better than the cross-GPU model on this GPU's held-out rows" }
                          else if !beats_own { "worse than the active per-GPU version on the same held-out rows" }
                          else { "better than the cross-GPU model on this GPU's held-out rows" },
                "candidate_validation_mape": cand.mape,
                "cross_gpu_validation_mape": cross.map(|c| c.mape),
                "active_validation_mape": own.map(|o| o.mape)});
            let mut greg = new_regressor(
                &gkey,
                family::OP,
                &canonical,
                &crate::learn::features::OP_FEATURES,
                &gfit,
                *n,
                serde_json::to_value(&gsummary).unwrap_or_default(),
            );
            greg.activate = beats_cross && beats_own;
            greg.promotion = promotion.clone();
            report.push(json!({"key": gkey, "rows": gset.len(), "validation_mape": gfit.validation.mape,
                "promotion": promotion}));
            new.push(greg);
        }
    }
    comm::retrain_comm(store, grid, params.force, params.keys.as_deref(), &mut new, &mut report).await?;
    kernels::retrain_kernels(store, grid, params.force, params.keys.as_deref(), &mut new, &mut report).await?;
    let stored = store.insert_regressors(Some(job_id), &new).await?;
    let activated = stored.iter().filter(|r| r.active).count();
    if activated > 0 {
        registry.store(Arc::new(load_registry(store).await?));
    }
    Ok(json!({
        "trained": stored.len(),
        "activated": activated,
        "versions": stored.iter().map(|r| json!({"key": r.key, "version": r.version, "active": r.active})).collect::<Vec<_>>(),
        "keys": report,
    }))
}

#[cfg(test)]
mod tests {
    use super::{load_registry, new_regressor, thin_evenly};
    use crate::learn::features::OP_FEATURES;
    use crate::learn::fit::{fit, TrainingSet};
    use crate::learn::registry::family;
    use crate::learn::Grid;
    use crate::store::Store;
    use serde_json::json;

    #[tokio::test]
    async fn a_model_trained_on_another_feature_list_is_not_served() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("perfcast.db")).await.unwrap();
        // A real LightGBM model on 60 rows: r = ln 2 when feature 0 > 30, else 0.
        let mut set = TrainingSet::new(&OP_FEATURES);
        for i in 0..60u64 {
            let mut x = vec![1.0; OP_FEATURES.len()];
            x[0] = i as f64;
            set.push(&x, 10.0, if i > 30 { 20.0 } else { 10.0 }, i);
        }
        let fitted = fit(&set, Grid::Minimal, &mut |_| {}).unwrap();
        // The same model stored twice: once with this build's feature list, once with an older release's (one
        // feature renamed, as when `clock_ghz` was dropped).
        let mut old_features: Vec<&str> = OP_FEATURES.to_vec();
        old_features[22] = "clock_ghz";
        let mut current = new_regressor("linear.fwd.fp32", family::OP, "all", &OP_FEATURES, &fitted, 60, json!({}));
        current.activate = true;
        let mut stale = new_regressor("bmm.fwd.fp32", family::OP, "all", &old_features, &fitted, 60, json!({}));
        stale.activate = true;
        store.insert_regressors(None, &[current, stale]).await.unwrap();
        let registry = load_registry(&store).await.unwrap();
        assert!(registry.get("linear.fwd.fp32").is_some());
        assert!(registry.get("bmm.fwd.fp32").is_none(), "a stale feature list must not be served");
        assert_eq!(registry.len(), 1);
        assert_eq!(super::stale_models(&store).await.unwrap(), vec!["bmm.fwd.fp32".to_string()]);
    }

    #[test]
    fn thinning_keeps_every_kth_row_and_at_most_max() {
        let v: Vec<u32> = (0..10).collect();
        // ⌈10/4⌉ = 3 → rows 0, 3, 6, 9.
        assert_eq!(thin_evenly(v.clone(), 4), vec![0, 3, 6, 9]);
        assert_eq!(thin_evenly(v.clone(), 5), vec![0, 2, 4, 6, 8]);
        assert_eq!(thin_evenly(v.clone(), 10), v);
        assert_eq!(thin_evenly(v.clone(), 0), v);
        assert_eq!(thin_evenly(v, 1), vec![0]);
    }
}
