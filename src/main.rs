//! `perfcast` command line: `serve` the HTTP API, `predict` or `search` from a request file, print the `openapi`
//! document, `eval` accuracy.

use std::io::Read;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use tracing_subscriber::EnvFilter;

use perfcast::api::json::parse_json;
use perfcast::config::{Config, Overrides};
use perfcast::llm::search::SearchRequest;
use perfcast::llm::TrainingRequest;
use perfcast::service::Service;
use perfcast::store::Store;

#[derive(Parser)]
#[command(name = "perfcast", version, about = "Predicts how fast distributed GPU applications run")]
struct Cli {
    /// Configuration file (default: ./config.toml when it exists). Environment: PERFCAST_CONFIG.
    #[arg(long, global = true, env = "PERFCAST_CONFIG", value_name = "FILE")]
    config: Option<PathBuf>,
    /// SQLite database file (overrides `db` in the config and PERFCAST_DB).
    #[arg(long, global = true, value_name = "PATH")]
    db: Option<PathBuf>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Serve the HTTP API (creates and migrates the database when needed).
    Serve {
        /// Address to listen on (overrides `bind` in the config and PERFCAST_BIND).
        #[arg(long, value_name = "ADDR:PORT")]
        bind: Option<SocketAddr>,
    },
    /// Predict one training iteration from a request file (the body of POST /v1/predictions/training; `-` reads
    /// stdin) and print the same JSON the API returns.
    Predict {
        /// Request file.
        request: PathBuf,
    },
    /// Search for the fastest configuration that fits, from a request file (the body of
    /// POST /v1/predictions/training/search; `-` reads stdin), and print the result. Runs here however large the
    /// search is.
    Search {
        /// Request file.
        request: PathBuf,
    },
    /// Print the OpenAPI document (what /openapi.json serves).
    Openapi,
    /// Accuracy on the held-out rows of the shared datasets (train on the train split only).
    Eval {
        #[command(subcommand)]
        what: EvalWhat,
    },
}

#[derive(Subcommand)]
enum EvalWhat {
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
    /// End-to-end accuracy: the measured training runs of vTrain, NeuSight, NeMo and DGX Cloud through the
    /// training predictor; MAPE and signed error per source.
    Training {
        /// The shared datasets directory.
        #[arg(long, default_value = "../shared/data")]
        data: PathBuf,
        /// Output directory for training.md, training.json and training_rows.csv.
        #[arg(long, default_value = "out/eval")]
        out: PathBuf,
        /// Cross-validate: fit the efficiencies on all but one fold of (source, model) groups, predict that
        /// fold, for every fold; then fit on every row. Without it, the shipped efficiencies predict every row.
        #[arg(long)]
        cross_validate: bool,
        /// Folds of the cross-validation.
        #[arg(long, default_value_t = 5)]
        folds: usize,
        /// Nelder–Mead iterations per fit.
        #[arg(long, default_value_t = 300)]
        iterations: usize,
        /// Sources the cross-validation fits on (the others are only predicted). NeuSight is left out by default:
        /// its pipeline implementation is undocumented and its runs are FP32 without tensor cores.
        #[arg(long, value_delimiter = ',', default_value = "vtrain,nemo,dgxc")]
        fit_sources: Vec<String>,
        /// Predict with the bare roofline (every efficiency 1) instead of the shipped efficiencies.
        #[arg(long)]
        roofline: bool,
    },
    /// Leave-one-GPU-out cross-validation on the train split only (how well models carry to unseen GPUs).
    CrossGpu {
        /// The shared datasets directory.
        #[arg(long, default_value = "../shared/data")]
        data: PathBuf,
        /// Hyper-parameter grid: full, fast or minimal.
        #[arg(long, default_value = "fast")]
        grid: String,
        /// Features to hide from the models (comma-separated names), to compare feature sets.
        #[arg(long, value_delimiter = ',')]
        mask: Vec<String>,
    },
}

fn init_logging(config: &Config) {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(&config.log));
    tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).init();
}

fn parse_grid(grid: &str) -> Option<perfcast::learn::Grid> {
    let g = serde_json::from_value::<perfcast::learn::Grid>(serde_json::Value::String(grid.to_string())).ok();
    if g.is_none() {
        eprintln!("error: --grid must be full, fast or minimal, got {grid:?}");
    }
    g
}

fn read_request(path: &Path) -> Result<Vec<u8>, String> {
    if path == Path::new("-") {
        let mut buf = Vec::new();
        std::io::stdin().read_to_end(&mut buf).map_err(|e| format!("cannot read stdin: {e}"))?;
        Ok(buf)
    } else {
        std::fs::read(path).map_err(|e| format!("cannot read {}: {e}", path.display()))
    }
}

fn print_json<T: serde::Serialize>(value: &T) -> ExitCode {
    match serde_json::to_string_pretty(value) {
        Ok(s) => {
            println!("{s}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: cannot encode the answer: {e}");
            ExitCode::FAILURE
        }
    }
}

