//! `perfcast eval …`: accuracy on the held-out rows of the shared datasets. Reports go to stdout (markdown),
//! progress to stderr, files under `--out`.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Subcommand;

use crate::config::Config;
use crate::cost::Efficiency;
use crate::eval::logo::{MoeRouting, Source};
use crate::eval::training::Mode;
use crate::learn::Grid;

mod runs;

use runs::{comm, cross_gpu, inference, kernels, operators, serving, serving_intervals, training};

/// Which accuracy `perfcast eval` reports.
#[derive(Subcommand)]
pub(super) enum EvalWhat {
    /// Operator regressors: upload the train split, retrain, report MAPE on the test split per (operator, GPU).
    Operators {
        /// The shared datasets directory.
        #[arg(long, default_value = "../shared/data")]
        data: PathBuf,
        /// Output directory for operators.md, operators.json and operators.svg.
        #[arg(long, default_value = "out/eval")]
        out: PathBuf,
        /// Hyper-parameter grid: full, fast or minimal.
        #[arg(long, default_value = "full")]
        grid: String,
    },
    /// Collectives: calibrate on the train split, report on the 10-node H100 nccl-tests rows.
    Comm {
        /// The shared datasets directory.
        #[arg(long, default_value = "../shared/data")]
        data: PathBuf,
        /// Output directory for comm.md and comm.json.
        #[arg(long, default_value = "out/eval")]
        out: PathBuf,
        /// Hyper-parameter grid: full, fast or minimal.
        #[arg(long, default_value = "full")]
        grid: String,
    },
    /// Kernel models against the measured kernels of the profiler fixtures.
    Kernels {
        /// The shared fixtures directory.
        #[arg(long, default_value = "../shared/fixtures")]
        fixtures: PathBuf,
    },
    /// End-to-end accuracy: the measured training runs of vTrain, NeuSight (4-GPU and single-GPU), NeMo, DGX
    /// Cloud and llm-foundry through the training predictor; MAPE and signed error per source.
    Training {
        /// The shared datasets directory.
        #[arg(long, default_value = "../shared/data")]
        data: PathBuf,
        /// Output directory for training.md, training.json and training_rows.csv.
        #[arg(long, default_value = "out/eval")]
        out: PathBuf,
        /// Cross-validate: fit the efficiencies on all but one fold of (source, model) groups, predict that
        /// fold, for every fold; then fit on every row. Without it, the shipped efficiencies predict every row.
        #[arg(long, conflicts_with = "leave_source_out")]
        cross_validate: bool,
        /// Leave whole sources out: predict each fitted source with constants fitted on the other sources only
        /// (the sources never fitted, with constants fitted on all of them); intervals from the other sources'
        /// held-out residuals; then fit on every row. The figure a user with another cluster or framework meets.
        #[arg(long)]
        leave_source_out: bool,
        /// Folds of the cross-validation.
        #[arg(long, default_value_t = 5)]
        folds: usize,
        /// Nelder–Mead iterations per fit.
        #[arg(long, default_value_t = 300)]
        iterations: usize,
        /// Sources the cross-validation fits on (the others are only predicted): vtrain, neusight (4-GPU),
        /// neusight-1gpu, nemo, dgxc, llmfoundry. NeuSight is left out by default: its runs are FP32 without
        /// tensor cores, so they test the fitted constants on a precision the fit never saw.
        #[arg(long, value_delimiter = ',', default_value = "vtrain,nemo,dgxc,llmfoundry")]
        fit_sources: Vec<String>,
        /// Predict with the bare roofline (every efficiency 1) instead of the shipped efficiencies.
        #[arg(long)]
        roofline: bool,
        /// Whose measured kernels the learned models answer with: `training` (the service's: per-tensor fp8 GEMMs
        /// from TensorRT-LLM's cuBLASLt measurements, as Transformer Engine runs them, less the analytic cast, where
        /// bundled; every other operator from the engine-neutral and vLLM models) or `neutral` (vLLM's CUTLASS fp8
        /// GEMMs too, the choice before 2026-11-28).
        #[arg(long, default_value = "training")]
        kernels: String,
        /// With --cross-validate: also fit the contention κ of overlapped communication (to see whether the rows
        /// identify it; the shipped value is cited, not fitted).
        #[arg(long)]
        fit_contention: bool,
        /// Time every operator and collective analytically (derated), without the bundled learned models a fresh
        /// install serves.
        #[arg(long)]
        analytic_only: bool,
    },
    /// Serving: LLM-Inference-Bench's static batches (vLLM, TensorRT-LLM on A100/H100/GH200) through the serving
    /// predictor; MAPE and signed error per framework, GPU, batch, length and model.
    Inference {
        /// The shared datasets directory.
        #[arg(long, default_value = "../shared/data")]
        data: PathBuf,
        /// Output directory for inference.md, inference.json and inference_rows.csv.
        #[arg(long, default_value = "out/eval")]
        out: PathBuf,
        /// Cross-validate: fit the serving constants on all but one fold of (framework, model) groups, predict
        /// that fold, for every fold; then fit on every row. Without it, the shipped constants predict every row.
        #[arg(long)]
        cross_validate: bool,
        /// Folds of the cross-validation.
        #[arg(long, default_value_t = 5)]
        folds: usize,
        /// Nelder–Mead iterations per fit.
        #[arg(long, default_value_t = 200)]
        iterations: usize,
        /// Predict with the bare roofline (every fraction 1, no host cost) instead of the shipped constants.
        #[arg(long)]
        roofline: bool,
        /// Time every operator and collective analytically (derated), without the bundled learned models a fresh
        /// install serves.
        #[arg(long)]
        analytic_only: bool,
    },
    /// Serving benchmarks: aiconfigurator's measured runs on B200, B300, GB200 and GB300 (vLLM, SGLang, TensorRT-LLM;
    /// aggregated and disaggregated) through the simulated benchmark; TTFT and TPOT MAPE and signed error per
    /// engine, mode and GPU with whole models and whole GPUs left out of the host-constant fit.
    Serving {
        /// The shared datasets directory.
        #[arg(long, default_value = "../shared/data")]
        data: PathBuf,
        /// Output directory for serving.md, serving.json and serving_rows.csv.
        #[arg(long, default_value = "out/eval")]
        out: PathBuf,
        /// Time every operator and collective analytically (derated), without the bundled learned models.
        #[arg(long)]
        analytic_only: bool,
        /// The benchmark client the runs are predicted with: `fixed` (every run's fixed lengths, the clients in
        /// step; what the shipped interval bands were fitted on) or `inferencex` (the runs in InferenceX's
        /// 1k/1k, 1k/8k and 8k/1k shapes with its client's lengths, uniform in [0.8·L, L]).
        #[arg(long, default_value = "fixed", value_parser = ["fixed", "inferencex"])]
        client: String,
    },
    /// Serving intervals: the between-source shift of the TTFT and TPOT bands from the rows of `eval serving` and
    /// `eval inference --cross-validate`, its leave-source-out coverage, and the block to paste into
    /// src/llm/serving/interval.rs.
    ServingIntervals {
        /// The directory holding `perfcast eval serving`'s serving_rows.csv.
        #[arg(long, default_value = "out/eval")]
        serving: PathBuf,
        /// The directory holding `perfcast eval inference --cross-validate`'s inference_rows.csv and inference.json.
        #[arg(long, default_value = "out/eval")]
        inference: PathBuf,
        /// Output directory for serving_intervals.md and serving_intervals.json.
        #[arg(long, default_value = "out/eval")]
        out: PathBuf,
    },
    /// Leave-one-GPU-out cross-validation on the train split only (how well models carry to unseen GPUs): per
    /// regressor key, fit on all GPUs but one, report on the one left out.
    CrossGpu {
        /// The shared datasets directory.
        #[arg(long, default_value = "../shared/data")]
        data: PathBuf,
        /// Which measurements: neusight (NeuSight, DeepBench and XLA's operator train split) or aiconfigurator
        /// (tensor-core GEMMs, prefill/decode attention and MoE on six GPUs).
        #[arg(long, default_value = "neusight", value_parser = ["neusight", "aiconfigurator"])]
        source: String,
        /// Output directory for cross_gpu_<source>.md and cross_gpu_<source>.json.
        #[arg(long, default_value = "out/eval")]
        out: PathBuf,
        /// Hyper-parameter grid: full, fast or minimal.
        #[arg(long, default_value = "fast")]
        grid: String,
        /// Features to hide from the models (comma-separated names), to compare feature sets.
        #[arg(long, value_delimiter = ',')]
        mask: Vec<String>,
        /// Most training rows per fit, shared equally by the training GPUs (each GPU thinned evenly); 0 = all.
        /// Default: all for neusight, 24000 for aiconfigurator.
        #[arg(long)]
        max_rows: Option<usize>,
        /// aiconfigurator MoE rows: one routing distribution (balanced, power_law_1.01, power_law_1.2), `all`
        /// (each its own key) or `mixed` (one key, as a retrain sees them).
        #[arg(long, default_value = "balanced")]
        moe_distribution: String,
        /// Only keys starting with one of these (comma-separated, e.g. `linear.fwd.bf16,attention_decode`).
        #[arg(long, value_delimiter = ',')]
        keys: Vec<String>,
        /// Only these GPUs take part, held out or training (comma-separated catalog names or aliases).
        #[arg(long, value_delimiter = ',')]
        gpus: Vec<String>,
        /// Also write every held-out row's prediction to this CSV file (for diagnosis).
        #[arg(long)]
        rows_csv: Option<PathBuf>,
        /// aiconfigurator: whose tables (comma-separated: vllm, sglang, trtllm); each engine's keys carry it.
        #[arg(long, value_delimiter = ',', default_value = "vllm")]
        engines: Vec<String>,
        /// aiconfigurator: also time every SGLang and TensorRT-LLM key's held-out rows with vLLM's model of the same
        /// operator, fitted without and with the held-out GPU (what those engines' requests were timed by before).
        #[arg(long)]
        fallback: bool,
    },
}

