//! The in-memory registry of active models: what predictions read, hot-swapped as a whole by the worker
//! (readers take an `Arc` snapshot and never see a half-updated set).

use std::collections::HashMap;
use std::sync::Arc;

use arc_swap::ArcSwap;

use super::lgbm::Model;
use crate::hw::Precision;
use crate::op::{OpClass, Phase};

/// Model families: what a regressor corrects.
pub mod family {
    /// Operator regressors (S1): `<class>.<phase>.<dtype>[.<gpu>]`.
    pub const OP: &str = "op";
    /// Communication corrections (S0): `comm.<collective>`.
    pub const COMM: &str = "comm";
    /// Kernel corrections (S0, S2 features): `kernel`.
    pub const KERNEL: &str = "kernel";
}

/// The feature list this build computes for a model family (`None` for an unknown family): a stored model trained
/// on another list (a database from an older release) must not be served.
pub fn current_features(family_name: &str) -> Option<&'static [&'static str]> {
    match family_name {
        family::OP => Some(&super::features::OP_FEATURES),
        family::COMM => Some(&super::comm_features::COMM_FEATURES),
        family::KERNEL => Some(&crate::kernel::pipes::PipeFeatures::NAMES),
        _ => None,
    }
}

/// True when a model of `family_name` was trained on `feature_names` other than this build computes.
pub fn is_stale(family_name: &str, feature_names: &[String]) -> bool {
    current_features(family_name).is_some_and(|f| !f.iter().eq(feature_names.iter()))
}

/// One active model.
#[derive(Debug)]
pub struct ActiveRegressor {
    /// Full key, e.g. `linear.fwd.fp32` or `linear.fwd.fp32.H100-SXM5-80GB`.
    pub key: String,
    pub version: i64,
    pub model: Model,
    /// The feature names the model was trained on, in order.
    pub feature_names: Vec<String>,
    /// Validation MAPE recorded at training.
    pub validation_mape: f64,
    /// What the model was trained on (rows per GPU, dims or placement ranges): its domain of validity.
    pub summary: serde_json::Value,
}

impl ActiveRegressor {
    /// The largest value of `field` (e.g. `max_nodes`) in the training set, when recorded.
    pub fn trained_max(&self, field: &str) -> Option<f64> {
        self.summary.get(field).and_then(|v| v.as_f64())
    }

    /// `regressor:<key>@v<n>`.
    pub fn source(&self) -> crate::cost::Source {
        crate::cost::Source::Regressor { key: self.key.clone(), version: self.version }
    }
}

/// The set of active models by key.
#[derive(Debug)]
pub struct Registry {
    by_key: HashMap<String, Arc<ActiveRegressor>>,
    /// Unique per registry built in this process: caches of predictions key on it, so a swap invalidates them.
    generation: u64,
}

static GENERATION: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

fn next_generation() -> u64 {
    GENERATION.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

impl Default for Registry {
    fn default() -> Self {
        Registry { by_key: HashMap::new(), generation: next_generation() }
    }
}

/// The registry shared between the worker (writer) and every request (readers).
pub type SharedRegistry = Arc<ArcSwap<Registry>>;

/// A fresh, empty shared registry.
pub fn shared() -> SharedRegistry {
    Arc::new(ArcSwap::from_pointee(Registry::default()))
}

/// Key of the operator regressor for (class, phase, dtype), all GPUs (`gpu` = None) or one GPU (catalog name).
pub fn op_key(class: OpClass, phase: Phase, dtype: Precision, gpu: Option<&str>) -> String {
    match gpu {
        None => format!("{class}.{}.{dtype}", phase.as_str()),
        Some(g) => format!("{class}.{}.{dtype}.{g}", phase.as_str()),
    }
}

impl Registry {
    /// A registry holding `models`.
    pub fn new(models: impl IntoIterator<Item = ActiveRegressor>) -> Registry {
        Registry {
            by_key: models.into_iter().map(|m| (m.key.clone(), Arc::new(m))).collect(),
            generation: next_generation(),
        }
    }

    /// This registry's generation (unique in the process).
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// The active model of `key`.
    pub fn get(&self, key: &str) -> Option<&Arc<ActiveRegressor>> {
        self.by_key.get(key)
    }

    /// The operator model for `gpu`: its per-GPU model where one is active, else the cross-GPU one.
    pub fn op(&self, class: OpClass, phase: Phase, dtype: Precision, gpu: &str) -> Option<&Arc<ActiveRegressor>> {
        self.get(&op_key(class, phase, dtype, Some(gpu))).or_else(|| self.get(&op_key(class, phase, dtype, None)))
    }

    /// Number of active models.
    pub fn len(&self) -> usize {
        self.by_key.len()
    }

    /// True without models.
    pub fn is_empty(&self) -> bool {
        self.by_key.is_empty()
    }

    /// Active (key, version) pairs, sorted.
    pub fn versions(&self) -> Vec<(String, i64)> {
        let mut v: Vec<(String, i64)> = self.by_key.values().map(|m| (m.key.clone(), m.version)).collect();
        v.sort();
        v
    }
}
