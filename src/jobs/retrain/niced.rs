//! Where a retrain's CPU work runs: on threads of its own at a lower scheduling priority, never on the async
//! runtime's workers (which serve requests). A retrain then takes the cores only while requests leave them idle.

use std::sync::Arc;

use super::RetrainError;
use crate::learn::fit::{fit_with, Accuracy, FitError, Fitted, Threads};
use crate::learn::promotion::holdout_accuracy;
use crate::learn::{Grid, TrainingSet};

/// Nice value of the threads that train models: below every request-serving thread (0).
pub const TRAINING_NICE: i32 = 10;

/// Lowers the calling thread's scheduling priority to [`TRAINING_NICE`] (Linux: nice is per thread, and threads it
/// starts inherit it). Failing to is harmless: the retrain then competes with requests on equal terms.
pub fn lower_priority() {
    #[cfg(target_os = "linux")]
    // SAFETY: setpriority on this thread's id only changes its nice value; gettid cannot fail.
    unsafe {
        libc::setpriority(libc::PRIO_PROCESS, libc::gettid() as libc::id_t, TRAINING_NICE);
    }
}

/// Runs `f` on a thread of its own at [`TRAINING_NICE`] and awaits its result. Errors: the thread cannot be
/// started, or `f` panics.
pub async fn niced<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> Result<T, RetrainError> {
    let (tx, rx) = tokio::sync::oneshot::channel();
    std::thread::Builder::new()
        .name("perfcast-train".into())
        .spawn(move || {
            lower_priority();
            let _ = tx.send(f());
        })
        .map_err(|e| RetrainError::Join(format!("cannot start a training thread: {e}")))?;
    rx.await.map_err(|_| RetrainError::Join("a training thread panicked".into()))
}

/// [`fit_with`] on the calling (niced) thread and the candidates' threads, which start niced too.
pub fn fit_niced(set: &TrainingSet, grid: Grid, key: &str) -> Result<Fitted, RetrainError> {
    let threads = Threads { on_start: lower_priority, ..Threads::default() };
    fit_with(set, grid, threads, &mut |_| {}).map_err(|source: FitError| RetrainError::Fit { key: key.into(), source })
}

/// [`fit_niced`] on a niced thread of its own, awaited.
pub async fn fit_async(set: Arc<TrainingSet>, grid: Grid, key: &str) -> Result<Fitted, RetrainError> {
    let key = key.to_string();
    niced(move || fit_niced(&set, grid, &key)).await?
}

/// The hold-out accuracies of a candidate's and of the active version's hold-out models on `set`'s validation rows
/// (None where a text is absent, empty or does not load), computed on a niced thread.
pub async fn holdout_pair(
    set: Arc<TrainingSet>,
    candidate: String,
    active: Option<String>,
) -> Result<(Option<Accuracy>, Option<Accuracy>), RetrainError> {
    niced(move || (holdout_accuracy(&candidate, &set), active.and_then(|t| holdout_accuracy(&t, &set)))).await
}
