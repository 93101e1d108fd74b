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
    /// Manage API keys (only their hashes are stored).
    Keys {
        #[command(subcommand)]
        what: KeysWhat,
    },
    /// Import profiler or benchmark outputs, as `POST /v1/profiles` does (several files of one run: TAU profiles,
    /// rocprof outputs), or an MT4G GPU report, as `POST /v1/gpus/import` does. Prints the same JSON.
    Import {
        /// Files to import (`.gz` files are decompressed unless the format reads gzip itself).
        #[arg(required = true)]
        files: Vec<PathBuf>,
        /// Format (`perfcast_jsonl`, `neusight_csv`, `ncu_csv`, `rocprof_csv`, `torch_trace`, `tau`, `osu`,
        /// `nccl_tests`, `nccl_tests_json`, `mt4g`); detected when absent.
        #[arg(long)]
        format: Option<String>,
        /// System the files were measured on.
        #[arg(long)]
        system: Option<String>,
        /// GPU the files were measured on, when they do not say.
        #[arg(long)]
        gpu: Option<String>,
        /// Precision, when the format does not record it.
        #[arg(long)]
        dtype: Option<String>,
        /// Ranks of the measured collectives, when the files do not say.
        #[arg(long)]
        ranks: Option<String>,
        /// Collective of an old nccl-tests log that does not name it.
        #[arg(long)]
        collective: Option<String>,
        /// Catalog GPU whose peaks a new MT4G device takes.
        #[arg(long)]
        base: Option<String>,
        /// Free labels, `key=value` (repeatable).
        #[arg(long = "label", value_name = "KEY=VALUE")]
        labels: Vec<String>,
    },
    /// Accuracy on the held-out rows of the shared datasets (train on the train split only).
    Eval {
        #[command(subcommand)]
        what: EvalWhat,
    },
}

