//! `perfcast db copy --from URL --to URL`: moves an installation from one database to another (SQLite to
//! PostgreSQL, typically) — every table, ids kept, in one transaction on the target.

use std::process::ExitCode;

use clap::Subcommand;

use super::print_json;
use crate::store::Store;

/// What `perfcast db` does.
#[derive(Subcommand)]
pub(super) enum DbWhat {
    /// Copy every row of one database into a new one (migrated here first; it must hold no profiles, models or
    /// jobs). Stop the servers on the source first so that nothing is written meanwhile.
    Copy {
        /// Source database URL (sqlite://PATH or postgres://…).
        #[arg(long, value_name = "URL")]
        from: String,
        /// Target database URL (postgres://… or sqlite://PATH), created or migrated as needed.
        #[arg(long, value_name = "URL")]
        to: String,
    },
}

/// Runs a db command; prints the rows copied per table as JSON. Exit code 1 when a database cannot be opened or
/// the copy fails (the target is then unchanged), 2 when the target is not new.
pub(super) async fn run(what: DbWhat) -> ExitCode {
    let DbWhat::Copy { from, to } = what;
    let open = |url: String| async move {
        Store::connect(&url).await.map_err(|e| {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        })
    };
    let (source, target) = match (open(from).await, open(to).await) {
        (Ok(s), Ok(t)) => (s, t),
        (Err(code), _) | (_, Err(code)) => return code,
    };
    let outcome = crate::store::copy::copy_database(&source, &target).await;
    source.close().await;
    target.close().await;
    match outcome {
        Ok(tables) => {
            let rows: serde_json::Map<String, serde_json::Value> =
                tables.into_iter().map(|(t, n)| (t, serde_json::Value::from(n))).collect();
            print_json(&serde_json::json!({"copied": rows}))
        }
        Err(crate::store::StoreError::Conflict(e)) => {
            eprintln!("error: {e} is refused");
            ExitCode::from(2)
        }
        Err(e) => {
            eprintln!("error: the copy failed and the target is unchanged: {e}");
            ExitCode::FAILURE
        }
    }
}
