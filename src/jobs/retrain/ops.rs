//! One operator key's training, as a pure function of what the store holds for it (run on a niced thread by
//! [`super::retrain`]): the cross-GPU model of (class, phase, dtype) and per-GPU models where a GPU has enough
//! samples, each with its promotion decision.

use std::collections::{BTreeMap, HashMap};

use super::niced::fit_niced;
use super::{new_regressor, trained_here, KeyReport, RetrainError};
use crate::hw::{GpuSpec, Precision};
use crate::learn::fit::{thin_by_key, MIN_ROWS};
use crate::learn::op_data::{engine_kernels, op_training_set, KernelView, OpObservation};
use crate::learn::promotion::{holdout_accuracy, Promotion};
use crate::learn::registry::family;
use crate::learn::{op_key, Grid};
use crate::op::{KernelFamily, OpClass, Phase};
use crate::store::profiles::OpRow;
use crate::store::regressors::NewRegressor;

/// Everything one operator key's training reads, owned (it moves to a training thread).
pub struct OpKey {
    pub key: String,
    pub class: OpClass,
    pub phase: Phase,
    pub dtype: Precision,
    /// The key's engine (None: engine-neutral and vLLM measurements).
    pub family: Option<KernelFamily>,
    /// Samples of the key (all GPUs), and per GPU as stored.
    pub total: u64,
    pub per_gpu: BTreeMap<String, u64>,
    pub rows: Vec<OpRow>,
    /// Stored GPU name → its description (None: not in the directory; its rows are skipped).
    pub gpus: HashMap<String, Option<GpuSpec>>,
    /// The datasets of the key's samples (provenance).
    pub datasets: Vec<String>,
    /// The active cross-GPU version and its hold-out model text (empty for a bundled version), if any.
    pub active: Option<(i64, String)>,
    /// Active per-GPU hold-out texts by per-GPU key.
    pub active_per_gpu: HashMap<String, String>,
    pub grid: Grid,
    pub max_training_rows: usize,
    pub per_gpu_min_samples: u64,
}

/// Trains `k`: the new versions (activation decided) and the report lines.
pub fn train_op_key(k: OpKey) -> Result<(Vec<NewRegressor>, Vec<KeyReport>), RetrainError> {
    let (mut new, mut report) = (Vec::new(), Vec::new());
    // One kernel per measured shape: the one the engine runs ([`engine_kernels`]).
    let rows = engine_kernels(k.rows, k.dtype, |r| KernelView {
        gpu: &r.gpu,
        dims: r.dims,
        kernel: &r.kernel_source,
        compute_dtype: &r.compute_dtype,
    });
    let observations: Vec<OpObservation> = rows
        .iter()
        .filter_map(|r| {
            k.gpus.get(&r.gpu)?.as_ref().map(|gpu| OpObservation {
                gpu,
                dims: r.dims,
                time_us: r.time_us,
                split_key: r.split_key,
            })
        })
        .collect();
    // A uniform sample by split key: measured tables arrive in grid order, where every k-th row would alias.
    let observations = thin_by_key(observations, k.max_training_rows, |o| o.split_key);
    let (set, summary) = op_training_set(k.class, k.phase, k.dtype, &observations);
    if set.len() < MIN_ROWS {
        report.push(KeyReport::skipped(&k.key, format!("{} usable samples, {} needed", set.len(), MIN_ROWS)));
        return Ok((new, report));
    }
    let fitted = fit_niced(&set, k.grid, &k.key)?;
    // Promotion: the candidate's hold-out model against the active one's, on the same validation rows.
    let candidate_acc = holdout_accuracy(&fitted.holdout_text, &set).unwrap_or(fitted.validation);
    let promotion = match &k.active {
        // A bundled version ships without its hold-out model: the candidate trained on its rows replaces it.
        Some((version, text)) if text.is_empty() => Promotion::replaces_bundled(candidate_acc.mape, *version),
        _ => Promotion::versioned(
            candidate_acc.mape,
            k.active.as_ref().map(|(version, text)| (*version, holdout_accuracy(text, &set))),
        ),
    };
    let activate = promotion.activated();
    let cross_holdout =
        if activate { Some(fitted.holdout_text.clone()) } else { k.active.map(|(_, t)| t).filter(|t| !t.is_empty()) };
    let summary = serde_json::to_value(&summary).unwrap_or_default();
    let mut reg =
        new_regressor(&k.key, family::OP, "all", &crate::learn::features::OP_FEATURES, &fitted, k.total, summary);
    reg.activate = activate;
    reg.promotion = serde_json::to_value(&promotion).unwrap_or_default();
    reg.provenance = trained_here(k.datasets.clone());
    report.push(KeyReport::trained(&k.key, set.len(), &fitted, true, promotion));
    new.push(reg);

    // Per-GPU models where a GPU has enough samples; active only when better than the cross-GPU model.
    for (gpu_name, n) in &k.per_gpu {
        if *n < k.per_gpu_min_samples {
            continue;
        }
        let Some(Some(gpu)) = k.gpus.get(gpu_name) else { continue };
        let canonical = gpu.name.clone();
        let obs: Vec<OpObservation> = observations.iter().filter(|o| o.gpu.name == canonical).copied().collect();
        let (gset, gsummary) = op_training_set(k.class, k.phase, k.dtype, &obs);
        if gset.len() < MIN_ROWS {
            continue;
        }
        let gkey = op_key(k.class, k.phase, k.dtype, k.family, Some(&canonical));
        let gfit = fit_niced(&gset, k.grid, &gkey)?;
        let cand = holdout_accuracy(&gfit.holdout_text, &gset).unwrap_or(gfit.validation);
        let cross = cross_holdout.as_deref().and_then(|t| holdout_accuracy(t, &gset));
        let own = k.active_per_gpu.get(&gkey).and_then(|t| holdout_accuracy(t, &gset));
        let promotion = Promotion::per_gpu(cand.mape, cross.map(|c| c.mape), own.map(|o| o.mape));
        let gsummary = serde_json::to_value(&gsummary).unwrap_or_default();
        let mut greg =
            new_regressor(&gkey, family::OP, &canonical, &crate::learn::features::OP_FEATURES, &gfit, *n, gsummary);
        greg.activate = promotion.activated();
        greg.promotion = serde_json::to_value(&promotion).unwrap_or_default();
        greg.provenance = trained_here(k.datasets.clone());
        report.push(KeyReport::trained(&gkey, gset.len(), &gfit, false, promotion));
        new.push(greg);
    }
    Ok((new, report))
}
