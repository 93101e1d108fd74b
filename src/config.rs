//! Service configuration: built-in defaults, then `config.toml`, then `PERFCAST_<KEY>` environment variables,
//! then command-line flags — each layer overrides the one before (figment).
//!
//! May import: `learn` (the retrain grid's type). Must not import `service`, `jobs`, `app`, `api` or `cli`: `app.rs`
//! turns a `Config` into the job runner's settings.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use figment::providers::{Env, Format, Serialized, Toml};
use figment::Figment;
use serde::{Deserialize, Serialize};

/// Every setting of the service. Keys are the `config.toml` keys; the environment variable is `PERFCAST_` + the
/// key in upper case (`PERFCAST_BIND`, `PERFCAST_DB`, …).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Address and port to listen on. Default `127.0.0.1:8080`.
    pub bind: SocketAddr,
    /// SQLite database file; created with its directory when missing. Relative paths are relative to the working
    /// directory. Default `data/perfcast.db`. Used when `database_url` is not set.
    pub db: PathBuf,
    /// The database: `sqlite://PATH` (one machine) or `postgres://USER:PASSWORD@HOST:PORT/DATABASE` (several
    /// replicas sharing one database). Default: unset, meaning `sqlite://` + `db` (`sqlite://data/perfcast.db`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub database_url: Option<String>,
    /// How long a replica's claim on a running job holds without a heartbeat, seconds; a job whose replica died is
    /// re-run by another replica after it. Default 15.
    pub job_lease_s: u64,
    /// Largest accepted JSON request body, bytes (larger → 413). Default 1 MiB.
    pub body_limit_bytes: usize,
    /// Time limit for one request, seconds (longer → 408). Default 30.
    pub request_timeout_s: u64,
    /// Log filter in `tracing_subscriber::EnvFilter` syntax (`RUST_LOG` overrides it). Default `info`.
    pub log: String,
    /// Largest accepted profile upload (`POST /v1/profiles`), bytes after gzip decoding (larger → 413). Default
    /// 256 MiB.
    pub upload_limit_bytes: usize,
    /// Retrain automatically when new samples arrive. Default true.
    pub auto_retrain: bool,
    /// Quiet time after the last upload before an automatic retrain, seconds. Default 5.
    pub retrain_debounce_s: u64,
    /// Hyper-parameter grid of automatic retrains: `full`, `fast` or `minimal`. Default `full`.
    pub retrain_grid: crate::learn::Grid,
    /// Samples a GPU needs for one (operator, phase, dtype) before a per-GPU model is tried. Default 300.
    pub per_gpu_min_samples: u64,
    /// Reads (GET, predictions, estimates) need a key too (any scope). Writes always need a write key. Default
    /// false.
    pub auth_reads: bool,
    /// A write key to accept (created in the database at startup if missing) — how deployments provision the
    /// first key without reading the log. Default none: a new database gets a generated key, printed once.
    pub api_key: Option<String>,
    /// Requests per second allowed per API key (token bucket; 429 beyond). Default 50.
    pub rate_limit_per_s: u32,
    /// Burst allowed per API key above the rate. Default 100.
    pub rate_limit_burst: u32,
    /// Requests handled at once; more are refused with 503 and Retry-After. Default 512.
    pub max_concurrent_requests: usize,
    /// Most rows one learned model trains on; larger sample sets are thinned to a uniform sample. Default 200,000.
    pub max_training_rows: usize,
    /// Wall-clock budget of one retrain job, seconds; keys not reached are skipped and retried next time.
    /// Default 3600.
    pub retrain_time_limit_s: u64,
    /// Largest configuration search answered inline (`200`); larger ones run as a `search` job (`202`).
    /// Default 100,000 candidates (about a second).
    pub search_inline_max_candidates: u64,
    /// Most requests one simulated serving benchmark sends (`workload.num_requests`; more → 422). Default 20,000.
    pub serving_max_requests: u32,
    /// Most closed-loop clients of one simulated serving benchmark (`workload.concurrency`; more → 422). Default
    /// 10,000.
    pub serving_max_concurrency: u32,
    /// Most generated tokens over all requests of one simulated serving benchmark (num_requests × output_tokens;
    /// more → 422). Default 20,000,000 (about a quarter of a second of one core).
    pub serving_max_simulated_tokens: u64,
    /// Most engine steps of one simulated serving benchmark (more → 422). Default 2,000,000.
    pub serving_max_simulated_steps: u64,
    /// Install the measurements and models bundled in the binary (`models/bundled`) into a database that does not
    /// have their version, at startup before serving: a fresh install answers with learned models at once.
    /// Default true.
    pub bundled_models: bool,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            bind: SocketAddr::from(([127, 0, 0, 1], 8080)),
            db: PathBuf::from("data/perfcast.db"),
            database_url: None,
            job_lease_s: 15,
            body_limit_bytes: 1 << 20,
            request_timeout_s: 30,
            log: "info".into(),
            upload_limit_bytes: 256 << 20,
            auto_retrain: true,
            retrain_debounce_s: 5,
            retrain_grid: crate::learn::Grid::Full,
            per_gpu_min_samples: 300,
            auth_reads: false,
            api_key: None,
            rate_limit_per_s: 50,
            rate_limit_burst: 100,
            max_concurrent_requests: 512,
            max_training_rows: 200_000,
            retrain_time_limit_s: 3600,
            search_inline_max_candidates: 100_000,
            serving_max_requests: 20_000,
            serving_max_concurrency: 10_000,
            serving_max_simulated_tokens: 20_000_000,
            serving_max_simulated_steps: 2_000_000,
            bundled_models: true,
        }
    }
}

