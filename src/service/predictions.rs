//! Training-iteration predictions and configuration searches through the learned backend.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::systems::SystemContext;
use super::{Service, ServiceError};
use crate::cost::{Derated, Efficiency, TRAINING_KERNELS};
use crate::jobs::search::{BoxFuture, SearchProgress, SearchRunner};
use crate::jobs::{self, Job};
use crate::learn::backend::LearnedBackend;
use crate::llm::run::run_estimate;
use crate::llm::search::{count_candidates, search, SearchRequest, SearchResult};
use crate::llm::trace::chrome::chrome_trace;
use crate::llm::trace::svg::svg;
use crate::llm::trace::TraceFormat;
use crate::llm::{self, TrainingPrediction, TrainingRequest};
use crate::store::jobs::JobRecord;

/// Width of a timeline SVG, pixels.
pub const TIMELINE_SVG_WIDTH: u32 = 1400;

/// A search answered now, or queued as a job.
#[derive(Debug)]
pub enum SearchOutcome {
    Done(Box<SearchResult>),
    Queued(JobRecord),
}

impl Service {
    /// The backend training predictions and searches cost with: every operator through its active regressor where
    /// one covers it (training's kernels, [`TRAINING_KERNELS`]), collectives through the system's communication
    /// calibration when it has one, and what stays analytic derated by the calibrated achievable efficiencies
    /// ([`Efficiency::CALIBRATED`]).
    fn training_backend(&self, context: &SystemContext) -> Derated<LearnedBackend> {
        let learned = LearnedBackend::new(context.system.clone(), self.registry.load_full())
            .with_calibration(context.calibration.clone())
            .with_kernels(TRAINING_KERNELS);
        Derated::new(learned, Efficiency::CALIBRATED)
    }

    /// Predicts one training iteration (S1 and its Megatron-LM extensions) with every operator corrected by its
    /// active regressor where one covers it and the remaining analytic times derated by the calibrated achievable
    /// efficiencies ([`Efficiency::CALIBRATED`]), and the whole-run estimate when `run` is given. Errors: `NotFound`
    /// for an unknown system (field `system`), `Invalid` for an impossible configuration, naming the field.
    ///
    /// When the system has an accepted calibration for the request's framework from uploaded runs
    /// ([`crate::llm::calibration`]), the iteration time, its interval, the throughput and the run estimate are
    /// scaled by its correction and the answer's `calibration` says so.
    pub async fn predict_training(&self, req: &TrainingRequest) -> Result<TrainingPrediction, ServiceError> {
        let context = self.system_context(&req.system, "system").await?;
        let mut p = self.predict_training_uncalibrated(req).await?;
        if let Some(cal) = context.training.iter().find(|c| c.accepted && c.framework == req.framework) {
            llm::calibration::apply(&mut p, cal);
        }
        if let Some(run) = &req.run {
            p.run = Some(run_estimate(&p, run, req.model.seq_len));
        }
        Ok(p)
    }

    /// [`Service::predict_training`] without the calibration from uploaded runs (what an uploaded run is
    /// compared with) and without the run estimate. Errors as [`Service::predict_training`].
    pub async fn predict_training_uncalibrated(
        &self,
        req: &TrainingRequest,
    ) -> Result<TrainingPrediction, ServiceError> {
        let (cfg, backend) = self.training_inputs(req).await?;
        Ok(llm::predict(&cfg, &backend)?)
    }

    /// The validated configuration of `req` and the backend to cost it with. Errors as
    /// [`Service::predict_training`].
    async fn training_inputs(
        &self,
        req: &TrainingRequest,
    ) -> Result<(llm::TrainingConfig, Derated<LearnedBackend>), ServiceError> {
        let context = self.system_context(&req.system, "system").await?;
        let cfg = llm::validate_request(req, context.system.total_gpus())?;
        if let Some(run) = &req.run {
            llm::validate_run(run)?;
        }
        Ok((cfg, self.training_backend(&context)))
    }

    /// The timeline of the iteration [`Service::predict_training`] predicts for `req` ([`llm::trace`]), rendered
    /// in `format`: Trace Event Format JSON (its span = the prediction's `iteration_time_s`) or an SVG Gantt
    /// chart. Errors as [`Service::predict_training`].
    pub async fn training_timeline(&self, req: &TrainingRequest, format: TraceFormat) -> Result<String, ServiceError> {
        let (cfg, backend) = self.training_inputs(req).await?;
        let (_, trace) = llm::predict::predict_traced(&cfg, &backend)?;
        let internal = |m: String| ServiceError::Internal(crate::store::StoreError::Corrupt(m));
        match format {
            TraceFormat::Chrome => serde_json::to_string(&chrome_trace(&trace)).map_err(|e| internal(e.to_string())),
            TraceFormat::Svg => svg(&trace, TIMELINE_SVG_WIDTH).map_err(|e| internal(e.to_string())),
        }
    }

    /// Searches for the fastest configurations: inline when the space has at most `search_inline_max` candidates,
    /// else as a `search` job (the worker runs it; progress in `GET /v1/jobs/{id}`). Errors as
    /// [`Service::predict_training`], fields of [`SearchRequest`].
    pub async fn search_training(&self, req: &SearchRequest) -> Result<SearchOutcome, ServiceError> {
        let context = self.system_context(&req.system, "system").await?;
        let system = &context.system;
        let n = count_candidates(req, system.gpus_per_node, system.total_gpus())?;
        if n > self.search_inline_max {
            let job = jobs::enqueue(&self.store, &Job::Search(Box::new(req.clone()))).await?;
            self.worker.wake();
            return Ok(SearchOutcome::Queued(job));
        }
        Ok(SearchOutcome::Done(Box::new(self.run_search(req, None).await?)))
    }

    /// Runs a search now on a blocking thread (the search is CPU-bound; the CLI, the worker and small searches
    /// use it), publishing its progress to `progress` when given.
    pub async fn run_search(
        &self,
        req: &SearchRequest,
        progress: Option<Arc<SearchProgress>>,
    ) -> Result<SearchResult, ServiceError> {
        let context = self.system_context(&req.system, "system").await?;
        let backend = self.training_backend(&context);
        let req = req.clone();
        let result = tokio::task::spawn_blocking(move || {
            search(&req, &backend, &mut |done, total| {
                if let Some(p) = &progress {
                    p.total.store(total, Ordering::Relaxed);
                    p.done.store(done, Ordering::Relaxed);
                }
            })
        })
        .await
        .map_err(|e| ServiceError::Internal(crate::store::StoreError::Corrupt(format!("search task failed: {e}"))))?;
        Ok(result?)
    }
}

/// Search jobs run through a fresh service over the same store, registry and worker handle, with the imported
/// GPUs reloaded: systems may name GPUs imported since the job was queued.
impl SearchRunner for Service {
    fn run_search_job(
        &self,
        req: SearchRequest,
        progress: Arc<SearchProgress>,
    ) -> BoxFuture<'static, Result<SearchResult, String>> {
        let service = Service::with(self.store.clone(), self.registry.clone(), self.worker.clone());
        Box::pin(async move {
            // Systems may name imported GPUs: resolve them against the same directory the API uses.
            let gpus = service.store.gpu_directory().await.map_err(|e| e.to_string())?;
            service.gpus.store(Arc::new(gpus));
            service.run_search(&req, Some(progress)).await.map_err(|e| e.to_string())
        })
    }
}
