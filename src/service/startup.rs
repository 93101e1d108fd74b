//! Where a starting server is: the first start on a new database installs the bundled measurements and models
//! (`crate::bundle::install`) and loads the active models while the server already listens. [`Startup`] is that
//! progress, shared by the install (which advances it), `/readyz` and the 503s of requests that need the install
//! (which show it), and the line or progress bar on stderr (which draws it).
//!
//! A service made with [`super::Service::new`] (the CLI, tests that drive the router directly) has no startup in
//! flight: its phase is [`Phase::Idle`] and nothing is held back.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
use std::sync::Mutex;
use std::time::Instant;

use serde::Serialize;
use utoipa::ToSchema;

/// A step of the start.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    /// No start in flight (a service that was not started by `app::start`).
    Idle,
    /// Checking whether the database holds the embedded bundle's version.
    Checking,
    /// Another replica is installing the bundle into the shared database (PostgreSQL); this one waits for it.
    WaitingForReplica,
    /// Decompressing and parsing the bundled models.
    Reading,
    /// Writing the bundled samples (`samples_done` of `samples_total`), one transaction per part, before the start
    /// is ready (a CLI or test start; `perfcast serve` writes them after it is ready, `/readyz` showing how far).
    WritingSamples,
    /// Writing the bundled model versions (`models_done` of `models_total`) and systems, in one transaction.
    WritingModels,
    /// Committing the bundled models.
    Committing,
    /// Loading the active models (parsing their LightGBM texts).
    LoadingModels,
    /// Started: every request is served.
    Ready,
    /// The start failed (`detail` says why); the process exits.
    Failed,
}

impl Phase {
    const ALL: [Phase; 10] = [
        Phase::Idle,
        Phase::Checking,
        Phase::WaitingForReplica,
        Phase::Reading,
        Phase::WritingSamples,
        Phase::WritingModels,
        Phase::Committing,
        Phase::LoadingModels,
        Phase::Ready,
        Phase::Failed,
    ];

    /// What the phase does, for people (`installing bundled measurements: writing samples`).
    pub fn describe(self) -> &'static str {
        match self {
            Phase::Idle => "idle",
            Phase::Checking => "checking for the bundled measurements",
            Phase::WaitingForReplica => "waiting for another replica to install the bundled measurements",
            Phase::Reading => "reading the bundled models",
            Phase::WritingSamples => "writing the bundled samples",
            Phase::WritingModels => "writing the bundled models",
            Phase::Committing => "committing the bundled models",
            Phase::LoadingModels => "loading the active models",
            Phase::Ready => "ready",
            Phase::Failed => "failed",
        }
    }
}

