//! Keeping a replica in step with what other processes commit to the shared database: every `every` (2 s) a
//! cheap poll of two fingerprints ([`Store::models_fingerprint`], [`Store::systems_fingerprint`]). Stored active
//! model versions other than those the served registry was loaded from ([`crate::learn::Registry::fingerprint`])
//! reload this replica's registry — not the ones its own retrain just activated and swapped in (the retrain commits
//! and swaps under [`crate::jobs::REGISTRY_SWAP`], which the poll waits for); a new system, calibration or imported
//! GPU reloads the GPU directory and invalidates the resolved-system cache (through [`Store::system_changes`]).

use std::sync::Arc;
use std::time::Duration;

use super::Service;
use crate::store::Store;

/// Starts the poller on the current runtime; it runs until the runtime stops (errors are logged and retried).
pub fn spawn_sync(service: Service, every: Duration) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut systems = service.store.systems_fingerprint().await.ok();
        loop {
            tokio::time::sleep(every).await;
            if let Err(e) = sync_once(&service, &mut systems).await {
                tracing::warn!(error = %e, "cannot poll the database for other replicas' changes");
            }
        }
    })
}

/// One poll: reloads the models when the stored active versions are not those served, and the systems when they
/// changed since `systems` (updated to what was seen).
async fn sync_once(service: &Service, systems: &mut Option<String>) -> Result<(), crate::store::StoreError> {
    let store: &Store = &service.store;
    if service.registry.load().fingerprint() != Some(store.models_fingerprint().await?) {
        // A retrain of this replica commits and swaps its registry under this lock: wait for it, then look again.
        let _swap = crate::jobs::REGISTRY_SWAP.lock().await;
        if service.registry.load().fingerprint() != Some(store.models_fingerprint().await?) {
            let registry = crate::jobs::load_registry(store).await?;
            tracing::info!(models = registry.len(), "active models changed in the database; reloaded");
            service.registry.store(Arc::new(registry));
        }
    }
    let now = store.systems_fingerprint().await?;
    if systems.as_ref() != Some(&now) {
        service.gpus.store(Arc::new(store.gpu_directory().await?));
        store.note_external_system_change();
        *systems = Some(now);
    }
    Ok(())
}
