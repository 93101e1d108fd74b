//! Keeping a replica in step with what other processes commit to the shared database: every `every` (2 s) a
//! cheap poll of two fingerprints ([`Store::models_fingerprint`], [`Store::systems_fingerprint`]). A new active
//! model version anywhere reloads this replica's registry; a new system, calibration or imported GPU reloads the
//! GPU directory and invalidates the resolved-system cache (through [`Store::system_changes`]).

use std::sync::Arc;
use std::time::Duration;

use super::Service;
use crate::store::Store;

/// Starts the poller on the current runtime; it runs until the runtime stops (errors are logged and retried).
pub fn spawn_sync(service: Service, every: Duration) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut models = service.store.models_fingerprint().await.ok();
        let mut systems = service.store.systems_fingerprint().await.ok();
        loop {
            tokio::time::sleep(every).await;
            if let Err(e) = sync_once(&service, &mut models, &mut systems).await {
                tracing::warn!(error = %e, "cannot poll the database for other replicas' changes");
            }
        }
    })
}

/// One poll: reloads what changed since `models` and `systems` (updated to what was seen).
async fn sync_once(
    service: &Service,
    models: &mut Option<(i64, i64)>,
    systems: &mut Option<String>,
) -> Result<(), crate::store::StoreError> {
    let store: &Store = &service.store;
    let now = store.models_fingerprint().await?;
    if models.as_ref() != Some(&now) {
        let registry = crate::jobs::load_registry(store).await?;
        tracing::info!(models = registry.len(), "active models changed in the database; reloaded");
        service.registry.store(Arc::new(registry));
        *models = Some(now);
    }
    let now = store.systems_fingerprint().await?;
    if systems.as_ref() != Some(&now) {
        service.gpus.store(Arc::new(store.gpu_directory().await?));
        store.note_external_system_change();
        *systems = Some(now);
    }
    Ok(())
}
