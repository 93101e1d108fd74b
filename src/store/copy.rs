//! Copying a whole database to another one, engine to engine (`perfcast db copy --from sqlite://… --to
//! postgres://…`): every table in foreign-key order, ids kept, in one transaction on the target, which must hold
//! no profiles, models or jobs yet (a new database: only the preset systems its migration seeded).

use sqlx::any::AnyRow;
use sqlx::{Any, Row};

use super::{Engine, Store, StoreError};

/// The tables in foreign-key order, each column with its type: `i` integer, `f` real, `t` text, `b` bytes.
const TABLES: &[(&str, &str)] = &[
    ("systems", "name:t spec:t preset:i created_at:t"),
    ("gpus", "name:t spec:t aliases:t source:t updated_at:t"),
    ("api_keys", "key_id:t name:t scope:t sha256:t created_at:t revoked_at:t last_used_at:t"),
    (
        "jobs",
        "id:i kind:t state:t progress:f message:t params:t result:t attempts:i created_at:t started_at:t \
         finished_at:t owner:t lease_until:t",
    ),
    (
        "profiles",
        "id:t sha256:t format:t system:t gpu:t labels:t raw_gzip:b raw_bytes:i samples:i rejected:t created_at:t",
    ),
    (
        "op_samples",
        "id:i profile_id:t op:t phase:t dtype:t gpu:t d0:i d1:i d2:i d3:i d4:i time_us:f attributes:t split_key:i \
         engine:t kernel_source:t compute_dtype:t",
    ),
    (
        "comm_samples",
        "id:i profile_id:t system:t collective:t bytes:i ranks:i nodes:i gpus_per_node:i time_us:f algbw_gbs:f \
         busbw_gbs:f dtype:t attributes:t",
    ),
    ("kernel_samples", "id:i profile_id:t gpu:t name:t duration_us:f grid:t block:t metrics:t attributes:t"),
    (
        "timer_samples",
        "id:i profile_id:t name:t grp:t rank:i thread:i calls:f exclusive_us:f inclusive_us:f attributes:t",
    ),
    (
        "regressors",
        "id:i key:t family:t scope:t version:i active:i model:t holdout_model:t feature_names:t candidate:t \
         candidates:t validation_mape:f validation_signed:f analytic_validation_mape:f train_rows:i \
         validation_rows:i samples:i summary:t importance:t promotion:t provenance:t job_id:i created_at:t",
    ),
    ("regressor_validation", "regressor_id:i points:t"),
    ("system_calibrations", "system:t calibration:t samples:i created_at:t"),
    ("bundles", "version:t manifest:t installed_at:t"),
    (
        "training_runs",
        "id:i system:t framework:t format:t config:t log:t steps:i warmup_steps:i measured_iteration_s:f \
         predicted_iteration_s:f created_at:t",
    ),
    ("training_calibrations", "system:t framework:t calibration:t accepted:i created_at:t"),
];

/// Tables whose `id` the target generates (PostgreSQL identity columns to move past the copied ids).
const IDENTITY: &[&str] =
    &["jobs", "op_samples", "comm_samples", "kernel_samples", "timer_samples", "regressors", "training_runs"];

/// Rows per INSERT while copying.
const BATCH: usize = 200;
/// Rows read per page of the source.
const PAGE: usize = 5000;

/// One copied value.
enum Value {
    Int(Option<i64>),
    Real(Option<f64>),
    Text(Option<String>),
    Bytes(Option<Vec<u8>>),
}

fn read(row: &AnyRow, i: usize, kind: &str) -> Result<Value, StoreError> {
    Ok(match kind {
        "i" => Value::Int(row.try_get(i)?),
        "f" => Value::Real(row.try_get(i)?),
        "b" => Value::Bytes(row.try_get(i)?),
        _ => Value::Text(row.try_get(i)?),
    })
}

/// Copies every row of `from` into `to` (see the module); returns (table, rows) in copy order.
///
/// Errors: [`StoreError::Conflict`] when the target already holds profiles, models or jobs; a database error (the
/// target is then left as it was: one transaction).
pub async fn copy_database(from: &Store, to: &Store) -> Result<Vec<(String, u64)>, StoreError> {
    let used: i64 = sqlx::query_scalar(
        "SELECT (SELECT COUNT(*) FROM profiles) + (SELECT COUNT(*) FROM regressors) + (SELECT COUNT(*) FROM jobs)",
    )
    .fetch_one(to.pool())
    .await?;
    if used > 0 {
        return Err(StoreError::Conflict(format!(
            "the target database {} is not new (it holds profiles, models or jobs); copying into it",
            to.url()
        )));
    }
    let mut tx = to.begin().await?;
    let mut report = Vec::with_capacity(TABLES.len());
    for (table, spec) in TABLES {
        let columns: Vec<(&str, &str)> = spec.split_whitespace().filter_map(|c| c.split_once(':')).collect();
        let names = columns.iter().map(|(n, _)| *n).collect::<Vec<_>>().join(", ");
        let conflict = if *table == "systems" { " ON CONFLICT DO NOTHING" } else { "" };
        let (first, first_kind) = columns[0];
        // Pages in key order (the first column is the table's key), so a large table never sits in memory whole.
        let mut after: Option<Value> = None;
        let mut copied = 0u64;
        loop {
            let sql = match after {
                None => format!("SELECT {names} FROM {table} ORDER BY 1 LIMIT {PAGE}"),
                Some(_) => format!("SELECT {names} FROM {table} WHERE {first} > $1 ORDER BY 1 LIMIT {PAGE}"),
            };
            let mut page = sqlx::query::<Any>(&sql);
            page = match after.take() {
                Some(Value::Int(v)) => page.bind(v),
                Some(Value::Text(v)) => page.bind(v),
                _ => page,
            };
            let rows = page.fetch_all(from.pool()).await?;
            let Some(last) = rows.last() else { break };
            after = Some(read(last, 0, first_kind)?);
            for chunk in rows.chunks(BATCH) {
                let sql = super::values_sql(
                    to.engine(),
                    &format!("INSERT INTO {table} ({names})"),
                    columns.len(),
                    chunk.len(),
                ) + conflict;
                let mut q = sqlx::query::<Any>(&sql);
                for row in chunk {
                    for (i, (_, kind)) in columns.iter().enumerate() {
                        q = match read(row, i, kind)? {
                            Value::Int(v) => q.bind(v),
                            Value::Real(v) => q.bind(v),
                            Value::Text(v) => q.bind(v),
                            Value::Bytes(v) => q.bind(v),
                        };
                    }
                }
                q.execute(&mut *tx).await?;
            }
            copied += rows.len() as u64;
        }
        report.push((table.to_string(), copied));
    }
    if to.engine() == Engine::Postgres {
        for table in IDENTITY {
            sqlx::query(&format!(
                "SELECT setval(pg_get_serial_sequence('{table}', 'id'), COALESCE(MAX(id), 0) + 1, false) FROM {table}"
            ))
            .fetch_all(&mut *tx)
            .await?;
        }
    }
    tx.commit().await?;
    to.note_system_change();
    Ok(report)
}