#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    let bind = match &cli.command {
        Command::Serve { bind } => *bind,
        _ => None,
    };
    let overrides = Overrides { bind, db: cli.db.clone() };
    let config = match Config::load(cli.config.as_deref(), &overrides) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    match cli.command {
        Command::Serve { .. } => {
            init_logging(&config);
            match perfcast::app::serve(config).await {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    tracing::error!(error = %e, "perfcast failed");
                    eprintln!("error: {e}");
                    ExitCode::FAILURE
                }
            }
        }
        Command::Predict { request } => {
            let bytes = match read_request(&request) {
                Ok(b) => b,
                Err(e) => {
                    eprintln!("error: {e}");
                    return ExitCode::from(2);
                }
            };
            let req: TrainingRequest = match parse_json(&bytes) {
                Ok(r) => r,
                Err(problem) => {
                    eprintln!("{}", serde_json::to_string_pretty(&problem.problem()).unwrap_or_default());
                    return ExitCode::from(2);
                }
            };
            let store = match Store::open(&config.db).await {
                Ok(s) => s,
                Err(e) => {
                    eprintln!("error: {e}");
                    return ExitCode::FAILURE;
                }
            };
            let service = Service::new(store.clone());
            let result = match service.load_models().await {
                Ok(_) => service.predict_training(&req).await,
                Err(e) => Err(e),
            };
            store.close().await;
            match result {
                Ok(prediction) => print_json(&prediction),
                Err(e) => {
                    let problem = perfcast::api::problem::ApiError::from(e).problem();
                    eprintln!("{}", serde_json::to_string_pretty(&problem).unwrap_or_default());
                    ExitCode::from(2)
                }
            }
        }
        Command::Search { request } => {
            let bytes = match read_request(&request) {
                Ok(b) => b,
                Err(e) => {
                    eprintln!("error: {e}");
                    return ExitCode::from(2);
                }
            };
            let req: SearchRequest = match parse_json(&bytes) {
                Ok(r) => r,
                Err(problem) => {
                    eprintln!("{}", serde_json::to_string_pretty(&problem.problem()).unwrap_or_default());
                    return ExitCode::from(2);
                }
            };
            let store = match Store::open(&config.db).await {
                Ok(s) => s,
                Err(e) => {
                    eprintln!("error: {e}");
                    return ExitCode::FAILURE;
                }
            };
            let service = Service::new(store.clone());
            let result = match service.load_models().await {
                Ok(_) => service.run_search(&req, None).await,
                Err(e) => Err(e),
            };
            store.close().await;
            match result {
                Ok(r) => print_json(&r),
                Err(e) => {
                    let problem = perfcast::api::problem::ApiError::from(e).problem();
                    eprintln!("{}", serde_json::to_string_pretty(&problem).unwrap_or_default());
                    ExitCode::from(2)
                }
            }
        }
        Command::Openapi => print_json(&perfcast::api::openapi()),
        Command::Eval {
            what: EvalWhat::Training { data, out, cross_validate, folds, iterations, fit_sources, roofline },
        } => {
            use perfcast::backend::Efficiency;
            use perfcast::eval::training::Mode;
            let mode = if cross_validate {
                Mode::CrossValidate { folds, iterations, fit_sources }
            } else if roofline {
                Mode::Fixed(Efficiency::ROOFLINE)
            } else {
                Mode::Fixed(Efficiency::CALIBRATED)
            };
            match perfcast::eval::training::run(&data, &mode, &mut |m| eprintln!("{m}")) {
                Ok(report) => {
                    if let Err(e) = perfcast::eval::training::write(&report, &out) {
                        eprintln!("error: {e}");
                        return ExitCode::FAILURE;
                    }
                    println!("{}", perfcast::eval::training::markdown(&report));
                    eprintln!("wrote {0}/training.md, {0}/training.json, {0}/training_rows.csv", out.display());
                    ExitCode::SUCCESS
                }
                Err(e) => {
                    eprintln!("error: {e}");
                    ExitCode::FAILURE
                }
            }
        }
        Command::Eval { what: EvalWhat::CrossGpu { data, grid, mask } } => {
            let Some(grid) = parse_grid(&grid) else { return ExitCode::from(2) };
            match perfcast::eval::logo::run(&data, grid, &mask, &mut |m| eprintln!("{m}")) {
                Ok(rows) => print_json(&rows),
                Err(e) => {
                    eprintln!("error: {e}");
                    ExitCode::FAILURE
                }
            }
        }
        Command::Eval { what: EvalWhat::Operators { data, out, grid } } => {
            let Some(grid) = parse_grid(&grid) else { return ExitCode::from(2) };
            let opts = perfcast::eval::operators::Options {
                data,
                out: out.clone(),
                grid,
                per_gpu_min_samples: config.per_gpu_min_samples,
            };
            match perfcast::eval::operators::run(&opts, &mut |m| eprintln!("{m}")).await {
                Ok(report) => {
                    println!("{}", perfcast::eval::operators::markdown(&report));
                    eprintln!("wrote {0}/operators.md, {0}/operators.json, {0}/operators.svg", out.display());
                    ExitCode::SUCCESS
                }
                Err(e) => {
                    eprintln!("error: {e}");
                    ExitCode::FAILURE
                }
            }
        }
    }
}
