//! Runs each `perfcast eval …` evaluation: loads the learned models it predicts with, calls the evaluation in
//! [`crate::eval`], prints its markdown report (and any block to paste into the source) to stdout and writes its
//! files under `--out`. Errors go to stderr with exit code 1.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use super::super::progress::Steps;
use super::super::stamp::paste_stamp;
use super::parse_grid;
use crate::config::Config;
use crate::eval::training::Mode;

/// `eval serving-intervals`: the serving bands' between-source shift from two evaluations' rows.
pub(super) fn serving_intervals(serving: &Path, inference: &Path, out: &Path) -> ExitCode {
    use crate::eval::serving::intervals;
    let stamp = paste_stamp();
    let report = match intervals::run(serving, inference, &stamp) {
        Ok(r) => r,
        Err(e) => return failed(e),
    };
    if let Err(e) = intervals::write(&report, out) {
        return failed(e);
    }
    println!("{}", intervals::markdown(&report));
    eprintln!("wrote {0}/serving_intervals.md, {0}/serving_intervals.json", out.display());
    ExitCode::SUCCESS
}

/// `eval serving`: the simulated benchmarks of aiconfigurator's runs with `client`.
pub(super) fn serving(
    data: &Path,
    out: &Path,
    analytic_only: bool,
    client: crate::eval::serving::Client,
    steps: &mut Steps,
) -> ExitCode {
    use crate::eval::serving as sv;
    let run = |models: EvalModels| sv::run(data, models, client, &mut |m| steps.step(m));
    if let Err(code) = run_write_print(analytic_only, run, |r| sv::write(r, out), sv::markdown) {
        return code;
    }
    eprintln!("wrote {0}/serving.md, {0}/serving.json, {0}/serving_rows.csv", out.display());
    ExitCode::SUCCESS
}

/// An evaluation's error on stderr; exit code 1.
fn failed(e: impl std::fmt::Display) -> ExitCode {
    eprintln!("error: {e}");
    ExitCode::FAILURE
}

/// `eval operators`: operator regressors retrained on the train split, scored on the test split.
pub(super) async fn operators(data: PathBuf, out: PathBuf, grid: &str, config: &Config, steps: &mut Steps) -> ExitCode {
    let Some(grid) = parse_grid(grid) else { return ExitCode::from(2) };
    let opts = crate::eval::operators::Options {
        data,
        out: out.clone(),
        grid,
        per_gpu_min_samples: config.per_gpu_min_samples,
    };
    match crate::eval::operators::run(&opts, &mut |m| steps.step(m)).await {
        Ok(report) => {
            println!("{}", crate::eval::operators::markdown(&report));
            eprintln!("wrote {0}/operators.md, {0}/operators.json, {0}/operators.svg", out.display());
            ExitCode::SUCCESS
        }
        Err(e) => failed(e),
    }
}

/// `eval comm`: collectives calibrated on the train split, scored on the held-out nccl-tests rows.
pub(super) async fn comm(data: &Path, out: &Path, grid: &str, steps: &mut Steps) -> ExitCode {
    let Some(grid) = parse_grid(grid) else { return ExitCode::from(2) };
    match crate::eval::comm::run(data, out, grid, &mut |m| steps.step(m)).await {
        Ok(report) => {
            println!("{}", crate::eval::comm::markdown(&report));
            ExitCode::SUCCESS
        }
        Err(e) => failed(e),
    }
}

/// `eval kernels`: the kernel models against the profiler fixtures' measured kernels.
pub(super) fn kernels(fixtures: &Path) -> ExitCode {
    match crate::eval::kernels::run(fixtures) {
        Ok(report) => {
            println!("{}", crate::eval::kernels::markdown(&report));
            ExitCode::SUCCESS
        }
        Err(e) => failed(e),
    }
}

