//! `perfcast predict FILE`: one training-iteration prediction, as `POST /v1/predictions/training` answers it.

use std::path::Path;
use std::process::ExitCode;

use crate::config::Config;
use crate::llm::TrainingRequest;

/// Predicts the [`TrainingRequest`] in `request` (`-` = stdin) and prints the prediction the API returns.
/// Exit codes as [`super::run_request`].
pub(super) async fn run(request: &Path, config: &Config, progress: super::progress::Mode) -> ExitCode {
    super::run_request(request, config, progress, |service, req: TrainingRequest| async move {
        service.predict_training(&req).await
    })
    .await
}
