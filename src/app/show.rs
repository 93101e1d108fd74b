//! Telling on stderr what a start does while it installs the bundled measurements (`perfcast serve` and the CLI
//! commands that install them first): an indicatif bar when stderr is a terminal, a line every few seconds
//! otherwise (logs, CI, containers), nothing when quiet.

use std::io::IsTerminal;
use std::sync::Arc;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};

use crate::service::startup::{Phase, Startup};

/// How often a line is printed in [`Show::Lines`] while the install runs.
const LINE_EVERY: Duration = Duration::from_secs(5);
/// How much one model version weighs against one sample in the bar (a model's text is ~400 KB, a sample's row
/// ~100 B, and writing dominates both).
const MODEL_WEIGHT: u64 = 1000;

/// How progress is shown on stderr.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Show {
    /// Nothing (tests, `--quiet`).
    Quiet,
    /// A line when it begins, every 5 s while it runs, and when it ends.
    Lines,
    /// An indicatif bar, replaced by the last line when it ends.
    Bar,
}

impl Show {
    /// `Quiet` when asked, `Bar` when stderr is a terminal, else `Lines`.
    pub fn detect(quiet: bool) -> Show {
        if quiet {
            Show::Quiet
        } else if std::io::stderr().is_terminal() {
            Show::Bar
        } else {
            Show::Lines
        }
    }

    /// Starts showing `what` (`installing bundled measurements: 531,891 samples, 193 models`) and `progress` until
    /// [`Reporter::finish`]; the bar counts the models written (`models`) or the samples.
    pub(super) fn report(self, what: &str, progress: &Arc<Startup>, models: bool) -> Reporter {
        let (bar, ticker) = match self {
            Show::Quiet => (None, None),
            Show::Lines => {
                eprintln!("perfcast: {what} …");
                let progress = progress.clone();
                let ticker = tokio::spawn(async move {
                    loop {
                        tokio::time::sleep(LINE_EVERY).await;
                        eprintln!("perfcast:   {}", progress.snapshot().summary());
                    }
                });
                (None, Some(ticker))
            }
            Show::Bar => {
                let style = ProgressStyle::with_template("{spinner} {prefix} [{elapsed}] {wide_bar} {msg}")
                    .unwrap_or_else(|_| ProgressStyle::default_bar());
                let bar = ProgressBar::new(1).with_style(style).with_prefix(what.to_string());
                bar.enable_steady_tick(Duration::from_millis(120));
                let (b, progress) = (bar.clone(), progress.clone());
                let ticker = tokio::spawn(async move {
                    loop {
                        let p = progress.snapshot();
                        let (done, total) = if models {
                            (MODEL_WEIGHT * p.models_done, MODEL_WEIGHT * p.models_total)
                        } else {
                            (p.samples_done, p.samples_total)
                        };
                        b.set_length(total.max(1));
                        b.set_position(done);
                        b.set_message(match p.phase {
                            Phase::WritingSamples | Phase::WritingModels => format!(
                                "{} of {} samples, {} of {} models",
                                crate::service::startup::thousands(p.samples_done),
                                crate::service::startup::thousands(p.samples_total),
                                p.models_done,
                                p.models_total
                            ),
                            other => other.describe().to_string(),
                        });
                        tokio::time::sleep(Duration::from_millis(100)).await;
                    }
                });
                (Some(bar), Some(ticker))
            }
        };
        Reporter { show: self, bar, ticker }
    }
}

/// Shows an install's progress until [`Reporter::finish`] (see [`Show::report`]).
pub(super) struct Reporter {
    show: Show,
    bar: Option<ProgressBar>,
    ticker: Option<tokio::task::JoinHandle<()>>,
}

impl Reporter {
    /// Stops showing progress and prints `line` (`… done in 2.9 s`), unless quiet.
    pub(super) fn finish(mut self, line: &str) {
        self.stop();
        if self.show != Show::Quiet {
            eprintln!("perfcast: {line}");
        }
    }

    fn stop(&mut self) {
        if let Some(t) = self.ticker.take() {
            t.abort();
        }
        if let Some(b) = self.bar.take() {
            b.finish_and_clear();
        }
    }
}

impl Drop for Reporter {
    fn drop(&mut self) {
        self.stop();
    }
}
