//! Kernel regressor: LightGBM on ln(measured / pipe-demand ceiling) with S2's per-pipe features, over every
//! stored kernel sample whose GPU is known (S0's error correction of the kernel model, S2's features).

use std::sync::Arc;

use serde_json::json;

use super::niced::{fit_async, holdout_pair, niced};
use super::{new_regressor, trained_here, KeyReport, RetrainError};
use crate::kernel::pipes::PipeFeatures;
use crate::learn::fit::{TrainingSet, MIN_ROWS};
use crate::learn::kernel_data::{kernel_training_set as build_set, KERNEL_KEY};
use crate::learn::promotion::Promotion;
use crate::learn::registry::family;
use crate::learn::Grid;
use crate::store::regressors::NewRegressor;
use crate::store::Store;

/// The kernel training set: every stored kernel sample with a catalog GPU and the metrics the pipe model needs.
pub async fn kernel_training_set(store: &Store) -> Result<TrainingSet, RetrainError> {
    let directory = store.gpu_directory().await?;
    let samples = store.kernel_samples().await?;
    niced(move || {
        build_set(
            samples.iter().filter_map(|(id, s)| Some((*id, s, s.gpu.as_deref().and_then(|n| directory.spec(n))?))),
        )
    })
    .await
}

/// Trains the kernel regressor when its samples changed (or with `force`).
pub async fn retrain_kernels(
    store: &Store,
    grid: Grid,
    force: bool,
    keys: Option<&[String]>,
    new: &mut Vec<NewRegressor>,
    report: &mut Vec<KeyReport>,
) -> Result<(), RetrainError> {
    if keys.is_some_and(|k| !k.iter().any(|w| w == KERNEL_KEY)) {
        return Ok(());
    }
    let set = kernel_training_set(store).await?;
    if set.is_empty() {
        return Ok(());
    }
    if set.len() < MIN_ROWS {
        report.push(KeyReport::skipped(KERNEL_KEY, format!("{} usable kernel samples, {MIN_ROWS} needed", set.len())));
        return Ok(());
    }
    if !force && keys.is_none() && store.latest_trained_samples(KERNEL_KEY).await? == set.len() as u64 {
        report.push(KeyReport::skipped(KERNEL_KEY, "samples unchanged since the last version"));
        return Ok(());
    }
    let set = Arc::new(set);
    let fitted = fit_async(set.clone(), grid, KERNEL_KEY).await?;
    let active = store.active_holdout(KERNEL_KEY).await?;
    let (cand, active_acc) =
        holdout_pair(set.clone(), fitted.holdout_text.clone(), active.as_ref().map(|(_, t)| t.clone())).await?;
    let cand = cand.unwrap_or(fitted.validation);
    let promotion = match &active {
        Some((_, text)) if text.is_empty() => Promotion::keyed_replaces_bundled(cand.mape),
        _ => Promotion::keyed(cand.mape, active.is_some(), active_acc),
    };
    let mut reg = new_regressor(
        KERNEL_KEY,
        family::KERNEL,
        "all",
        &PipeFeatures::NAMES,
        &fitted,
        set.len() as u64,
        json!({"rows": set.len()}),
    );
    reg.activate = promotion.activated();
    reg.promotion = serde_json::to_value(&promotion).unwrap_or_default();
    reg.provenance = trained_here(store.kernel_datasets().await?);
    report.push(KeyReport::trained(KERNEL_KEY, set.len(), &fitted, true, promotion));
    new.push(reg);
    Ok(())
}
