//! The stored models the service serves: loading the active versions into a registry, and finding those this
//! build cannot serve (trained on another feature list).

use std::collections::HashMap;

use crate::learn::lgbm::Model;
use crate::learn::registry::is_stale;
use crate::learn::{ActiveRegressor, Registry};
use crate::store::regressors::RegressorRecord;
use crate::store::{Store, StoreError};

/// True when `r` was trained on another feature list than this build computes for its family.
fn stale(r: &RegressorRecord) -> bool {
    is_stale(&r.family, &r.feature_names)
}

/// Keys of the active versions [`load_registry`] does not serve because they were trained on another feature list
/// (a database from an older release); the service queues a retrain at startup when there are any.
pub async fn stale_models(store: &Store) -> Result<Vec<String>, StoreError> {
    Ok(store.active_regressors().await?.into_iter().filter(stale).map(|r| r.key).collect())
}

/// Held by whoever commits new active versions and then swaps the registry in this process (a retrain), and by the
/// replica poller before it reloads: the poller waits for an in-flight swap and then finds the registry already
/// current, instead of loading the same versions a second time.
pub static REGISTRY_SWAP: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Loads the active versions from the store into a registry (marked with their fingerprint, as
/// [`Store::models_fingerprint`] computes it). Versions whose model text does not load, or that
/// were trained on another feature list than this build computes (a database from an older release), are
/// skipped with a log: serving continues analytically for their keys until the next retrain replaces them.
pub async fn load_registry(store: &Store) -> Result<Registry, StoreError> {
    let records = store.active_regressors().await?;
    let fingerprint = (records.iter().map(|r| r.id).max().unwrap_or(0), records.len() as i64);
    // Parsing dozens of LightGBM texts is CPU work (about a second for the bundled models): a niced thread, so that
    // the hot swap after a retrain does not stall requests.
    let registry = super::retrain::niced::niced(move || registry_of(records))
        .await
        .map_err(|e| StoreError::Corrupt(e.to_string()))?;
    Ok(registry.with_fingerprint(fingerprint))
}

/// [`load_registry`] at normal priority (on the blocking pool, off the async workers): for a start, which serves
/// nothing that needs the models until they are loaded, so a niced load would only make it wait for whatever
/// else runs on the machine. `parsed` holds models parsed already, by regressor id (the ones a first start's
/// install activated); the other active versions' texts are parsed here.
pub async fn load_registry_at_start(store: &Store, parsed: HashMap<i64, Model>) -> Result<Registry, StoreError> {
    let records = store.active_regressors().await?;
    let fingerprint = (records.iter().map(|r| r.id).max().unwrap_or(0), records.len() as i64);
    let registry = tokio::task::spawn_blocking(move || registry_with(records, parsed))
        .await
        .map_err(|e| StoreError::Corrupt(format!("loading the models: {e}")))?;
    Ok(registry.with_fingerprint(fingerprint))
}

/// The registry of `records` (active versions with their model texts); see [`load_registry`].
fn registry_of(records: Vec<RegressorRecord>) -> Registry {
    registry_with(records, HashMap::new())
}

/// [`registry_of`], taking the models of `parsed` (by regressor id) instead of parsing their texts.
fn registry_with(records: Vec<RegressorRecord>, mut parsed: HashMap<i64, Model>) -> Registry {
    let mut models = Vec::with_capacity(records.len());
    for r in records {
        if stale(&r) {
            tracing::warn!(key = %r.key, version = r.version,
                "stored model was trained on another feature list; skipped until the next retrain replaces it");
            continue;
        }
        let model = match parsed.remove(&r.id) {
            Some(m) => Ok(m),
            None => Model::from_text(r.model.as_deref().unwrap_or("")),
        };
        match model {
            Ok(model) => models.push(ActiveRegressor {
                key: r.key,
                version: r.version,
                model,
                feature_names: r.feature_names,
                validation_mape: r.fit.validation_mape,
                summary: r.fit.summary,
            }),
            Err(e) => tracing::error!(key = %r.key, version = r.version, error = %e, "stored model does not load"),
        }
    }
    let registry = Registry::new(models);
    crate::metrics::active_models(&registry.versions());
    registry
}

#[cfg(test)]
mod tests {
    use super::load_registry;
    use crate::jobs::retrain::new_regressor;
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
        // Its fingerprint is the stored active set's (ids 1 and 2, both active), the stale version included: the
        // replica poller compares the two to skip reloading what is already served.
        assert_eq!(registry.fingerprint(), Some((2, 2)));
        assert_eq!(registry.fingerprint(), Some(store.models_fingerprint().await.unwrap()));
        assert_eq!(super::stale_models(&store).await.unwrap(), vec!["bmm.fwd.fp32".to_string()]);
    }
}