/// Values given on the command line; `None` leaves the lower layers' value.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Overrides {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bind: Option<SocketAddr>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub db: Option<PathBuf>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub database_url: Option<String>,
}

/// Why the configuration cannot be loaded.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("config file {0} does not exist")]
    Missing(String),
    #[error("invalid configuration: {0}")]
    Invalid(#[from] Box<figment::Error>),
}

impl Config {
    /// The database URL in effect: `database_url`, else `sqlite://` + `db`.
    pub fn database_url(&self) -> String {
        match &self.database_url {
            Some(url) if !url.is_empty() => url.clone(),
            _ => format!("sqlite://{}", self.db.display()),
        }
    }

    /// Loads defaults ← `file` (or `config.toml` in the working directory when `file` is `None` and it exists)
    /// ← `PERFCAST_*` environment (except `PERFCAST_CONFIG` and the tests' `PERFCAST_TEST_POSTGRES_URL`) ← `overrides`.
    ///
    /// Errors: an explicitly named file that does not exist; a value of the wrong type or an unknown key (the
    /// message names the key and where it came from).
    pub fn load(file: Option<&Path>, overrides: &Overrides) -> Result<Config, ConfigError> {
        let file = match file {
            Some(f) if !f.exists() => return Err(ConfigError::Missing(f.display().to_string())),
            Some(f) => f.to_path_buf(),
            None => PathBuf::from("config.toml"),
        };
        Figment::from(Serialized::defaults(Config::default()))
            .merge(Toml::file(file))
            .merge(Env::prefixed("PERFCAST_").ignore(&["config", "test_postgres_url"]))
            .merge(Serialized::defaults(overrides))
            .extract()
            .map_err(|e| ConfigError::Invalid(Box::new(e)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layers_override_in_order() {
        figment::Jail::expect_with(|jail| {
            jail.create_file("perfcast.toml", "bind = \"0.0.0.0:9000\"\ndb = \"from-file.db\"\nrequest_timeout_s = 5")?;
            jail.set_env("PERFCAST_DB", "from-env.db");
            let c = Config::load(Some(Path::new("perfcast.toml")), &Overrides::default()).unwrap();
            assert_eq!(c.bind, "0.0.0.0:9000".parse().unwrap());
            assert_eq!(c.db, PathBuf::from("from-env.db"));
            assert_eq!(c.request_timeout_s, 5);
            assert_eq!(c.body_limit_bytes, 1 << 20);
            let o = Overrides {
                bind: Some("127.0.0.1:1234".parse().unwrap()),
                db: Some("cli.db".into()),
                ..Default::default()
            };
            let c = Config::load(Some(Path::new("perfcast.toml")), &o).unwrap();
            assert_eq!((c.bind.port(), c.db.clone()), (1234, PathBuf::from("cli.db")));
            assert_eq!(c.database_url(), "sqlite://cli.db");
            jail.set_env("PERFCAST_DATABASE_URL", "postgres://u@db/p");
            let c = Config::load(Some(Path::new("perfcast.toml")), &Overrides::default()).unwrap();
            assert_eq!(c.database_url(), "postgres://u@db/p");
            Ok(())
        });
    }

    #[test]
    fn bad_values_and_missing_files_are_errors() {
        figment::Jail::expect_with(|jail| {
            jail.create_file("bad.toml", "request_timeout_s = \"soon\"")?;
            let err = Config::load(Some(Path::new("bad.toml")), &Overrides::default()).unwrap_err().to_string();
            assert!(err.contains("request_timeout_s"), "{err}");
            assert!(matches!(
                Config::load(Some(Path::new("nope.toml")), &Overrides::default()),
                Err(ConfigError::Missing(_))
            ));
            Ok(())
        });
    }
}
