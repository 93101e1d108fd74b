//! Systems: create and resolve.

use super::{Service, ServiceError};
use crate::hw::{System, SystemSpec};
use crate::store::{systems::StoredSystem, StoreError};

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
        self.system(name).await.map(|(_, s)| s).map_err(|e| match e {
            ServiceError::NotFound { what, .. } => ServiceError::NotFound { what, field: Some(field.into()) },
            other => other,
        })
    }
}
