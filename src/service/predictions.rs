//! Training-iteration predictions through the learned backend.

use super::{Service, ServiceError};
use crate::backend::LearnedBackend;
use crate::llm::{self, TrainingPrediction, TrainingRequest};

impl Service {
    /// Predicts one training iteration (S1) with every operator corrected by its active regressor where one
    /// covers it. Errors: `NotFound` for an unknown system (field `system`), `Invalid` for an impossible
    /// configuration, naming the field.
    pub async fn predict_training(&self, req: &TrainingRequest) -> Result<TrainingPrediction, ServiceError> {
        let system = self.system_for(&req.system, "system").await?;
        let cfg = llm::validate(&req.model, &req.parallelism, req.precision, system.total_gpus())?;
        let calibration = self.calibration(&system.name).await?;
        let backend = LearnedBackend::new(system, self.registry.load_full()).with_calibration(calibration);
        Ok(llm::predict(&cfg, &backend)?)
    }
}
