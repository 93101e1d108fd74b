//! Communication regressors: per collective, LightGBM on ln(measured / calibrated α–β estimate) over every
//! system's OSU / nccl-tests samples (S0's error correction of the communication model).

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::json;

use super::calibrate::load_calibration;
use super::{fit_blocking, holdout_accuracy, new_regressor, RetrainError};
use crate::comm::calibrated::calibrate;
use crate::comm::{Collective, Group};
use crate::samples::CommSample;
use crate::learn::comm_features::{comm_features, comm_key, COMM_FEATURES};
use crate::learn::fit::{TrainingSet, MIN_ROWS};
use crate::learn::registry::family;
use crate::learn::Grid;
use crate::store::regressors::NewRegressor;
use crate::store::Store;

/// The placements a communication regressor was trained on: it corrects only collectives within them (a
/// correction learned on node pairs says nothing about ten nodes).
#[derive(Debug, Clone, Copy, Default, serde::Serialize)]
pub struct Domain {
    pub max_nodes: u32,
    pub max_ranks: u32,
}

/// Where a sample's ranks sat: its nodes and ranks per node (derived from each other when one is missing).
pub fn sample_group(s: &CommSample) -> Group {
    let ranks = s.ranks.max(1);
    let (nodes, per) = match (s.nodes, s.gpus_per_node) {
        (Some(n), Some(g)) => (n.max(1), g.max(1)),
        (Some(n), None) => (n.max(1), ranks.div_ceil(n.max(1))),
        (None, Some(g)) => (ranks.div_ceil(g.max(1)), g.max(1).min(ranks)),
        (None, None) => (1, ranks),
    };
    Group { ranks, nodes, ranks_per_node: per.min(ranks) }
}

fn split_key(system: &str, i: usize, s: &CommSample) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    (system, i, s.collective, s.bytes, s.ranks, s.nodes, s.time_us.to_bits()).hash(&mut h);
    h.finish()
}

/// The training sets of every collective from every system's samples (baseline: the α–β algorithms over the
/// system's calibrated links, never a measured group's own fit, which would leave nothing to learn).
pub async fn comm_training_sets(store: &Store) -> Result<BTreeMap<Collective, (TrainingSet, Domain)>, RetrainError> {
    let mut sets: BTreeMap<Collective, (TrainingSet, Domain)> = BTreeMap::new();
    let directory = store.gpu_directory().await?;
    for (name, _) in store.comm_sample_counts().await? {
        let Ok(system) = store.get_system(&name).await?.spec.resolve_with(&directory) else { continue };
        let samples = store.comm_samples(&name).await?;
        let cal = match load_calibration(store, &name).await? {
            Some(c) => c,
            None => Arc::new(calibrate(&samples)),
        };
        for (i, s) in samples.iter().enumerate() {
            let group = sample_group(s);
            // The calibrated links (exact group fits skipped), or the declared ones.
            let base_links = crate::comm::GroupLinks::on(&system, group.ranks_per_node);
            let links = cal.links(s.collective, group.ranks_per_node, &base_links);
            let base = crate::comm::estimate(s.collective, s.bytes as f64, group, &links).time_us;
            let x = comm_features(s.collective, s.bytes as f64, group, &links, base);
            let (set, domain) =
                sets.entry(s.collective).or_insert_with(|| (TrainingSet::new(&COMM_FEATURES), Domain::default()));
            if set.push(&x, base, s.time_us, split_key(&name, i, s)) {
                domain.max_nodes = domain.max_nodes.max(group.nodes);
                domain.max_ranks = domain.max_ranks.max(group.ranks);
            }
        }
    }
    Ok(sets)
}

/// Trains the communication regressors whose samples changed (or all with `force`), appending new versions to
/// `new` and per-key lines to `report`.
pub async fn retrain_comm(
    store: &Store,
    grid: Grid,
    force: bool,
    keys: Option<&[String]>,
    new: &mut Vec<NewRegressor>,
    report: &mut Vec<serde_json::Value>,
) -> Result<(), RetrainError> {
    let sets = comm_training_sets(store).await?;
    for (c, (set, domain)) in sets {
        let key = comm_key(c);
        if keys.is_some_and(|k| !k.iter().any(|w| *w == key)) {
            continue;
        }
        if set.len() < MIN_ROWS {
            report.push(json!({"key": key, "skipped": format!("{} samples, {MIN_ROWS} needed", set.len())}));
            continue;
        }
        if !force && keys.is_none() && store.latest_trained_samples(&key).await? == set.len() as u64 {
            report.push(json!({"key": key, "skipped": "samples unchanged since the last version"}));
            continue;
        }
        let set = Arc::new(set);
        let fitted = fit_blocking(set.clone(), grid, &key).await?;
        let cand = holdout_accuracy(&fitted.holdout_text, &set).unwrap_or(fitted.validation);
        let active = store.active_holdout(&key).await?;
        let active_acc = active.as_ref().and_then(|(_, t)| holdout_accuracy(t, &set));
        let activate = active_acc.is_none_or(|a| cand.mape <= a.mape);
        let promotion = json!({"activated": activate,
            "reason": if active.is_none() { "first model of this key" } else if activate { "not worse than the active version on the same held-out rows" } else { "worse than the active version on the same held-out rows" },
            "candidate_validation_mape": cand.mape, "active_validation_mape": active_acc.map(|a| a.mape)});
        let mut reg = new_regressor(
            &key,
            family::COMM,
            "all",
            &COMM_FEATURES,
            &fitted,
            set.len() as u64,
            json!({"rows": set.len(), "max_nodes": domain.max_nodes, "max_ranks": domain.max_ranks}),
        );
        reg.activate = activate;
        reg.promotion = promotion.clone();
        report.push(json!({"key": key, "rows": set.len(), "validation_mape": fitted.validation.mape,
            "analytic_validation_mape": fitted.analytic_validation.mape, "promotion": promotion}));
        new.push(reg);
    }
    Ok(())
}