/// Runs one evaluation, its steps reported as `progress` says (a spinner on a terminal, lines otherwise). Exit
/// codes: 2 for a bad `--grid`; 1 when the evaluation fails.
pub(super) async fn run(what: EvalWhat, config: &Config, progress: super::progress::Mode) -> ExitCode {
    let steps = &mut progress.steps();
    match what {
        EvalWhat::Operators { data, out, grid } => operators(data, out, &grid, config, steps).await,
        EvalWhat::Comm { data, out, grid } => comm(&data, &out, &grid, steps).await,
        EvalWhat::Kernels { fixtures } => kernels(&fixtures),
        EvalWhat::Training {
            data,
            out,
            cross_validate,
            leave_source_out,
            folds,
            iterations,
            fit_sources,
            roofline,
            kernels,
            fit_contention,
            analytic_only,
        } => {
            let kernels = match kernels.as_str() {
                "training" => crate::cost::KernelChoice::Training,
                "neutral" => crate::cost::KernelChoice::Neutral,
                other => {
                    eprintln!("--kernels must be training or neutral, got {other:?}");
                    return ExitCode::from(2);
                }
            };
            let mode = if leave_source_out {
                Mode::LeaveSourceOut { iterations, fit_sources, contention: fit_contention }
            } else if cross_validate {
                Mode::CrossValidate { folds, iterations, fit_sources, contention: fit_contention }
            } else if roofline {
                Mode::Fixed(Efficiency::ROOFLINE)
            } else {
                Mode::Fixed(Efficiency::CALIBRATED)
            };
            training(&data, &out, &mode, kernels, analytic_only, steps)
        }
        EvalWhat::CrossGpu {
            data,
            source,
            out,
            grid,
            mask,
            max_rows,
            moe_distribution,
            keys,
            gpus,
            rows_csv,
            engines,
            fallback,
        } => {
            let Some(grid) = parse_grid(&grid) else { return ExitCode::from(2) };
            let mut families = Vec::new();
            for e in &engines {
                match crate::op::KernelFamily::parse(e) {
                    Some(f) => families.push(f),
                    None => {
                        eprintln!("--engines: {e:?} is not vllm, sglang or trtllm");
                        return ExitCode::from(2);
                    }
                }
            }
            let source = if source == "aiconfigurator" { Source::Aiconfigurator } else { Source::Neusight };
            let opts = crate::eval::logo::Options {
                data,
                source,
                grid,
                masked_features: mask,
                max_rows: max_rows.unwrap_or(source.default_max_rows()),
                moe_routing: MoeRouting::parse(&moe_distribution),
                keys,
                gpus,
                rows_csv,
                engines: families,
                fallback,
            };
            cross_gpu(&opts, &out, steps)
        }
        EvalWhat::Inference { data, out, cross_validate, folds, iterations, roofline, analytic_only } => {
            let mode = if cross_validate {
                crate::eval::inference::Mode::CrossValidate { folds, iterations }
            } else if roofline {
                crate::eval::inference::Mode::Fixed(crate::llm::serving::ServingConstants::ROOFLINE)
            } else {
                crate::eval::inference::Mode::Fixed(crate::llm::serving::ServingConstants::CALIBRATED)
            };
            inference(&data, &out, &mode, analytic_only, steps)
        }
        EvalWhat::Serving { data, out, analytic_only, client } => {
            let client = if client == "inferencex" {
                crate::eval::serving::Client::InferenceX
            } else {
                crate::eval::serving::Client::Fixed
            };
            serving(&data, &out, analytic_only, client, steps)
        }
        EvalWhat::ServingIntervals { serving, inference, out } => serving_intervals(&serving, &inference, &out),
    }
}

/// `--grid` as a [`Grid`], or `None` after saying why not.
pub(super) fn parse_grid(grid: &str) -> Option<Grid> {
    let g = serde_json::from_value::<Grid>(serde_json::Value::String(grid.to_string())).ok();
    if g.is_none() {
        eprintln!("error: --grid must be full, fast or minimal, got {grid:?}");
    }
    g
}
