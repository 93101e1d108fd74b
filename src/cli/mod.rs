//! The `perfcast` command line: `serve` the HTTP API, `predict` (training), `predict-inference` and
//! `search-inference` (serving), `search` or draw the `timeline` from a request file, print the `openapi` document,
//! manage API `keys`, `import` measurements, `eval` accuracy, build or show the bundled `models`.
//!
//! The top layer: it parses the command line (clap derive), loads the configuration and calls what the API calls
//! ([`crate::service`], [`crate::app`], [`crate::eval`]). What it prints is the same response types the API
//! returns, serialized the same way. Nothing imports this module.
//!
//! Exit codes: 0 success; 2 for the caller's mistakes (bad flags, unreadable or invalid request, refused input);
//! 1 for ours (a database that cannot be opened, a failing server or evaluation).
//!
//! The top layer: may import `app`, `service`, `store`, `eval`, `config`, `api::json`; nothing imports `cli`.

mod db;
mod eval;
mod import;
mod inference;
mod keys;
mod models;
mod predict;
mod progress;
mod search;
mod serve;
mod stamp;
mod timeline;

use std::io::{Read, Write};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Parser, Subcommand};

use crate::api::json::parse_json;
use crate::api::problem::ApiError;
use crate::config::{Config, Overrides};
use crate::service::{Service, ServiceError};
use crate::store::Store;

#[derive(Parser)]
#[command(name = "perfcast", version, about = "Predicts how fast distributed GPU applications run")]
struct Cli {
    /// Configuration file (default: ./config.toml when it exists). Environment: PERFCAST_CONFIG.
    #[arg(long, global = true, env = "PERFCAST_CONFIG", value_name = "FILE")]
    config: Option<PathBuf>,
    /// SQLite database file (overrides `db` and `database_url` in the config, PERFCAST_DB and
    /// PERFCAST_DATABASE_URL).
    #[arg(long, global = true, value_name = "PATH", conflicts_with = "database_url")]
    db: Option<PathBuf>,
    /// Database URL: sqlite://PATH or postgres://USER:PASSWORD@HOST:PORT/DATABASE (overrides `database_url` in
    /// the config and PERFCAST_DATABASE_URL).
    #[arg(long, global = true, value_name = "URL")]
    database_url: Option<String>,
    /// No progress bars or progress lines on stderr (`eval`, `import`, `search`, and the first command on a new
    /// database, which installs the bundled measurements). Bars show only when stderr is a terminal; elsewhere
    /// progress stays plain lines.
    #[arg(long, short, global = true)]
    quiet: bool,
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
    /// Predict LLM serving from a request file (the body of POST /v1/predictions/inference; `-` reads stdin):
    /// TTFT, TPOT, throughput and KV-cache capacity, the same JSON the API returns.
    PredictInference {
        /// Request file.
        request: PathBuf,
        /// Print the simulated engine steps as a Chrome trace for Perfetto (what
        /// POST /v1/predictions/inference/timeline returns) instead of the prediction.
        #[arg(long)]
        timeline: bool,
    },
    /// Search serving configurations (tp, pp, ep, precision, concurrency) for a latency target from a request file
    /// (the body of POST /v1/predictions/inference/search; `-` reads stdin), ranked by tokens/s per GPU.
    SearchInference {
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
    /// The timeline of one training iteration from a request file (the body of
    /// POST /v1/predictions/training/timeline; `-` reads stdin): Trace Event Format JSON for Perfetto UI or
    /// chrome://tracing, or an SVG Gantt chart.
    Timeline(timeline::TimelineArgs),
    /// Print the OpenAPI document (what /openapi.json serves).
    Openapi,
    /// Database maintenance: copy an installation to another database (`db copy --from sqlite://… --to
    /// postgres://…`).
    Db {
        #[command(subcommand)]
        what: db::DbWhat,
    },
    /// Manage API keys (only their hashes are stored).
    Keys {
        #[command(subcommand)]
        what: keys::KeysWhat,
    },
    /// Import profiler or benchmark outputs, as `POST /v1/profiles` does (several files of one run: TAU profiles,
    /// rocprof outputs), or an MT4G GPU report, as `POST /v1/gpus/import` does. Prints the same JSON.
    Import(import::ImportArgs),
    /// Accuracy on the held-out rows of the shared datasets (train on the train split only).
    Eval {
        #[command(subcommand)]
        what: eval::EvalWhat,
    },
    /// The bundled training set and models a fresh install serves from: build them from the shared datasets, or
    /// show the embedded bundle's manifest.
    Models {
        #[command(subcommand)]
        what: models::ModelsWhat,
    },
}

/// Parses the command line, runs the command on a multi-threaded tokio runtime and gives the exit code.
pub fn run() -> ExitCode {
    let cli = Cli::parse();
    match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(runtime) => runtime.block_on(dispatch(cli)),
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            ExitCode::FAILURE
        }
    }
}

async fn dispatch(cli: Cli) -> ExitCode {
    let config = match load_config(&cli) {
        Ok(c) => c,
        Err(code) => return code,
    };
    let progress = progress::Mode::detect(cli.quiet);
    match cli.command {
        Command::Serve { .. } => serve::run(config).await,
        Command::Predict { request } => predict::run(&request, &config, progress).await,
        Command::PredictInference { request, timeline } => inference::run(&request, &config, timeline, progress).await,
        Command::SearchInference { request } => inference::search(&request, &config, progress).await,
        Command::Search { request } => search::run(&request, &config, progress).await,
        Command::Timeline(args) => timeline::run(&args, &config, progress).await,
        Command::Openapi => print_json(&crate::api::openapi()),
        Command::Keys { what } => keys::run(what, &config).await,
        Command::Db { what } => db::run(what).await,
        Command::Import(args) => import::run(args, &config, progress).await,
        Command::Eval { what } => eval::run(what, &config, progress).await,
        Command::Models { what } => models::run(what, &config, progress).await,
    }
}

