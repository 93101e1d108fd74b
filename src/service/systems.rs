//! Systems: create and resolve, and the cache of resolved systems that predictions and estimates read.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use super::{Service, ServiceError};
use crate::comm::calibrated::SystemCalibration;
use crate::hw::{GpuDirectory, System, SystemSpec};
use crate::jobs::calibrate::load_calibration;
use crate::store::{systems::StoredSystem, StoreError};

/// What a prediction or estimate reads about a system: the system resolved against the GPU directory, and its
/// communication calibration.
#[derive(Debug)]
pub struct SystemContext {
    /// The system with its GPU resolved (catalog or imported).
    pub system: System,
    /// Its communication calibration (`POST /v1/systems/{name}/calibrate`), if it has one.
    pub calibration: Option<Arc<SystemCalibration>>,
    /// Its training calibrations per framework from uploaded runs, accepted or not
    /// (`POST /v1/systems/{system}/training-runs`; [`crate::llm::calibration`]).
    pub training: Vec<crate::llm::calibration::TrainingCalibration>,
}

/// How long a resolved system is used at most without looking at the database again. Writes through this
/// process (new systems, calibrations, GPU imports) invalidate at once; this bounds how long a write by another
/// process on the same database file goes unseen.
const SYSTEM_CACHE_TTL: Duration = Duration::from_secs(5);
/// Names kept at most (only names of stored systems are kept; the cache starts over when full).
const SYSTEM_CACHE_MAX: usize = 1024;

/// Resolved systems by requested name. An entry is used only while the store has committed no write to systems,
/// calibrations or GPUs since it was read, the GPU directory is the one it was resolved with, and it is younger
/// than [`SYSTEM_CACHE_TTL`]; so every prediction sees a calibration or GPU import the moment it commits, without
/// two database reads per request.
#[derive(Debug, Default)]
pub struct SystemCache {
    entries: RwLock<HashMap<String, Cached>>,
}

#[derive(Debug)]
struct Cached {
    context: Arc<SystemContext>,
    changes: u64,
    gpus: Arc<GpuDirectory>,
    read_at: Instant,
}

impl SystemCache {
    fn get(&self, name: &str, changes: u64, gpus: &Arc<GpuDirectory>) -> Option<Arc<SystemContext>> {
        let entries = self.entries.read().unwrap_or_else(|e| e.into_inner());
        let c = entries.get(name)?;
        (c.changes == changes && Arc::ptr_eq(&c.gpus, gpus) && c.read_at.elapsed() < SYSTEM_CACHE_TTL)
            .then(|| c.context.clone())
    }

    fn put(&self, name: &str, cached: Cached) {
        let mut entries = self.entries.write().unwrap_or_else(|e| e.into_inner());
        if entries.len() >= SYSTEM_CACHE_MAX && !entries.contains_key(name) {
            entries.clear();
        }
        entries.insert(name.to_string(), cached);
    }
}

impl Service {
    /// Validates and stores a new system. Errors: `Invalid` naming the field, `Conflict` on a taken name.
    pub async fn create_system(&self, spec: &SystemSpec) -> Result<(StoredSystem, System), ServiceError> {
        let resolved = spec.resolve_with(&self.gpus.load())?;
        let stored = self.store.insert_system(spec).await?;
        Ok((stored, resolved))
    }

    /// A stored system with its GPU resolved. Errors: `NotFound`; `Internal` when a stored GPU name left the
    /// catalog.
    pub async fn system(&self, name: &str) -> Result<(StoredSystem, System), ServiceError> {
        let stored = self.store.get_system(name).await?;
        let resolved = stored
            .spec
            .resolve_with(&self.gpus.load())
            .map_err(|e| ServiceError::Internal(StoreError::Corrupt(format!("system {name}: {e}"))))?;
        Ok((stored, resolved))
    }

    /// Like [`Service::system`], but a missing system names the request field `field`.
    pub async fn system_for(&self, name: &str, field: &str) -> Result<System, ServiceError> {
        self.system(name).await.map(|(_, s)| s).map_err(|e| not_found_in(e, field))
    }

    /// The resolved system `name` and its calibration, as predictions and estimates use them: from the cache of
    /// resolved systems (see [`SystemCache`]) or the database. Errors: `NotFound` naming `field`; `Internal`.
    pub async fn system_context(&self, name: &str, field: &str) -> Result<Arc<SystemContext>, ServiceError> {
        // Read both tags before the database, so that a write committed meanwhile makes the entry stale.
        let changes = self.store.system_changes();
        let gpus = self.gpus.load_full();
        if let Some(context) = self.systems.get(name, changes, &gpus) {
            return Ok(context);
        }
        let stored = self.store.get_system(name).await.map_err(|e| not_found_in(e.into(), field))?;
        let system = stored
            .spec
            .resolve_with(&gpus)
            .map_err(|e| ServiceError::Internal(StoreError::Corrupt(format!("system {name}: {e}"))))?;
        let calibration = load_calibration(&self.store, &system.name).await?;
        let training = self.store.training_calibrations(&system.name).await?;
        let context = Arc::new(SystemContext { system, calibration, training });
        self.systems.put(name, Cached { context: context.clone(), changes, gpus, read_at: Instant::now() });
        Ok(context)
    }
}

fn not_found_in(e: ServiceError, field: &str) -> ServiceError {
    match e {
        ServiceError::NotFound { what, .. } => ServiceError::NotFound { what, field: Some(field.into()) },
        other => other,
    }
}
