//! Serving (inference) predictions through the learned backend.

use super::systems::SystemContext;
use super::{Service, ServiceError};
use crate::cost::KernelChoice;
use crate::learn::backend::LearnedBackend;
use crate::llm::serving::request::Engine;
use crate::llm::serving::search::{InferenceSearchRequest, InferenceSearchResult};
use crate::llm::serving::{self, InferencePrediction, InferenceRequest, ServingConstants, ServingDerated};

impl Service {
    /// The backend serving predictions cost with: every operator through its active regressor where one covers it
    /// (the serving classes `attention_prefill`, `attention_decode` and `moe` included) — `engine`'s measured
    /// kernels where they exist, else the closest engine's ([`KernelChoice::Engine`]) —, collectives through the
    /// system's communication calibration when it has one, and what stays analytic derated by the serving
    /// constants ([`ServingConstants::CALIBRATED`]).
    fn serving_backend(&self, context: &SystemContext, engine: Engine) -> ServingDerated<LearnedBackend> {
        let learned = LearnedBackend::new(context.system.clone(), self.registry.load_full())
            .with_calibration(context.calibration.clone())
            .with_kernels(KernelChoice::Engine(engine.kernels()));
        ServingDerated::new(learned, ServingConstants::CALIBRATED)
    }

    /// Predicts steady-state serving ([`serving::predict`]). Errors: `NotFound` for an unknown system (field
    /// `system`), `Invalid` for an impossible request, naming the field.
    pub async fn predict_inference(&self, req: &InferenceRequest) -> Result<InferencePrediction, ServiceError> {
        let context = self.system_context(&req.system, "system").await?;
        let cfg = serving::validate(req, &context.system)?;
        let backend = self.serving_backend(&context, req.engine);
        Ok(serving::predict(&cfg, &backend, ServingConstants::CALIBRATED)?)
    }

    /// Searches serving configurations for a latency target ([`serving::search::search`]) on a blocking thread
    /// (it is CPU-bound). Errors as [`Service::predict_inference`], fields of [`InferenceSearchRequest`].
    pub async fn search_inference(&self, req: &InferenceSearchRequest) -> Result<InferenceSearchResult, ServiceError> {
        let context = self.system_context(&req.system, "system").await?;
        let backend = self.serving_backend(&context, req.engine);
        let req = req.clone();
        let result =
            tokio::task::spawn_blocking(move || serving::search::search(&req, &backend, ServingConstants::CALIBRATED))
                .await
                .map_err(|e| {
                    ServiceError::Internal(crate::store::StoreError::Corrupt(format!("search task failed: {e}")))
                })?;
        Ok(result?)
    }
}