/// The configuration: the file (`--config`), the environment, then `--db` and `serve --bind`. A configuration
/// that does not load prints why and gives exit code 2.
fn load_config(cli: &Cli) -> Result<Config, ExitCode> {
    let bind = match &cli.command {
        Command::Serve { bind } => *bind,
        _ => None,
    };
    // `--db PATH` names a SQLite file and wins over a configured URL too.
    let database_url =
        cli.database_url.clone().or_else(|| cli.db.as_ref().map(|p| format!("sqlite://{}", p.display())));
    let overrides = Overrides { bind, db: cli.db.clone(), database_url };
    Config::load(cli.config.as_deref(), &overrides).map_err(|e| {
        eprintln!("error: {e}");
        ExitCode::from(2)
    })
}

/// A service error as its RFC 9457 problem on stderr; exit code 2 for the client's errors and 1 for ours.
fn print_problem(e: ServiceError) -> ExitCode {
    let problem = ApiError::from(e).problem();
    eprintln!("{}", serde_json::to_string_pretty(&problem).unwrap_or_default());
    if problem.status >= 500 {
        ExitCode::FAILURE
    } else {
        ExitCode::from(2)
    }
}

/// Prints `value` as pretty JSON on stdout (exit 0), or why it cannot be encoded (exit 1).
fn print_json<T: serde::Serialize>(value: &T) -> ExitCode {
    match serde_json::to_string_pretty(value) {
        Ok(s) => {
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

/// The bytes of a request file; `-` reads stdin. Errors: the message to print.
fn read_request(path: &Path) -> Result<Vec<u8>, String> {
    if path == Path::new("-") {
        let mut buf = Vec::new();
        std::io::stdin().read_to_end(&mut buf).map_err(|e| format!("cannot read stdin: {e}"))?;
        Ok(buf)
    } else {
        std::fs::read(path).map_err(|e| format!("cannot read {}: {e}", path.display()))
    }
}

/// Opens the configured database (`database_url`, else the SQLite file `db`), or prints why not and gives the
/// exit code (1).
async fn open_store(config: &Config) -> Result<Store, ExitCode> {
    Store::connect(&config.database_url()).await.map_err(|e| {
        eprintln!("error: {e}");
        ExitCode::FAILURE
    })
}

/// Reads a JSON request (`-` = stdin) as `T`, runs `run` on a service over the configured database with its
/// imported GPUs and active models loaded (the bundled ones installed first when the database lacks them and
/// `bundled_models` is on, as `serve` does, telling on stderr what it does as `progress` says), and prints the
/// answer as JSON. A request that cannot be read (exit 2),
/// does not parse or is refused prints its RFC 9457 problem on stderr (exit 2, whatever the problem's status); a
/// database that cannot be opened exits 1.
async fn run_request<T, R, F, Fut>(request: &Path, config: &Config, progress: progress::Mode, run: F) -> ExitCode
where
    T: serde::de::DeserializeOwned + serde::Serialize,
    R: serde::Serialize,
    F: FnOnce(Service, T) -> Fut,
    Fut: std::future::Future<Output = Result<R, ServiceError>>,
{
    match answer_request(request, config, progress, run).await {
        Ok(answer) => print_json(&answer),
        Err(code) => code,
    }
}

/// [`run_request`] without the printing: the answer, or the exit code after printing why there is none.
async fn answer_request<T, R, F, Fut>(
    request: &Path,
    config: &Config,
    progress: progress::Mode,
    run: F,
) -> Result<R, ExitCode>
where
    T: serde::de::DeserializeOwned + serde::Serialize,
    F: FnOnce(Service, T) -> Fut,
    Fut: std::future::Future<Output = Result<R, ServiceError>>,
{
    let req: T = match read_request(request) {
        Err(e) => {
            eprintln!("error: {e}");
            return Err(ExitCode::from(2));
        }
        Ok(bytes) => match parse_json(&bytes) {
            Ok(r) => r,
            Err(problem) => {
                eprintln!("{}", serde_json::to_string_pretty(&problem.problem()).unwrap_or_default());
                return Err(ExitCode::from(2));
            }
        },
    };
    let store = open_store(config).await?;
    // Answer as the server would on this database: with the bundled models (installed here when it lacks them).
    let mut parsed = std::collections::HashMap::new();
    if config.bundled_models {
        let startup = std::sync::Arc::new(crate::service::startup::Startup::default());
        // The models alone: an answer needs nothing else, and the next `perfcast serve` installs the samples.
        let after = "; the samples are installed by the next `perfcast serve`";
        match crate::app::install_bundled_models(&store, &startup, progress.show(), after).await {
            Ok((p, _)) => parsed = p.0,
            Err(e) => {
                eprintln!("error: {e}");
                store.close().await;
                return Err(ExitCode::FAILURE);
            }
        }
    }
    let service = Service::new(store.clone()).with_sim_limits(crate::app::sim_limits(config));
    let result = match service.load_models_parsed(parsed).await {
        Ok(_) => run(service, req).await,
        Err(e) => Err(e),
    };
    store.close().await;
    result.map_err(|e| {
        eprintln!("{}", serde_json::to_string_pretty(&ApiError::from(e).problem()).unwrap_or_default());
        ExitCode::from(2)
    })
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use super::Cli;

    #[test]
    fn the_command_line_definition_is_consistent() {
        Cli::command().debug_assert();
    }
}
