//! `perfcast predict-inference FILE`: one serving prediction, as `POST /v1/predictions/inference` answers it.

use std::path::Path;
use std::process::ExitCode;

use crate::config::Config;
use crate::llm::serving::InferenceRequest;

/// Predicts the [`InferenceRequest`] in `request` (`-` = stdin) and prints the prediction the API returns.
/// Exit codes as [`super::run_request`].
pub(super) async fn run(request: &Path, config: &Config) -> ExitCode {
    super::run_request(request, config, |service, req: InferenceRequest| async move {
        service.predict_inference(&req).await
    })
    .await
}
