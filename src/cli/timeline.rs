//! `perfcast timeline FILE [--format chrome|svg] [-o OUT]`: the timeline of one training iteration, as
//! `POST /v1/predictions/training/timeline` answers it.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, ValueEnum};

use crate::config::Config;
use crate::llm::trace::TraceFormat;
use crate::llm::TrainingRequest;

/// How to render the timeline.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub(super) enum Format {
    /// Trace Event Format JSON (open it in ui.perfetto.dev or chrome://tracing).
    Chrome,
    /// An SVG Gantt chart.
    Svg,
}

#[derive(Args)]
pub(super) struct TimelineArgs {
    /// Request file (the body of POST /v1/predictions/training; `-` reads stdin).
    request: PathBuf,
    /// Output format.
    #[arg(long, value_enum, default_value = "chrome")]
    format: Format,
    /// Write to this file instead of stdout.
    #[arg(short, long, value_name = "FILE")]
    output: Option<PathBuf>,
}

/// Renders the timeline of the [`TrainingRequest`] in `args.request` to stdout or `args.output`. Exit codes as
/// [`super::run_request`]; a file that cannot be written exits 1.
pub(super) async fn run(args: &TimelineArgs, config: &Config, progress: super::progress::Mode) -> ExitCode {
    let format = match args.format {
        Format::Chrome => TraceFormat::Chrome,
        Format::Svg => TraceFormat::Svg,
    };
    let body =
        match super::answer_request(&args.request, config, progress, |service, req: TrainingRequest| async move {
            service.training_timeline(&req, format).await
        })
        .await
        {
            Ok(b) => b,
            Err(code) => return code,
        };
    let written = match &args.output {
        Some(path) => std::fs::write(path, &body).map_err(|e| format!("cannot write {}: {e}", path.display())),
        // A closed pipe (`| head`) is not an error worth reporting.
        None => {
            let _ = writeln!(std::io::stdout().lock(), "{body}");
            Ok(())
        }
    };
    match written {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
