//! Kernel regressor: LightGBM on ln(measured / pipe-demand ceiling) with S2's per-pipe features, over every
//! stored kernel sample whose GPU is known (S0's error correction of the kernel model, S2's features).

use std::sync::Arc;

use serde_json::json;

use super::{fit_blocking, holdout_accuracy, new_regressor, RetrainError};
use crate::kernel::pipes::PipeFeatures;
use crate::kernel::sample::estimate_sample;
use crate::learn::fit::{TrainingSet, MIN_ROWS};
use crate::learn::registry::family;
use crate::learn::Grid;
use crate::store::regressors::NewRegressor;
use crate::store::Store;

/// Key of the kernel regressor (all GPUs).
pub const KERNEL_KEY: &str = "kernel";

/// The kernel training set: every stored kernel sample with a catalog GPU and the metrics the pipe model needs.
pub async fn kernel_training_set(store: &Store) -> Result<TrainingSet, RetrainError> {
    let mut set = TrainingSet::new(&PipeFeatures::NAMES);
    let directory = store.gpu_directory().await?;
    for (id, s) in store.kernel_samples().await? {
        let Some(gpu) = s.gpu.as_deref().and_then(|n| directory.spec(n)) else { continue };
        let Ok(est) = estimate_sample(&s, &gpu) else { continue };
        let Some(p) = est.pipes else { continue };
        set.push(&p.features.values(), p.ceiling_us, s.duration_us, id as u64);
    }
    Ok(set)
}

/// Trains the kernel regressor when its samples changed (or with `force`).
pub async fn retrain_kernels(
    store: &Store,
    grid: Grid,
    force: bool,
    keys: Option<&[String]>,
    new: &mut Vec<NewRegressor>,
    report: &mut Vec<serde_json::Value>,
) -> Result<(), RetrainError> {
    if keys.is_some_and(|k| !k.iter().any(|w| w == KERNEL_KEY)) {
        return Ok(());
    }
    let set = kernel_training_set(store).await?;
    if set.is_empty() {
        return Ok(());
    }
    if set.len() < MIN_ROWS {
        report.push(
            json!({"key": KERNEL_KEY, "skipped": format!("{} usable kernel samples, {MIN_ROWS} needed", set.len())}),
        );
        return Ok(());
    }
    if !force && keys.is_none() && store.latest_trained_samples(KERNEL_KEY).await? == set.len() as u64 {
        report.push(json!({"key": KERNEL_KEY, "skipped": "samples unchanged since the last version"}));
        return Ok(());
    }
    let set = Arc::new(set);
    let fitted = fit_blocking(set.clone(), grid, KERNEL_KEY).await?;
    let cand = holdout_accuracy(&fitted.holdout_text, &set).unwrap_or(fitted.validation);
    let active = store.active_holdout(KERNEL_KEY).await?;
    let active_acc = active.as_ref().and_then(|(_, t)| holdout_accuracy(t, &set));
    let activate = active_acc.is_none_or(|a| cand.mape <= a.mape);
    let promotion = json!({"activated": activate, "candidate_validation_mape": cand.mape,
        "active_validation_mape": active_acc.map(|a| a.mape),
        "reason": if active.is_none() { "first model of this key" } else if activate { "not worse than the active version on the same held-out rows" } else { "worse than the active version on the same held-out rows" }});
    let mut reg = new_regressor(
        KERNEL_KEY,
        family::KERNEL,
        "all",
        &PipeFeatures::NAMES,
        &fitted,
        set.len() as u64,
        json!({"rows": set.len()}),
    );
    reg.activate = activate;
    reg.promotion = promotion.clone();
    report.push(json!({"key": KERNEL_KEY, "rows": set.len(), "validation_mape": fitted.validation.mape,
        "analytic_validation_mape": fitted.analytic_validation.mape, "promotion": promotion}));
    new.push(reg);
    Ok(())
}
