//! `perfcast search FILE`: the fastest configuration that fits, as `POST /v1/predictions/training/search`
//! answers it, computed here however large the search is (no job).

use std::path::Path;
use std::process::ExitCode;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use super::progress::Mode;
use crate::config::Config;
use crate::jobs::search::SearchProgress;
use crate::llm::search::SearchRequest;

/// Runs the [`SearchRequest`] in `request` (`-` = stdin) in this process and prints the result the API returns,
/// with a bar of the candidates evaluated on a terminal (`progress`). Exit codes as [`super::run_request`].
pub(super) async fn run(request: &Path, config: &Config, progress: Mode) -> ExitCode {
    super::run_request(request, config, progress, |service, req: SearchRequest| async move {
        let Some(bar) = progress.counter("candidates") else {
            return service.run_search(&req, None).await;
        };
        let shared = Arc::new(SearchProgress::default());
        let (watched, shown) = (shared.clone(), bar.clone());
        let watcher = tokio::spawn(async move {
            loop {
                shown.set_length(watched.total.load(Ordering::Relaxed));
                shown.set_position(watched.done.load(Ordering::Relaxed));
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        });
        let result = service.run_search(&req, Some(shared)).await;
        watcher.abort();
        bar.finish_and_clear();
        result
    })
    .await
}