/// A snapshot of [`Startup`], as `/readyz` and the 503s during a start show it (the `startup` member of their
/// problem).
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct StartupProgress {
    pub phase: Phase,
    /// Bundled samples written so far (of `samples_total`); both 0 when the database has the bundle already.
    pub samples_done: u64,
    pub samples_total: u64,
    /// Bundled model versions written so far (of `models_total`).
    pub models_done: u64,
    pub models_total: u64,
    /// Seconds since the start began.
    pub elapsed_s: f64,
    /// Why the start failed (phase `failed`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

impl StartupProgress {
    /// Whole seconds a client should wait before retrying (`Retry-After`): the time left at the rate so far
    /// (samples and models weighed by what they take), at least 1 and at most 30.
    pub fn retry_after_s(&self) -> u64 {
        let total = (self.samples_total + 1000 * self.models_total) as f64;
        let done = (self.samples_done + 1000 * self.models_done) as f64;
        let left = if done > 0.0 && total > done { self.elapsed_s * (total - done) / done } else { 2.0 };
        left.ceil().clamp(1.0, 30.0) as u64
    }

    /// One line for people: `writing the bundled samples: 120,000 of 231,468 samples, 0 of 94 models (3.1 s)`.
    pub fn summary(&self) -> String {
        let mut s = match self.phase {
            // The samples install after the start is ready: the only progress shown then.
            Phase::Ready if self.samples_done < self.samples_total => "ready; writing the bundled samples".to_string(),
            phase => phase.describe().to_string(),
        };
        if self.samples_total > 0 || self.models_total > 0 {
            s.push_str(&format!(
                ": {} of {} samples, {} of {} models",
                thousands(self.samples_done),
                thousands(self.samples_total),
                self.models_done,
                self.models_total
            ));
        }
        s.push_str(&format!(" ({:.1} s)", self.elapsed_s));
        if let Some(d) = &self.detail {
            s.push_str(&format!(": {d}"));
        }
        s
    }
}

/// `231468` → `231,468`.
pub fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// The progress of a start (lock-free counters; cheap to read from every request).
#[derive(Debug)]
pub struct Startup {
    phase: AtomicU8,
    samples_done: AtomicU64,
    samples_total: AtomicU64,
    models_done: AtomicU64,
    models_total: AtomicU64,
    samples_after_ready: AtomicBool,
    began: Mutex<Instant>,
    failure: Mutex<Option<String>>,
}

impl Default for Startup {
    fn default() -> Self {
        Startup {
            phase: AtomicU8::new(Phase::Idle as u8),
            samples_done: AtomicU64::new(0),
            samples_total: AtomicU64::new(0),
            models_done: AtomicU64::new(0),
            models_total: AtomicU64::new(0),
            samples_after_ready: AtomicBool::new(false),
            began: Mutex::new(Instant::now()),
            failure: Mutex::new(None),
        }
    }
}

impl Startup {
    /// Begins a start: phase [`Phase::Checking`], counters zero, the clock from now.
    pub fn begin(&self) {
        *self.began.lock().unwrap_or_else(|e| e.into_inner()) = Instant::now();
        for c in [&self.samples_done, &self.samples_total, &self.models_done, &self.models_total] {
            c.store(0, Ordering::SeqCst);
        }
        self.set_phase(Phase::Checking);
    }

    /// The current phase.
    pub fn phase(&self) -> Phase {
        let p = self.phase.load(Ordering::SeqCst) as usize;
        Phase::ALL.get(p).copied().unwrap_or(Phase::Idle)
    }

    /// Moves to `phase` (logged with the seconds since the start began, so that a slow start shows where its time
    /// went).
    pub fn set_phase(&self, phase: Phase) {
        let before = self.phase.swap(phase as u8, Ordering::SeqCst);
        if before != phase as u8 {
            let elapsed = self.began.lock().unwrap_or_else(|e| e.into_inner()).elapsed().as_secs_f64();
            tracing::info!(phase = phase.describe(), elapsed_s = format!("{elapsed:.2}"), "start");
        }
    }

    /// True while a start is in flight (requests that need the bundle or the models are answered 503).
    pub fn in_progress(&self) -> bool {
        !matches!(self.phase(), Phase::Idle | Phase::Ready)
    }

    /// The sizes of the install: `samples` samples and `models` model versions to write.
    pub fn set_totals(&self, samples: u64, models: u64) {
        self.samples_total.store(samples, Ordering::SeqCst);
        self.models_total.store(models, Ordering::SeqCst);
    }

    /// `n` more samples written.
    pub fn add_samples(&self, n: u64) {
        self.samples_done.fetch_add(n, Ordering::SeqCst);
    }

    /// `n` more model versions written.
    pub fn add_models(&self, n: u64) {
        self.models_done.fetch_add(n, Ordering::SeqCst);
    }

    /// The install's rows were rolled back (another replica committed the bundle first): counters back to zero.
    pub fn reset_counts(&self) {
        self.samples_done.store(0, Ordering::SeqCst);
        self.models_done.store(0, Ordering::SeqCst);
    }

    /// The bundled samples install after the start is ready (`perfcast serve`: the models are in and served, the
    /// samples follow; `/readyz` shows how far): set when that begins, cleared when it ends.
    pub fn set_samples_after_ready(&self, on: bool) {
        self.samples_after_ready.store(on, Ordering::SeqCst);
    }

    /// Whether the bundled samples are installing after the start was marked ready.
    pub fn samples_after_ready(&self) -> bool {
        self.samples_after_ready.load(Ordering::SeqCst)
    }

    /// The start failed with `detail`.
    pub fn fail(&self, detail: String) {
        *self.failure.lock().unwrap_or_else(|e| e.into_inner()) = Some(detail);
        self.set_phase(Phase::Failed);
    }

    /// The progress now.
    pub fn snapshot(&self) -> StartupProgress {
        StartupProgress {
            phase: self.phase(),
            samples_done: self.samples_done.load(Ordering::SeqCst),
            samples_total: self.samples_total.load(Ordering::SeqCst),
            models_done: self.models_done.load(Ordering::SeqCst),
            models_total: self.models_total.load(Ordering::SeqCst),
            elapsed_s: self.began.lock().unwrap_or_else(|e| e.into_inner()).elapsed().as_secs_f64(),
            detail: self.failure.lock().unwrap_or_else(|e| e.into_inner()).clone(),
        }
    }
}

/// The store's install reports move the start along.
impl crate::store::bundles::InstallObserver for Startup {
    fn waiting_for_replica(&self) {
        self.set_phase(Phase::WaitingForReplica);
    }
    fn samples_written(&self, n: u64) {
        self.add_samples(n);
    }
    fn models_written(&self, n: u64) {
        self.add_models(n);
    }
    fn committing(&self) {
        self.set_phase(Phase::Committing);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thousands_groups_digits_by_three() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1000), "1,000");
        assert_eq!(thousands(231_468), "231,468");
        assert_eq!(thousands(1_234_567), "1,234,567");
    }

    #[test]
    fn a_start_moves_through_its_phases_and_counts() {
        let s = Startup::default();
        assert_eq!(s.phase(), Phase::Idle);
        assert!(!s.in_progress(), "a service nobody started holds nothing back");
        s.begin();
        assert!(s.in_progress());
        s.set_totals(1000, 10);
        s.set_phase(Phase::WritingSamples);
        s.add_samples(400);
        s.add_samples(100);
        let p = s.snapshot();
        assert_eq!(
            (p.phase, p.samples_done, p.samples_total, p.models_done, p.models_total),
            (Phase::WritingSamples, 500, 1000, 0, 10)
        );
        assert!(p.summary().starts_with("writing the bundled samples: 500 of 1,000 samples, 0 of 10 models ("));
        s.set_phase(Phase::Ready);
        assert!(!s.in_progress());
        s.fail("disk full".into());
        assert_eq!(s.snapshot().detail.as_deref(), Some("disk full"));
        assert!(s.in_progress(), "a failed start serves nothing that needs it");
    }

    #[test]
    fn retry_after_extrapolates_the_rate_so_far_within_bounds() {
        let p = |done: u64, total: u64, elapsed_s: f64| StartupProgress {
            phase: Phase::WritingSamples,
            samples_done: done,
            samples_total: total,
            models_done: 0,
            models_total: 0,
            elapsed_s,
            detail: None,
        };
        // A quarter done in 2 s: three quarters left at the same rate = 6 s.
        assert_eq!(p(250, 1000, 2.0).retry_after_s(), 6);
        // Nothing done yet: 2 s; almost done: at least 1 s; very slow: at most 30 s.
        assert_eq!(p(0, 1000, 5.0).retry_after_s(), 2);
        assert_eq!(p(999, 1000, 1.0).retry_after_s(), 1);
        assert_eq!(p(1, 1000, 60.0).retry_after_s(), 30);
    }
}
