//! `perfcast serve`: the HTTP API until SIGTERM or Ctrl-C.

use std::process::ExitCode;

use tracing_subscriber::EnvFilter;

use crate::config::Config;

/// Logs to stderr at `RUST_LOG`, or the configured `log` filter when `RUST_LOG` is unset or invalid.
fn init_logging(config: &Config) {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(&config.log));
    tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).init();
}

/// Serves the API on the configured address and database (created and migrated when needed). Exit code 1 when
/// the server cannot start or fails.
pub(super) async fn run(config: Config) -> ExitCode {
    init_logging(&config);
    match crate::app::serve(config).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!(error = %e, "perfcast failed");
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