/// `eval training`: the measured training runs in `mode`; prints the blocks to paste after a cross-validation.
pub(super) fn training(
    data: &Path,
    out: &Path,
    mode: &Mode,
    kernels: crate::cost::KernelChoice,
    analytic_only: bool,
    steps: &mut Steps,
) -> ExitCode {
    use crate::eval::training as tr;
    let run = |models: EvalModels| tr::run_with(data, mode, models, kernels, &mut |m| steps.step(m));
    let report = match run_write_print(analytic_only, run, |r| tr::write(r, &out.to_path_buf()), tr::markdown) {
        Ok(r) => r,
        Err(code) => return code,
    };
    if let (Mode::CrossValidate { .. } | Mode::LeaveSourceOut { .. }, Some(q)) = (mode, &report.quantiles) {
        let stamp = paste_stamp();
        if matches!(mode, Mode::LeaveSourceOut { .. }) {
            println!(
                "The spread between sources to paste into src/llm/interval.rs:\n\n```rust\n{}```",
                q.shift_block(&stamp)
            );
        } else {
            println!("Residual quantiles to paste into src/llm/interval.rs:\n\n```rust\n{}```", q.rust_block(&stamp));
        }
        let contention = matches!(
            mode,
            Mode::CrossValidate { contention: true, .. } | Mode::LeaveSourceOut { contention: true, .. }
        );
        let sources: Vec<&str> = report.rows.iter().map(|r| r.source).collect();
        let fitted_by = fitted_by(mode, kernels, analytic_only, &sources);
        let block =
            crate::eval::efficiency_fit::rust_block(&report.efficiency, &report.folds, contention, &fitted_by, &stamp);
        println!(
            "\nFitted constants to paste into `Efficiency::CALIBRATED` (src/cost/derate.rs):\n\n```rust\n{block}```"
        );
    }
    eprintln!("wrote {0}/training.md, {0}/training.json, {0}/training_rows.csv", out.display());
    ExitCode::SUCCESS
}

/// What fitted the constants a cross-validation or leave-source-out run prints to paste: the command as typed
/// (`mode`'s flags; `--fit-sources` only when not the default [`crate::eval::efficiency_fit::FIT_SOURCES`],
/// `--kernels neutral` and `--analytic-only` when given) and the rows of the all-rows fit — the evaluated rows (their
/// sources, `row_sources`) of the fitted sources, e.g. ``"`perfcast eval training --leave-source-out --iterations 60` on the 1,793 rows of
/// vtrain, nemo, dgxc, llmfoundry"``. Empty for [`Mode::Fixed`] (nothing is fitted).
pub(super) fn fitted_by(
    mode: &Mode,
    kernels: crate::cost::KernelChoice,
    analytic_only: bool,
    row_sources: &[&str],
) -> String {
    let (flags, fit_sources, contention) = match mode {
        Mode::Fixed(_) => return String::new(),
        Mode::CrossValidate { folds, iterations, fit_sources, contention } => {
            (format!("--cross-validate --folds {folds} --iterations {iterations}"), fit_sources, *contention)
        }
        Mode::LeaveSourceOut { iterations, fit_sources, contention } => {
            (format!("--leave-source-out --iterations {iterations}"), fit_sources, *contention)
        }
    };
    let mut command = format!("perfcast eval training {flags}");
    if *fit_sources != crate::eval::efficiency_fit::FIT_SOURCES {
        command.push_str(&format!(" --fit-sources {}", fit_sources.join(",")));
    }
    if contention {
        command.push_str(" --fit-contention");
    }
    if kernels == crate::cost::KernelChoice::Neutral {
        command.push_str(" --kernels neutral");
    }
    if analytic_only {
        command.push_str(" --analytic-only");
    }
    let fitted = row_sources.iter().filter(|r| fit_sources.iter().any(|s| s == *r)).count();
    let rows = crate::service::startup::thousands(fitted as u64);
    format!("`{command}` on the {rows} rows of {}", fit_sources.join(", "))
}

/// The learned models an evaluation predicts with, and their label.
type EvalModels<'a> = (&'a std::sync::Arc<crate::learn::Registry>, &'a str);

/// The steps every model-predicting evaluation shares: loads its models ([`eval_models`]), runs it, writes its
/// files and prints its markdown report. The report, or the exit code of the first failure (its error on stderr).
fn run_write_print<R, E: std::fmt::Display, W: std::fmt::Display>(
    analytic_only: bool,
    run: impl FnOnce(EvalModels) -> Result<R, E>,
    write: impl FnOnce(&R) -> Result<(), W>,
    markdown: impl FnOnce(&R) -> String,
) -> Result<R, ExitCode> {
    let (models, label) = eval_models(analytic_only).map_err(failed)?;
    let models = std::sync::Arc::new(models);
    let report = run((&models, &label)).map_err(failed)?;
    write(&report).map_err(failed)?;
    println!("{}", markdown(&report));
    Ok(report)
}

