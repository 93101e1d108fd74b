//! Training-calibration jobs: refit a system × framework's correction of training predictions to its uploaded
//! runs, validation-gated ([`crate::llm::calibration`]). Queued in the transaction that stores each run
//! (`params`: `{"system": "<name>", "framework": "<framework>"}`).

use serde::{Deserialize, Serialize};

use crate::llm::calibration::{calibrate, TrainingCalibration};
use crate::llm::framework::Framework;
use crate::store::{Store, StoreError};

/// Parameters of a training-calibration job.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CalibrateTrainingParams {
    /// The system (its name).
    pub system: String,
    /// The framework whose runs are fitted.
    pub framework: Framework,
}

/// Runs a training-calibration job; returns its message and the stored calibration. Errors: unknown system,
/// database errors.
pub async fn run(store: &Store, params: &CalibrateTrainingParams) -> Result<(String, TrainingCalibration), StoreError> {
    store.get_system(&params.system).await?;
    let framework =
        serde_json::to_value(params.framework).ok().and_then(|v| v.as_str().map(String::from)).unwrap_or_default();
    let pairs = store.training_run_pairs(&params.system, &framework).await?;
    let cal = calibrate(&params.system, params.framework, &pairs);
    let stored = store.put_training_calibration(&cal).await?;
    let verdict = if stored.accepted { "accepted" } else { "not used" };
    Ok((
        format!(
            "calibrated {} × {framework} from {} runs: correction {:.4} {verdict} ({})",
            params.system, stored.runs, stored.correction, stored.reason
        ),
        stored,
    ))
}
