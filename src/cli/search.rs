//! `perfcast search FILE`: the fastest configuration that fits, as `POST /v1/predictions/training/search`
//! answers it, computed here however large the search is (no job).

use std::path::Path;
use std::process::ExitCode;

use crate::config::Config;
use crate::llm::search::SearchRequest;

/// Runs the [`SearchRequest`] in `request` (`-` = stdin) in this process and prints the result the API returns.
/// Exit codes as [`super::run_request`].
pub(super) async fn run(request: &Path, config: &Config) -> ExitCode {
    super::run_request(
        request,
        config,
        |service, req: SearchRequest| async move { service.run_search(&req, None).await },
    )
    .await
}
