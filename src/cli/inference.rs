//! `perfcast predict-inference FILE`: one serving prediction, as `POST /v1/predictions/inference` answers it (with
//! `--timeline`, its simulated steps as `POST /v1/predictions/inference/timeline` answers);
//! `perfcast search-inference FILE`: the configurations meeting a latency target, as
//! `POST /v1/predictions/inference/search` answers.

use std::path::Path;
use std::process::ExitCode;

use crate::config::Config;
use crate::llm::serving::search::InferenceSearchRequest;
use crate::llm::serving::InferenceRequest;

/// Predicts the [`InferenceRequest`] in `request` (`-` = stdin) and prints the prediction the API returns, or
/// with `timeline` its simulated steps as a Chrome trace. Exit codes as [`super::run_request`].
pub(super) async fn run(request: &Path, config: &Config, timeline: bool, progress: super::progress::Mode) -> ExitCode {
    if timeline {
        return super::run_request(request, config, progress, |service, req: InferenceRequest| async move {
            service.inference_timeline(&req).await
        })
        .await;
    }
    super::run_request(request, config, progress, |service, req: InferenceRequest| async move {
        service.predict_inference(&req).await
    })
    .await
}

/// Searches the [`InferenceSearchRequest`] in `request` (`-` = stdin) and prints the result the API returns.
pub(super) async fn search(request: &Path, config: &Config, progress: super::progress::Mode) -> ExitCode {
    super::run_request(request, config, progress, |service, req: InferenceSearchRequest| async move {
        service.search_inference(&req).await
    })
    .await
}
