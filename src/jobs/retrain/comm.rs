//! Communication regressors: per collective, LightGBM on ln(measured / calibrated α–β estimate) over every
//! system's OSU / nccl-tests samples (S0's error correction of the communication model).

use std::sync::Arc;

use serde_json::json;

use super::niced::{fit_async, holdout_pair, niced};
use super::{new_regressor, trained_here, KeyReport, RetrainError};
use crate::comm::calibrated::calibrate;
use crate::jobs::calibrate::load_calibration;
use crate::learn::comm_data::{push_system_samples, CommTrainingSets};
use crate::learn::comm_features::{comm_key, COMM_FEATURES};
use crate::learn::fit::MIN_ROWS;
use crate::learn::promotion::Promotion;
use crate::learn::registry::family;
use crate::learn::Grid;
use crate::store::regressors::NewRegressor;
use crate::store::Store;

/// The training sets of every collective from every system's samples: each system resolved against the stored
/// GPU directory (systems that no longer resolve are skipped) and calibrated (its stored calibration, else a fit
/// of its samples).
pub async fn comm_training_sets(store: &Store) -> Result<CommTrainingSets, RetrainError> {
    let directory = store.gpu_directory().await?;
    let mut systems = Vec::new();
    for (name, _) in store.comm_sample_counts().await? {
        let Ok(system) = store.get_system(&name).await?.spec.resolve_with(&directory) else { continue };
        let samples = store.comm_samples(&name).await?;
        let cal = load_calibration(store, &name).await?;
        systems.push((name, system, samples, cal));
    }
    // Calibrating and computing features is CPU work: a niced thread, not the runtime.
    niced(move || {
        let mut sets = CommTrainingSets::new();
        for (name, system, samples, cal) in systems {
            let cal = cal.unwrap_or_else(|| Arc::new(calibrate(&samples)));
            push_system_samples(&mut sets, &name, &system, &samples, &cal);
        }
        sets
    })
    .await
}

/// Trains the communication regressors whose samples changed (or all with `force`), appending new versions to
/// `new` and per-key lines to `report`.
pub async fn retrain_comm(
    store: &Store,
    grid: Grid,
    force: bool,
    keys: Option<&[String]>,
    new: &mut Vec<NewRegressor>,
    report: &mut Vec<KeyReport>,
) -> Result<(), RetrainError> {
    let sets = comm_training_sets(store).await?;
    for (c, (set, domain)) in sets {
        let key = comm_key(c);
        if keys.is_some_and(|k| !k.iter().any(|w| *w == key)) {
            continue;
        }
        if set.len() < MIN_ROWS {
            report.push(KeyReport::skipped(&key, format!("{} samples, {MIN_ROWS} needed", set.len())));
            continue;
        }
        if !force && keys.is_none() && store.latest_trained_samples(&key).await? == set.len() as u64 {
            report.push(KeyReport::skipped(&key, "samples unchanged since the last version"));
            continue;
        }
        let set = Arc::new(set);
        let fitted = fit_async(set.clone(), grid, &key).await?;
        let active = store.active_holdout(&key).await?;
        let (cand, active_acc) =
            holdout_pair(set.clone(), fitted.holdout_text.clone(), active.as_ref().map(|(_, t)| t.clone())).await?;
        let cand = cand.unwrap_or(fitted.validation);
        let promotion = match &active {
            Some((_, text)) if text.is_empty() => Promotion::keyed_replaces_bundled(cand.mape),
            _ => Promotion::keyed(cand.mape, active.is_some(), active_acc),
        };
        let mut reg = new_regressor(
            &key,
            family::COMM,
            "all",
            &COMM_FEATURES,
            &fitted,
            set.len() as u64,
            json!({"rows": set.len(), "max_nodes": domain.max_nodes, "max_ranks": domain.max_ranks}),
        );
        reg.activate = promotion.activated();
        reg.promotion = serde_json::to_value(&promotion).unwrap_or_default();
        reg.provenance = trained_here(store.comm_datasets(c.as_str()).await?);
        report.push(KeyReport::trained(&key, set.len(), &fitted, true, promotion));
        new.push(reg);
    }
    Ok(())
}
