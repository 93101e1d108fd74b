//! `perfcast keys create|list|revoke`: API keys, of which only the SHA-256 is stored.

use std::process::ExitCode;

use clap::Subcommand;

use super::{open_store, print_json, print_problem};
use crate::config::Config;
use crate::service::keys::{KeyInfo, Scope};
use crate::service::Service;

/// What `perfcast keys` does.
#[derive(Subcommand)]
pub(super) enum KeysWhat {
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

/// Runs a keys command on the configured database. Exit codes: 1 when the database cannot be opened; 2 for a bad
/// `--scope`, a refused name or no key to revoke.
pub(super) async fn run(what: KeysWhat, config: &Config) -> ExitCode {
    let store = match open_store(config).await {
        Ok(s) => s,
        Err(code) => return code,
    };
    let service = Service::new(store.clone());
    let code = match what {
        KeysWhat::Create { name, scope } => create(&service, &name, &scope).await,
        KeysWhat::List => list(&service).await,
        KeysWhat::Revoke { which } => revoke(&service, &which).await,
    };
    store.close().await;
    code
}

/// Prints the new key on stdout (the only time it is shown) and what was created on stderr.
async fn create(service: &Service, name: &str, scope: &str) -> ExitCode {
    let scope = match scope {
        "write" => Scope::Write,
        "read" => Scope::Read,
        other => {
            eprintln!("error: --scope must be read or write, got {other:?}");
            return ExitCode::from(2);
        }
    };
    match service.create_key(name, scope).await {
        Ok(k) => {
            println!("{}", k.key);
            eprintln!("created key {} ({name}, {} scope); it is not shown again", k.record.key_id, scope.as_str());
            ExitCode::SUCCESS
        }
        Err(e) => print_problem(e),
    }
}

/// Prints every key as a JSON array of [`KeyInfo`].
async fn list(service: &Service) -> ExitCode {
    match service.keys().await {
        Ok(keys) => print_json(&keys.into_iter().map(KeyInfo::from).collect::<Vec<_>>()),
        Err(e) => print_problem(e),
    }
}

/// Revokes the active keys with id or name `which`; exit code 2 when there is none.
async fn revoke(service: &Service, which: &str) -> ExitCode {
    match service.revoke_key(which).await {
        Ok(0) => {
            eprintln!("error: no active key with id or name {which:?}");
            ExitCode::from(2)
        }
        Ok(n) => {
            eprintln!("revoked {n} key(s)");
            ExitCode::SUCCESS
        }
        Err(e) => print_problem(e),
    }
}
