//! The operations the HTTP API and the CLI share: they resolve names through the store and call the domain
//! core, so `perfcast predict request.json` and `POST /v1/predictions/training` give the same answer.

use crate::backend::AnalyticBackend;
use crate::hw::{System, SystemError, SystemSpec};
use crate::llm::{self, TrainingPrediction, TrainingRequest};
use crate::store::{systems::StoredSystem, Store, StoreError};

/// Why an operation failed, sorted by whose fault it is.
#[derive(Debug, thiserror::Error)]
pub enum ServiceError {
    /// A named thing does not exist (`what` = e.g. `system "x"`).
    #[error("{what} not found")]
    NotFound { what: String, field: Option<String> },
    /// The thing to create exists already.
    #[error("{0} already exists")]
    Conflict(String),
    /// The request is well-formed but impossible; `field` is its path in the request.
    #[error("{field}: {message}")]
    Invalid { field: String, message: String },
    /// Our fault.
    #[error(transparent)]
    Internal(StoreError),
}

impl From<StoreError> for ServiceError {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::NotFound(what) => ServiceError::NotFound { what, field: None },
            StoreError::Conflict(what) => ServiceError::Conflict(what),
            other => ServiceError::Internal(other),
        }
    }
}

impl From<llm::ConfigError> for ServiceError {
    fn from(e: llm::ConfigError) -> Self {
        ServiceError::Invalid { field: e.field, message: e.message }
    }
}

impl From<SystemError> for ServiceError {
    fn from(e: SystemError) -> Self {
        ServiceError::Invalid { field: e.field, message: e.message }
    }
}

/// The application's operations over one store.
#[derive(Debug, Clone)]
pub struct Service {
    pub store: Store,
}

impl Service {
    /// Wraps a store.
    pub fn new(store: Store) -> Service {
        Service { store }
    }

    /// Validates and stores a new system. Errors: `Invalid` naming the field, `Conflict` on a taken name.
    pub async fn create_system(&self, spec: &SystemSpec) -> Result<(StoredSystem, System), ServiceError> {
        let resolved = spec.resolve()?;
        let stored = self.store.insert_system(spec).await?;
        Ok((stored, resolved))
    }

    /// A stored system with its GPU resolved. Errors: `NotFound`; `Internal` when a stored GPU name left the
    /// catalog.
    pub async fn system(&self, name: &str) -> Result<(StoredSystem, System), ServiceError> {
        let stored = self.store.get_system(name).await?;
        let resolved = stored
            .spec
            .resolve()
            .map_err(|e| ServiceError::Internal(StoreError::Corrupt(format!("system {name}: {e}"))))?;
        Ok((stored, resolved))
    }

    /// Predicts one training iteration (S1). Errors: `NotFound` for an unknown system (field `system`),
    /// `Invalid` for an impossible configuration, naming the field.
    pub async fn predict_training(&self, req: &TrainingRequest) -> Result<TrainingPrediction, ServiceError> {
        let (_, system) = self.system(&req.system).await.map_err(|e| match e {
            ServiceError::NotFound { what, .. } => ServiceError::NotFound { what, field: Some("system".into()) },
            other => other,
        })?;
        let cfg = llm::validate(&req.model, &req.parallelism, req.precision, system.total_gpus())?;
        let backend = AnalyticBackend::new(system);
        Ok(llm::predict(&cfg, &backend)?)
    }
}