#[derive(Subcommand)]
enum KeysWhat {
    /// Create a key and print it once.
    Create {
        /// A name to recognize it by (e.g. ci).
        #[arg(long)]
        name: String,
        /// `write` (uploads, systems, retrains, …; includes read) or `read`.
        #[arg(long, default_value = "write")]
        scope: String,
    },
    /// List keys (id, name, scope, created, revoked, last used).
    List,
    /// Revoke keys by id or name.
    Revoke {
        /// Key id or name.
        which: String,
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

/// A problem on stderr, exit code 2 for the client's errors and 1 for ours.
fn print_problem(e: perfcast::service::ServiceError) -> ExitCode {
    let problem = perfcast::api::problem::ApiError::from(e).problem();
    eprintln!("{}", serde_json::to_string_pretty(&problem).unwrap_or_default());
    if problem.status >= 500 {
        ExitCode::FAILURE
    } else {
        ExitCode::from(2)
    }
}

/// Reads a file to import, decompressing `.gz` unless its content is a format read inside gzip (traces, tars).
fn read_import_file(path: &Path) -> Result<Vec<u8>, String> {
    let bytes = std::fs::read(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let gz = bytes.starts_with(&[0x1f, 0x8b]);
    if gz && perfcast::ingest::detect(&bytes).is_none() {
        let mut out = Vec::new();
        flate2::read::GzDecoder::new(&bytes[..])
            .read_to_end(&mut out)
            .map_err(|e| format!("cannot decompress {}: {e}", path.display()))?;
        Ok(out)
    } else {
        Ok(bytes)
    }
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

/// Reads a JSON request (`-` = stdin) as `T`, runs `run` on a service over the configured database with its
/// imported GPUs and active models loaded, and prints the answer as JSON. A request that does not parse or is
/// refused prints its RFC 9457 problem on stderr (exit 2); a database that cannot be opened exits 1.
async fn run_request<T, R, F, Fut>(request: &Path, config: &Config, run: F) -> ExitCode
where
    T: serde::de::DeserializeOwned + serde::Serialize,
    R: serde::Serialize,
    F: FnOnce(Service, T) -> Fut,
    Fut: std::future::Future<Output = Result<R, perfcast::service::ServiceError>>,
{
    let bytes = match read_request(request) {
        Ok(b) => b,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    let req: T = match parse_json(&bytes) {
        Ok(r) => r,
        Err(problem) => {
            eprintln!("{}", serde_json::to_string_pretty(&problem.problem()).unwrap_or_default());
            return ExitCode::from(2);
        }
    };
    let store = match open_store(config).await {
        Ok(s) => s,
        Err(code) => return code,
    };
    let service = Service::new(store.clone());
    let result = match service.load_models().await {
        Ok(_) => run(service, req).await,
        Err(e) => Err(e),
    };
    store.close().await;
    match result {
        Ok(answer) => print_json(&answer),
        Err(e) => {
            let problem = perfcast::api::problem::ApiError::from(e).problem();
            eprintln!("{}", serde_json::to_string_pretty(&problem).unwrap_or_default());
            ExitCode::from(2)
        }
    }
}

/// Opens the configured SQLite database, or prints why not and gives the exit code (1).
async fn open_store(config: &Config) -> Result<Store, ExitCode> {
    Store::open(&config.db).await.map_err(|e| {
        eprintln!("error: {e}");
        ExitCode::FAILURE
    })
}

fn print_json<T: serde::Serialize>(value: &T) -> ExitCode {
    match serde_json::to_string_pretty(value) {
        Ok(s) => {
            use std::io::Write;
            // A closed pipe (`| head`) is not an error worth a panic.
            let _ = writeln!(std::io::stdout().lock(), "{s}");
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
            run_request(&request, &config, |service, req: TrainingRequest| async move {
                service.predict_training(&req).await
            })
            .await
        }
        Command::Search { request } => {
            run_request(
                &request,
                &config,
                |service, req: SearchRequest| async move { service.run_search(&req, None).await },
            )
            .await
        }
        Command::Openapi => print_json(&perfcast::api::openapi()),
        Command::Keys { what } => {
            let store = match open_store(&config).await {
                Ok(s) => s,
                Err(code) => return code,
            };
            let service = Service::new(store.clone());
            let code = match what {
                KeysWhat::Create { name, scope } => {
                    let scope = match scope.as_str() {
                        "write" => perfcast::service::keys::Scope::Write,
                        "read" => perfcast::service::keys::Scope::Read,
                        other => {
                            eprintln!("error: --scope must be read or write, got {other:?}");
                            return ExitCode::from(2);
                        }
                    };
                    match service.create_key(&name, scope).await {
                        Ok(k) => {
                            println!("{}", k.key);
                            eprintln!(
                                "created key {} ({name}, {} scope); it is not shown again",
                                k.record.key_id,
                                scope.as_str()
                            );
                            ExitCode::SUCCESS
                        }
                        Err(e) => print_problem(e),
                    }
                }
                KeysWhat::List => match service.keys().await {
                    Ok(keys) => print_json(
                        &keys
                            .iter()
                            .map(|k| {
                                serde_json::json!({"key_id": k.key_id, "name": k.name, "scope": k.scope,
                                "created_at": k.created_at, "revoked_at": k.revoked_at, "last_used_at": k.last_used_at})
                            })
                            .collect::<Vec<_>>(),
                    ),
                    Err(e) => print_problem(e),
                },
                KeysWhat::Revoke { which } => match service.revoke_key(&which).await {
                    Ok(0) => {
                        eprintln!("error: no active key with id or name {which:?}");
                        ExitCode::from(2)
                    }
                    Ok(n) => {
                        eprintln!("revoked {n} key(s)");
                        ExitCode::SUCCESS
                    }
                    Err(e) => print_problem(e),
                },
            };
            store.close().await;
            code
        }
        Command::Import { files, format, system, gpu, dtype, ranks, collective, base, labels } => {
            let mut read = Vec::new();
            for f in &files {
                match read_import_file(f) {
                    Ok(b) => {
                        read.push((f.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default(), b))
                    }
                    Err(e) => {
                        eprintln!("error: {e}");
                        return ExitCode::from(2);
                    }
                }
            }
            let mut label_map = std::collections::BTreeMap::new();
            for l in labels {
                let Some((k, v)) = l.split_once('=') else {
                    eprintln!("error: --label {l:?} is not KEY=VALUE");
                    return ExitCode::from(2);
                };
                label_map.insert(k.to_string(), v.to_string());
            }
            let store = match open_store(&config).await {
                Ok(s) => s,
                Err(code) => return code,
            };
            let service = Service::new(store.clone());
            if let Err(e) = service.load_models().await {
                return print_problem(e);
            }
            let is_mt4g = format.as_deref().is_some_and(|f| f.eq_ignore_ascii_case("mt4g"))
                || (format.is_none()
                    && read.len() == 1
                    && perfcast::ingest::detect(&read[0].1) == Some(perfcast::ingest::Format::Mt4g));
            let code = if is_mt4g {
                match service.import_gpu(&read[0].1, format.as_deref(), base.as_deref()).await {
                    Ok(out) => print_json(&perfcast::api::gpus::GpuImportResponse {
                        gpu: out.gpu.into(),
                        created: out.created,
                        updated: out.updated,
                    }),
                    Err(e) => print_problem(e),
                }
            } else {
                let params = perfcast::service::profiles::UploadParams {
                    format,
                    system,
                    gpu,
                    dtype,
                    ranks,
                    collective,
                    labels: label_map,
                    ..Default::default()
                };
                let result = if read.len() == 1 {
                    service.upload_profile(&read[0].1, &params).await
                } else {
                    service.upload_profile_files(&read, &params).await
                };
                match result {
                    Ok(out) => print_json(&perfcast::api::profiles::UploadResponse {
                        profile: out.profile.into(),
                        samples_by_kind: out.by_kind.into_iter().map(|(k, v)| (k.to_string(), v)).collect(),
                        duplicate: out.duplicate,
                    }),
                    Err(e) => print_problem(e),
                }
            };
            store.close().await;
            code
        }
        Command::Eval { what: EvalWhat::Comm { data, out, grid } } => {
            let Some(grid) = parse_grid(&grid) else { return ExitCode::from(2) };
            match perfcast::eval::comm::run(&data, &out, grid, &mut |m| eprintln!("{m}")).await {
                Ok(report) => {
                    println!("{}", perfcast::eval::comm::markdown(&report));
                    ExitCode::SUCCESS
                }
                Err(e) => {
                    eprintln!("error: {e}");
                    ExitCode::FAILURE
                }
            }
        }
        Command::Eval {
            what: EvalWhat::Training { data, out, cross_validate, folds, iterations, fit_sources, roofline },
        } => {
            use perfcast::cost::Efficiency;
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
        Command::Eval { what: EvalWhat::Kernels { fixtures } } => match perfcast::eval::kernels::run(&fixtures) {
            Ok(report) => {
                println!("{}", perfcast::eval::kernels::markdown(&report));
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("error: {e}");
                ExitCode::FAILURE
            }
        },
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
