//! Progress of long commands (`eval`, `import`, `search`) on stderr: indicatif bars and spinners when stderr is a
//! terminal, today's plain lines otherwise (scripts and tests read them), nothing with `--quiet`.

use std::io::IsTerminal;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};

/// How a command reports its progress.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Mode {
    /// Bars and spinners (stderr is a terminal).
    Bars,
    /// One line per step, as before the bars (stderr is a file or a pipe).
    Lines,
    /// Nothing (`--quiet`).
    Quiet,
}

impl Mode {
    /// `Quiet` with `--quiet`, `Bars` when stderr is a terminal, `Lines` otherwise.
    pub(super) fn detect(quiet: bool) -> Mode {
        if quiet {
            Mode::Quiet
        } else if std::io::stderr().is_terminal() {
            Mode::Bars
        } else {
            Mode::Lines
        }
    }

    /// The same choice for a start's install of the bundled measurements (`crate::app::Show`).
    pub(super) fn show(self) -> crate::app::Show {
        match self {
            Mode::Bars => crate::app::Show::Bar,
            Mode::Lines => crate::app::Show::Lines,
            Mode::Quiet => crate::app::Show::Quiet,
        }
    }

    /// A reporter of human-readable steps (a spinner showing the current step and the time spent on it).
    pub(super) fn steps(self) -> Steps {
        let spinner = (self == Mode::Bars).then(|| spinner(""));
        Steps { mode: self, spinner }
    }

    /// A bar over `total` items (`total` may be set later), or `None` unless `Bars`.
    pub(super) fn counter(self, what: &str) -> Option<ProgressBar> {
        (self == Mode::Bars).then(|| {
            let style = ProgressStyle::with_template(
                "{msg} [{elapsed_precise}] {wide_bar} {human_pos}/{human_len} ({per_sec}, eta {eta})",
            )
            .unwrap_or_else(|_| ProgressStyle::default_bar());
            let bar = ProgressBar::new(0).with_style(style).with_message(what.to_string());
            bar.enable_steady_tick(Duration::from_millis(200));
            bar
        })
    }

    /// A bar over `total` bytes, or `None` unless `Bars`.
    pub(super) fn bytes(self, what: &str, total: u64) -> Option<ProgressBar> {
        (self == Mode::Bars).then(|| {
            let style = ProgressStyle::with_template(
                "{msg} {wide_bar} {binary_bytes}/{binary_total_bytes} ({binary_bytes_per_sec})",
            )
            .unwrap_or_else(|_| ProgressStyle::default_bar());
            ProgressBar::new(total).with_style(style).with_message(what.to_string())
        })
    }

    /// A spinner with `message` while something of unknown length runs, or `None` unless `Bars`.
    pub(super) fn spinner(self, message: &str) -> Option<ProgressBar> {
        (self == Mode::Bars).then(|| spinner(message))
    }
}

fn spinner(message: &str) -> ProgressBar {
    let style = ProgressStyle::with_template("{spinner} {msg} [{elapsed}]")
        .unwrap_or_else(|_| ProgressStyle::default_spinner());
    let s = ProgressBar::new_spinner().with_style(style).with_message(message.to_string());
    s.enable_steady_tick(Duration::from_millis(120));
    s
}

/// Reports the steps of a long command ([`Mode::steps`]).
pub(super) struct Steps {
    mode: Mode,
    spinner: Option<ProgressBar>,
}

impl Steps {
    /// Reports `message`: a line on stderr (`Lines`; above the spinner with `Bars`, which then shows it as the
    /// current step), nothing when `Quiet`.
    pub(super) fn step(&mut self, message: &str) {
        match (&self.spinner, self.mode) {
            (Some(s), _) => {
                s.println(message);
                s.set_message(message.to_string());
            }
            (None, Mode::Lines) => eprintln!("{message}"),
            (None, _) => {}
        }
    }
}

impl Drop for Steps {
    fn drop(&mut self) {
        if let Some(s) = &self.spinner {
            s.finish_and_clear();
        }
    }
}
