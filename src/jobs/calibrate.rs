//! Calibration jobs: fit a system's communication models to its stored samples (MODELS.md §3.1–3.3). Queued
//! when an upload brings communication samples of a system (`params`: `{"system": "<name>"}`).

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::CalibrateParams;
use crate::comm::calibrated::{calibrate, SystemCalibration};
use crate::store::calibrations::StoredCalibration;
use crate::store::{Store, StoreError};

/// The result of a calibration job (`{"system": …, "samples": …}`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CalibrateResult {
    /// The calibrated system.
    pub system: String,
    /// Communication samples the calibration was fitted to.
    pub samples: u64,
}

/// Runs a calibration job; returns its message (samples and fits) and result. Errors as [`calibrate_system`].
pub async fn run(store: &Store, params: &CalibrateParams) -> Result<(String, CalibrateResult), StoreError> {
    let system = &params.system;
    let (stored, cal) = calibrate_system(store, system).await?;
    let fitted = cal.collectives.iter().filter(|g| g.fit.is_some()).count()
        + cal.link_classes.iter().filter(|l| l.fit.is_some()).count();
    Ok((
        format!("calibrated {system} from {} samples ({fitted} fits)", stored.samples),
        CalibrateResult { system: system.clone(), samples: stored.samples },
    ))
}

/// Calibrates `system` from every communication sample stored for it and stores the result (replacing the
/// previous calibration). Errors: unknown system ([`StoreError::NotFound`]), database errors.
pub async fn calibrate_system(
    store: &Store,
    system: &str,
) -> Result<(StoredCalibration, SystemCalibration), StoreError> {
    store.get_system(system).await?;
    let samples = store.comm_samples(system).await?;
    let cal = tokio::task::spawn_blocking(move || calibrate(&samples))
        .await
        .map_err(|e| StoreError::Corrupt(format!("calibration task: {e}")))?;
    let json = serde_json::to_value(&cal).map_err(|e| StoreError::Corrupt(e.to_string()))?;
    let stored = store.put_calibration(system, &json, cal.samples as u64).await?;
    Ok((stored, cal))
}

/// The stored calibration of `system`, decoded (None when never calibrated or unreadable).
pub async fn load_calibration(store: &Store, system: &str) -> Result<Option<Arc<SystemCalibration>>, StoreError> {
    Ok(store.calibration(system).await?.and_then(|c| {
        match serde_json::from_value::<SystemCalibration>(c.calibration) {
            Ok(cal) if cal.samples > 0 => Some(Arc::new(cal)),
            Ok(_) => None,
            Err(e) => {
                tracing::error!(%system, error = %e, "stored calibration does not decode; ignoring it");
                None
            }
        }
    }))
}