/// The learned models a fresh install serves (the bundle in the binary) and their label, or an empty registry.
fn eval_models(analytic_only: bool) -> Result<(crate::learn::Registry, String), String> {
    if analytic_only {
        return Ok((crate::learn::Registry::default(), "none (analytic operators and collectives)".to_string()));
    }
    let b = crate::bundle::Bundle::embedded().map_err(|e| e.to_string())?;
    let r = crate::bundle::registry(&b).map_err(|e| e.to_string())?;
    let label =
        format!("the bundled models (bundle {}, {} models; what a fresh install serves)", b.manifest.version, r.len());
    Ok((r, label))
}

/// `eval inference`: LLM-Inference-Bench's static batches in `mode`.
pub(super) fn inference(
    data: &Path,
    out: &Path,
    mode: &crate::eval::inference::Mode,
    analytic_only: bool,
    steps: &mut Steps,
) -> ExitCode {
    use crate::eval::inference as inf;
    let run = |models: EvalModels| inf::run(data, mode, models, &mut |m| steps.step(m));
    let report = match run_write_print(analytic_only, run, |r| inf::write(r, out), inf::markdown) {
        Ok(r) => r,
        Err(code) => return code,
    };
    if let crate::eval::inference::Mode::CrossValidate { .. } = mode {
        let stamp = paste_stamp();
        println!(
            "Residual quantiles to paste into src/llm/serving/interval.rs:\n\n```rust\n{}```",
            crate::eval::inference::rust_block(&report.quantiles, &stamp)
        );
    }
    eprintln!("wrote {0}/inference.md, {0}/inference.json, {0}/inference_rows.csv", out.display());
    ExitCode::SUCCESS
}

/// `eval cross-gpu`: leave-one-GPU-out on the train split.
pub(super) fn cross_gpu(opts: &crate::eval::logo::Options, out: &Path, steps: &mut Steps) -> ExitCode {
    let report = match crate::eval::logo::run(opts, &mut |m| steps.step(m)) {
        Ok(r) => r,
        Err(e) => return failed(e),
    };
    match crate::eval::logo::write(&report, out) {
        Ok((md, json)) => {
            println!("{}", crate::eval::logo::markdown(&report));
            eprintln!("wrote {}, {}", md.display(), json.display());
            ExitCode::SUCCESS
        }
        Err(e) => failed(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cost::KernelChoice;

    #[test]
    fn the_paste_header_names_the_command_and_the_rows_it_fitted() {
        let defaults: Vec<String> = ["vtrain", "nemo", "dgxc", "llmfoundry"].map(String::from).to_vec();
        // 3 vtrain + 1 nemo rows are fitted, the neusight row only predicted: 4 rows.
        let rows = ["vtrain", "vtrain", "neusight", "nemo", "vtrain"];
        let lso = Mode::LeaveSourceOut { iterations: 60, fit_sources: defaults.clone(), contention: false };
        assert_eq!(
            fitted_by(&lso, KernelChoice::Training, false, &rows),
            "`perfcast eval training --leave-source-out --iterations 60` on the 4 rows of vtrain, nemo, dgxc, llmfoundry"
        );
        // Cross-validation with its own sources (only vtrain's 3 rows), κ fitted, neutral kernels, analytic only.
        let cv =
            Mode::CrossValidate { folds: 5, iterations: 300, fit_sources: vec!["vtrain".into()], contention: true };
        assert_eq!(
            fitted_by(&cv, KernelChoice::Neutral, true, &rows),
            "`perfcast eval training --cross-validate --folds 5 --iterations 300 --fit-sources vtrain --fit-contention \
             --kernels neutral --analytic-only` on the 3 rows of vtrain"
        );
        // 1,793 rows print with the thousands separator; fixed constants are not fitted.
        let many = vec!["nemo"; 1793];
        assert!(fitted_by(&lso, KernelChoice::Training, false, &many)
            .ends_with("on the 1,793 rows of vtrain, nemo, dgxc, llmfoundry"));
        assert_eq!(
            fitted_by(&Mode::Fixed(crate::cost::Efficiency::CALIBRATED), KernelChoice::Training, false, &rows),
            ""
        );
    }
}
