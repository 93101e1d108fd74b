//! `perfcast models bundle|show`: build the bundled training set and models from `../shared/data`, or print the
//! manifest of the bundle embedded in this binary.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Subcommand;

use super::print_json;
use super::progress::Steps;
use crate::config::Config;

/// What `perfcast models` does.
#[derive(Subcommand)]
pub(super) enum ModelsWhat {
    /// Build the bundle a fresh install serves from: the train split of the shared datasets (DATA.md) thinned
    /// evenly per regressor key, and the models the retrain job trains on exactly that set, with a manifest
    /// (`manifest.json`, `samples.tar`, `models.json.gz`). Rebuild perfcast afterwards to embed it.
    Bundle {
        /// The shared datasets directory.
        #[arg(long, default_value = "../shared/data")]
        data: PathBuf,
        /// Output directory (the committed bundle is `models/bundled`).
        #[arg(long, default_value = "models/bundled")]
        out: PathBuf,
        /// Most samples per regressor key (class, phase, dtype) and per system and collective.
        #[arg(long, default_value_t = DEFAULT_MAX_ROWS_PER_KEY)]
        max_rows_per_key: usize,
        /// Hyper-parameter grid of the retrain: full, fast or minimal.
        #[arg(long, default_value = "full")]
        grid: String,
        /// Retrain only these keys (comma-separated, exact: `comm.all_to_all,comm.all_reduce`) and ship every other
        /// key's models from the bundle embedded in this binary; refused when the samples differ from its
        /// `samples.tar` (the retrain is deterministic: a full build would train the same models for them).
        #[arg(long, value_delimiter = ',')]
        keys: Option<Vec<String>>,
    },
    /// Print the manifest of the bundle embedded in this binary (version, commit, parts, per-key models).
    Show,
}

/// The committed bundle's thinning: about 4 MiB of samples, a retrain of every key in minutes on 2 cores.
pub const DEFAULT_MAX_ROWS_PER_KEY: usize = 12_000;

/// Runs a models command. Exit codes: 2 for a bad `--grid`; 1 when the build fails.
pub(super) async fn run(what: ModelsWhat, config: &Config, progress: super::progress::Mode) -> ExitCode {
    match what {
        ModelsWhat::Bundle { data, out, max_rows_per_key, grid, keys } => {
            let Some(grid) = super::eval::parse_grid(&grid) else { return ExitCode::from(2) };
            let opts = crate::eval::bundle::Options {
                data,
                out: out.clone(),
                max_rows_per_key,
                grid,
                per_gpu_min_samples: config.per_gpu_min_samples,
                max_training_rows: config.max_training_rows,
                commit: super::stamp::git_commit(Path::new("."), "--short=12"),
                carry: match keys.is_some().then(crate::bundle::Bundle::embedded).transpose() {
                    Ok(b) => b,
                    Err(e) => {
                        eprintln!("error: {e}");
                        return ExitCode::FAILURE;
                    }
                },
                keys,
            };
            let steps: &mut Steps = &mut progress.steps();
            match crate::eval::bundle::build(&opts, &mut |m| steps.step(m)).await {
                Ok(m) => {
                    eprintln!(
                        "wrote {} (version {}, {} parts, {} models, {:.1} MiB); rebuild perfcast to embed it",
                        out.display(),
                        m.version,
                        m.parts.len(),
                        m.models.len(),
                        (m.samples_bytes + m.models_bytes) as f64 / (1u64 << 20) as f64
                    );
                    ExitCode::SUCCESS
                }
                Err(e) => {
                    eprintln!("error: {e}");
                    ExitCode::FAILURE
                }
            }
        }
        ModelsWhat::Show => match crate::bundle::Bundle::embedded() {
            Ok(b) => print_json(&b.manifest),
            Err(e) => {
                eprintln!("error: {e}");
                ExitCode::FAILURE
            }
        },
    }
}
