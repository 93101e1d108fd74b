//! Serving (inference) predictions through the learned backend.

use super::systems::SystemContext;
use super::{Service, ServiceError};
use crate::cost::KernelChoice;
use crate::learn::backend::LearnedBackend;
use crate::llm::serving::request::Engine;
use crate::llm::serving::search::{InferenceSearchRequest, InferenceSearchResult};
use crate::llm::serving::{self, InferencePrediction, InferenceRequest, ServingConstants, ServingDerated};
use crate::llm::trace::chrome::ChromeTrace;

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

    /// Predicts serving — the steady state and the simulated benchmark ([`serving::predict_with`], within the
    /// service's [`serving::SimLimits`]) — on a blocking thread (a simulation is CPU-bound). Errors: `NotFound` for
    /// an unknown system (field `system`), `Invalid` for an impossible request or one beyond the caps, naming the
    /// field.
    pub async fn predict_inference(&self, req: &InferenceRequest) -> Result<InferencePrediction, ServiceError> {
        let context = self.system_context(&req.system, "system").await?;
        let cfg = serving::validate(req, &context.system)?;
        serving::check_limits(&cfg, &self.sim_limits)?;
        let backend = self.serving_backend(&context, req.engine);
        let limits = self.sim_limits;
        blocking(move || serving::predict_with(&cfg, &backend, ServingConstants::CALIBRATED, &limits)).await
    }

    /// The simulated benchmark's steps as a Chrome trace ([`serving::timeline`], at most [`TIMELINE_STEPS`]
    /// steps). Errors as [`Service::predict_inference`].
    pub async fn inference_timeline(&self, req: &InferenceRequest) -> Result<ChromeTrace, ServiceError> {
        let context = self.system_context(&req.system, "system").await?;
        let cfg = serving::validate(req, &context.system)?;
        serving::check_limits(&cfg, &self.sim_limits)?;
        let backend = self.serving_backend(&context, req.engine);
        let limits = self.sim_limits;
        blocking(move || serving::timeline(&cfg, &backend, ServingConstants::CALIBRATED, &limits, TIMELINE_STEPS)).await
    }

    /// Searches serving configurations for a latency target ([`serving::search::search`]) on a blocking thread
    /// (it is CPU-bound). Errors as [`Service::predict_inference`], fields of [`InferenceSearchRequest`].
    pub async fn search_inference(&self, req: &InferenceSearchRequest) -> Result<InferenceSearchResult, ServiceError> {
        let context = self.system_context(&req.system, "system").await?;
        let backend = self.serving_backend(&context, req.engine);
        let req = req.clone();
        blocking(move || serving::search::search(&req, &backend, ServingConstants::CALIBRATED)).await
    }
}

/// Steps a serving timeline keeps (its first ones; `otherData.truncated` says when more ran).
pub const TIMELINE_STEPS: usize = 100_000;

/// Runs CPU-bound serving work on a blocking thread.
async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, crate::llm::ConfigError> + Send + 'static,
) -> Result<T, ServiceError> {
    let result = tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| ServiceError::Internal(crate::store::StoreError::Corrupt(format!("serving task failed: {e}"))))?;
    Ok(result?)
}
