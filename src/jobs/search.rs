//! Search jobs: a configuration search too large to answer inline ([`crate::llm::search`]), run in the
//! background with its progress published every half second. Resolving the request's system (imported GPUs,
//! calibration) is the service's business: the runner is given a [`SearchRunner`] that does it.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::llm::search::{SearchRequest, SearchResult};
use crate::store::Store;

/// Candidates a running search has evaluated, of how many.
#[derive(Debug, Default)]
pub struct SearchProgress {
    /// Candidates evaluated so far.
    pub done: AtomicU64,
    /// Candidates in the search space (0 until the search has counted them).
    pub total: AtomicU64,
}

/// A boxed, sendable future (what [`SearchRunner::run_search_job`] returns).
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Runs one search with the current models, publishing progress: implemented by the service (which resolves the
/// request's system against the store) and handed to the runner by `app`.
pub trait SearchRunner: Send + Sync + 'static {
    /// Runs `req`, storing its progress in `progress`. Errors: why it cannot run (e.g. its system was removed
    /// since the job was queued), as the job's message.
    fn run_search_job(
        &self,
        req: SearchRequest,
        progress: Arc<SearchProgress>,
    ) -> BoxFuture<'static, Result<SearchResult, String>>;
}

/// The message of a finished search job.
pub fn message(result: &SearchResult) -> String {
    format!("evaluated {} configurations, {} fit", result.evaluated, result.fitting)
}

/// Runs a `search` job: `req` through `runner`, recording its progress on job `job_id` every half second.
/// Returns the search result, or why it failed (a request that no longer validates, e.g. its system was
/// removed).
pub async fn run(
    store: &Store,
    runner: &dyn SearchRunner,
    job_id: i64,
    req: SearchRequest,
) -> Result<SearchResult, String> {
    let progress = Arc::new(SearchProgress::default());
    let run = runner.run_search_job(req, progress.clone());
    tokio::pin!(run);
    let mut tick = tokio::time::interval(Duration::from_millis(500));
    loop {
        tokio::select! {
            r = &mut run => break r,
            _ = tick.tick() => {
                let (done, total) = (progress.done.load(Ordering::Relaxed), progress.total.load(Ordering::Relaxed));
                if total > 0 {
                    let msg = format!("evaluated {done} of {total} configurations");
                    if let Err(e) = store.job_progress(job_id, done as f64 / total as f64, &msg).await {
                        tracing::warn!(job = job_id, error = %e, "cannot record progress");
                    }
                }
            }
        }
    }
}
