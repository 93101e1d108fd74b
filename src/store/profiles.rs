//! The `profiles` table and the sample tables filled from it (`op_samples`, `comm_samples`, `kernel_samples`).

use std::collections::BTreeMap;
use std::io::{Read, Write};

use sqlx::Row;

use super::jobs::{create_job_in, FollowUpJob};
use super::{Store, StoreError};
use crate::op::Dims;
use crate::samples::{CommSample, KernelSample, OpSample, Rejected, TimerSample};

/// An upload to store: the raw (decoded) bytes and what parsing made of them.
#[derive(Debug, Clone)]
pub struct NewProfile<'a> {
    /// Hex SHA-256 of `raw`: the idempotency key.
    pub sha256: String,
    pub format: String,
    pub system: Option<String>,
    /// The upload's `gpu` parameter (canonical name).
    pub gpu: Option<String>,
    /// Free labels (`ci_run`, `git_sha`, …).
    pub labels: BTreeMap<String, String>,
    pub raw: &'a [u8],
    pub rejected: Vec<Rejected>,
}

/// Normalized samples ready to store: operator samples carry their canonical GPU and split key.
#[derive(Debug, Clone, Default)]
pub struct SampleBatch {
    pub ops: Vec<(OpSample, u64)>,
    pub comms: Vec<CommSample>,
    pub kernels: Vec<KernelSample>,
    pub timers: Vec<TimerSample>,
}

impl SampleBatch {
    /// All samples.
    pub fn len(&self) -> usize {
        self.ops.len() + self.comms.len() + self.kernels.len() + self.timers.len()
    }

    /// True without samples.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A stored profile (without its raw bytes).
#[derive(Debug, Clone, PartialEq)]
pub struct ProfileRecord {
    pub id: String,
    pub sha256: String,
    pub format: String,
    pub system: Option<String>,
    pub gpu: Option<String>,
    pub labels: BTreeMap<String, String>,
    pub raw_bytes: u64,
    pub samples: u64,
    pub rejected: Vec<Rejected>,
    pub created_at: String,
}

/// What storing an upload did.
#[derive(Debug, Clone, PartialEq)]
pub enum Stored {
    /// New profile and its samples, committed.
    Created(ProfileRecord),
    /// The same bytes were stored before: nothing written, the earlier record returned.
    Duplicate(ProfileRecord),
}

/// A stored operator sample as training reads it.
#[derive(Debug, Clone, PartialEq)]
pub struct OpRow {
    pub gpu: String,
    pub dims: Dims,
    pub time_us: f64,
    pub split_key: u64,
    /// The kernel or code path that measured it (`kernel_source`, '' when unknown).
    pub kernel_source: String,
    /// The precision its kernel computed in when the sample's dtype names another (attention's `attn_dtype`), ''
    /// otherwise.
    pub compute_dtype: String,
}

/// The columns an operator sample's engine and kernel are stored in, from its attributes (migration
/// `0011_op_sample_engine.sql`): the engine's wire name or '' ([`crate::samples::kernel_family`]), the
/// `kernel_source` attribute or '', and the `attn_dtype` attribute as a perfcast precision name or ''.
pub fn engine_columns(attributes: &crate::samples::Attributes) -> (&'static str, String, &'static str) {
    let engine = crate::samples::kernel_family(attributes).map_or("", |f| f.as_str());
    let kernel = attributes.get("kernel_source").cloned().unwrap_or_default();
    let compute = crate::samples::compute_dtype(attributes).map_or("", |p| p.as_str());
    (engine, kernel, compute)
}

/// A stored sample as `GET /v1/profiles/{id}/samples` shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct SampleRow {
    pub kind: &'static str,
    pub id: i64,
    /// The sample as JSON (its kind's fields).
    pub data: serde_json::Value,
}

fn gzip(raw: &[u8]) -> Result<Vec<u8>, StoreError> {
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    enc.write_all(raw).and_then(|_| enc.finish()).map_err(|e| StoreError::Corrupt(format!("gzip: {e}")))
}

fn json<T: serde::Serialize>(v: &T) -> Result<String, StoreError> {
    serde_json::to_string(v).map_err(|e| StoreError::Corrupt(e.to_string()))
}

fn decode_profile(row: &sqlx::any::AnyRow) -> Result<ProfileRecord, StoreError> {
    let labels: String = row.try_get("labels")?;
    let rejected: String = row.try_get("rejected")?;
    let rejected: Vec<(u64, String)> = serde_json::from_str::<Vec<serde_json::Value>>(&rejected)
        .map_err(|e| StoreError::Corrupt(e.to_string()))?
        .into_iter()
        .map(|v| (v["line"].as_u64().unwrap_or(0), v["reason"].as_str().unwrap_or("").to_string()))
        .collect();
    Ok(ProfileRecord {
        id: row.try_get("id")?,
        sha256: row.try_get("sha256")?,
        format: row.try_get("format")?,
        system: row.try_get("system")?,
        gpu: row.try_get("gpu")?,
        labels: serde_json::from_str(&labels).map_err(|e| StoreError::Corrupt(e.to_string()))?,
        raw_bytes: row.try_get::<i64, _>("raw_bytes")? as u64,
        samples: row.try_get::<i64, _>("samples")? as u64,
        rejected: rejected.into_iter().map(|(line, reason)| Rejected { line, reason }).collect(),
        created_at: row.try_get("created_at")?,
    })
}

const PROFILE_COLUMNS: &str = "id, sha256, format, system, gpu, labels, raw_bytes, samples, rejected, created_at";

/// Most dataset names a model version's provenance lists.
pub const MAX_DATASETS: usize = 25;

/// Rows per multi-row INSERT (13 bound values per op sample stays far below SQLite's 32,766 and PostgreSQL's
/// 65,535 bound values per statement).
const BATCH: usize = 500;

impl Store {
    /// Stores an upload — compressed raw bytes, profile row and every sample — in one `BEGIN IMMEDIATE`
    /// transaction, or finds the identical earlier upload. Either everything is committed or nothing is.
    pub async fn insert_profile(
        &self,
        p: &NewProfile<'_>,
        samples: &SampleBatch,
        follow_up: Option<&FollowUpJob>,
    ) -> Result<Stored, StoreError> {
        let raw_gzip = gzip(p.raw)?;
        let mut tx = self.begin().await?;
        let stored = insert_profile_in(&mut tx, self.engine(), p, raw_gzip, samples, &|_| {}).await?;
        if let (Stored::Created(_), Some(job)) = (&stored, follow_up) {
            create_job_in(&mut tx, self.engine(), &job.kind, &job.params, job.dedupe).await?;
        }
        tx.commit().await?;
        Ok(stored)
    }

    /// The datasets of an operator key's samples, those of (op, phase, dtype) measured by one of `engines` (the
    /// `engine` column's values; see [`Store::datasets_of`]).
    pub async fn op_datasets(
        &self,
        op: &str,
        phase: &str,
        dtype: &str,
        engines: &[&str],
    ) -> Result<Vec<String>, StoreError> {
        let ids = format!(
            "SELECT DISTINCT profile_id FROM op_samples WHERE op = $1 AND phase = $2 AND dtype = $3 AND engine IN ({})",
            placeholders(4, engines.len())
        );
        let mut binds = vec![op, phase, dtype];
        binds.extend_from_slice(engines);
        self.datasets_of(&ids, &binds).await
    }

    /// The datasets of a collective's samples (see [`Store::datasets_of`]).
    pub async fn comm_datasets(&self, collective: &str) -> Result<Vec<String>, StoreError> {
        self.datasets_of("SELECT DISTINCT profile_id FROM comm_samples WHERE collective = $1", &[collective]).await
    }

    /// The datasets of the kernel samples (see [`Store::datasets_of`]).
    pub async fn kernel_datasets(&self) -> Result<Vec<String>, StoreError> {
        self.datasets_of("SELECT DISTINCT profile_id FROM kernel_samples", &[]).await
    }

    /// The datasets of the profiles `profile_ids` (a `SELECT profile_id …` with `binds` as ?1, ?2, …) selects, by
    /// name: a profile's `dataset` label (the bundled measurements carry one), else `upload <id> (<format>)`. At
    /// most [`MAX_DATASETS`] names; a longer list ends with `…`.
    async fn datasets_of(&self, profile_ids: &str, binds: &[&str]) -> Result<Vec<String>, StoreError> {
        let sql = format!(
            "SELECT DISTINCT COALESCE({}, 'upload ' || id || ' (' || format || ')') AS d \
             FROM profiles WHERE id IN ({profile_ids}) ORDER BY d LIMIT {}",
            self.engine().json_text("labels", "dataset"),
            MAX_DATASETS + 1
        );
        let mut q = sqlx::query_scalar::<_, String>(&sql);
        for b in binds {
            q = q.bind(*b);
        }
        let mut names = q.fetch_all(self.pool()).await?;
        if names.len() > MAX_DATASETS {
            names.truncate(MAX_DATASETS);
            names.push("…".into());
        }
        Ok(names)
    }

    /// The profile stored from bytes with this SHA-256 (hex), if any.
    pub async fn profile_by_sha256(&self, sha256: &str) -> Result<Option<ProfileRecord>, StoreError> {
        let row = sqlx::query(&format!("SELECT {PROFILE_COLUMNS} FROM profiles WHERE sha256 = $1"))
            .bind(sha256)
            .fetch_optional(self.pool())
            .await?;
        row.as_ref().map(decode_profile).transpose()
    }

    /// Profiles, newest first, and the total count.
    pub async fn list_profiles(&self, limit: u32, offset: u64) -> Result<(Vec<ProfileRecord>, u64), StoreError> {
        let rows = sqlx::query(&format!(
            "SELECT {PROFILE_COLUMNS} FROM profiles ORDER BY created_at DESC, id LIMIT $1 OFFSET $2"
        ))
        .bind(limit as i64)
        .bind(offset as i64)
        .fetch_all(self.pool())
        .await?;
        let total: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM profiles").fetch_one(self.pool()).await?;
        Ok((rows.iter().map(decode_profile).collect::<Result<_, _>>()?, total as u64))
    }

    /// One profile. Errors: [`StoreError::NotFound`].
    pub async fn get_profile(&self, id: &str) -> Result<ProfileRecord, StoreError> {
        let row = sqlx::query(&format!("SELECT {PROFILE_COLUMNS} FROM profiles WHERE id = $1"))
            .bind(id)
            .fetch_optional(self.pool())
            .await?
            .ok_or_else(|| StoreError::NotFound(format!("profile {id:?}")))?;
        decode_profile(&row)
    }

    /// The raw bytes of a profile, decompressed. Errors: [`StoreError::NotFound`].
    pub async fn profile_raw(&self, id: &str) -> Result<Vec<u8>, StoreError> {
        let blob: Vec<u8> = sqlx::query_scalar("SELECT raw_gzip FROM profiles WHERE id = $1")
            .bind(id)
            .fetch_optional(self.pool())
            .await?
            .ok_or_else(|| StoreError::NotFound(format!("profile {id:?}")))?;
        let mut out = Vec::new();
        flate2::read::GzDecoder::new(&blob[..])
            .read_to_end(&mut out)
            .map_err(|e| StoreError::Corrupt(format!("profile {id}: {e}")))?;
        Ok(out)
    }

    /// A page of a profile's samples (operator, then communication, kernel and timer samples, each by id), and
    /// the total. Errors: [`StoreError::NotFound`] for an unknown profile.
    pub async fn profile_samples(
        &self,
        id: &str,
        limit: u32,
        offset: u64,
    ) -> Result<(Vec<SampleRow>, u64), StoreError> {
        let profile = self.get_profile(id).await?;
        let rows = sqlx::query(&samples_sql(self.engine()))
            .bind(id)
            .bind(limit as i64)
            .bind(offset as i64)
            .fetch_all(self.pool())
            .await?;
        let mut out = Vec::with_capacity(rows.len());
        for r in rows {
            let kind: String = r.try_get("kind")?;
            let data: String = r.try_get("data")?;
            out.push(SampleRow {
                kind: match kind.as_str() {
                    "op" => "op",
                    "comm" => "comm",
                    "timer" => "timer",
                    _ => "kernel",
                },
                id: r.try_get("sid")?,
                data: serde_json::from_str(&data).map_err(|e| StoreError::Corrupt(e.to_string()))?,
            });
        }
        Ok((out, profile.samples))
    }

    /// Operator-sample counts per (op, phase, dtype, engine, gpu), `engine` as stored (vllm, sglang, trtllm or ''
    /// for engine-neutral samples).
    pub async fn op_sample_counts(&self) -> Result<Vec<OpCount>, StoreError> {
        let rows = sqlx::query(
            "SELECT op, phase, dtype, engine, gpu, COUNT(*) AS n FROM op_samples \
             GROUP BY op, phase, dtype, engine, gpu ORDER BY 1, 2, 3, 4, 5",
        )
        .fetch_all(self.pool())
        .await?;
        rows.iter()
            .map(|r| {
                Ok(OpCount {
                    op: r.try_get("op")?,
                    phase: r.try_get("phase")?,
                    dtype: r.try_get("dtype")?,
                    engine: r.try_get("engine")?,
                    gpu: r.try_get("gpu")?,
                    samples: r.try_get::<i64, _>("n")? as u64,
                })
            })
            .collect()
    }

    /// Every operator sample of (op, phase, dtype) measured by one of `engines` (the `engine` column's values, ''
    /// for engine-neutral samples), for training.
    pub async fn op_rows(
        &self,
        op: &str,
        phase: &str,
        dtype: &str,
        engines: &[&str],
    ) -> Result<Vec<OpRow>, StoreError> {
        let sql = format!(
            "SELECT gpu, d0, d1, d2, d3, d4, time_us, split_key, kernel_source, compute_dtype FROM op_samples \
             WHERE op = $1 AND phase = $2 AND dtype = $3 AND engine IN ({}) ORDER BY id",
            placeholders(4, engines.len())
        );
        let mut q = sqlx::query(&sql).bind(op).bind(phase).bind(dtype);
        for e in engines {
            q = q.bind(*e);
        }
        let rows = q.fetch_all(self.pool()).await?;
        rows.iter()
            .map(|r| {
                Ok(OpRow {
                    gpu: r.try_get("gpu")?,
                    dims: [
                        r.try_get::<i64, _>("d0")? as u64,
                        r.try_get::<i64, _>("d1")? as u64,
                        r.try_get::<i64, _>("d2")? as u64,
                        r.try_get::<i64, _>("d3")? as u64,
                        r.try_get::<i64, _>("d4")? as u64,
                    ],
                    time_us: r.try_get("time_us")?,
                    split_key: r.try_get::<i64, _>("split_key")? as u64,
                    kernel_source: r.try_get("kernel_source")?,
                    compute_dtype: r.try_get("compute_dtype")?,
                })
            })
            .collect()
    }
}

/// `$first, $first+1, …` for `n` binds (at least one: an empty list binds nothing a row can equal).
fn placeholders(first: usize, n: usize) -> String {
    if n == 0 {
        return "NULL".into();
    }
    (first..first + n).map(|i| format!("${i}")).collect::<Vec<_>>().join(", ")
}

/// Operator samples of one (op, phase, dtype, engine, gpu) ([`Store::op_sample_counts`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpCount {
    pub op: String,
    pub phase: String,
    pub dtype: String,
    /// vllm, sglang, trtllm, or '' for engine-neutral samples.
    pub engine: String,
    pub gpu: String,
    pub samples: u64,
}

/// The query of [`Store::profile_samples`]: every sample of profile `$1` as (kind, sid, data) with `data` its JSON
/// text, by kind and id, `$2` rows from `$3`. SQLite's JSON functions; PostgreSQL's equivalents.
fn samples_sql(engine: super::Engine) -> String {
    let sqlite = "SELECT kind, sid, data FROM (
                SELECT 'op' AS kind, 0 AS ord, id AS sid, json_object('op', op, 'phase', phase, 'dtype', dtype,
                    'gpu', gpu, 'dims', json_array(d0, d1, d2, d3, d4), 'time_us', time_us,
                    'attributes', json(attributes)) AS data
                FROM op_samples WHERE profile_id = $1
                UNION ALL
                SELECT 'comm', 1, id, json_object('collective', collective, 'bytes', bytes, 'ranks', ranks,
                    'nodes', nodes, 'gpus_per_node', gpus_per_node, 'time_us', time_us, 'algbw_gbs', algbw_gbs,
                    'busbw_gbs', busbw_gbs, 'dtype', dtype, 'system', system, 'attributes', json(attributes))
                FROM comm_samples WHERE profile_id = $1
                UNION ALL
                SELECT 'kernel', 2, id, json_object('name', name, 'gpu', gpu, 'duration_us', duration_us,
                    'grid', json(grid), 'block', json(block), 'metrics', json(metrics),
                    'attributes', json(attributes))
                FROM kernel_samples WHERE profile_id = $1
                UNION ALL
                SELECT 'timer', 3, id, json_object('name', name, 'group', grp, 'rank', rank, 'thread', thread,
                    'calls', calls, 'exclusive_us', exclusive_us, 'inclusive_us', inclusive_us,
                    'attributes', json(attributes))
                FROM timer_samples WHERE profile_id = $1
             ) ORDER BY ord, sid LIMIT $2 OFFSET $3";
    match engine {
        super::Engine::Sqlite => sqlite.to_string(),
        super::Engine::Postgres => {
            let mut pg = sqlite
                .replace("SELECT kind, sid, data FROM", "SELECT kind, sid, data::text AS data FROM")
                .replace(") ORDER BY ord", ") AS s ORDER BY ord")
                .replace("json_object(", "json_build_object(")
                .replace("json_array(", "json_build_array(");
            for c in ["attributes", "grid", "block", "metrics"] {
                pg = pg.replace(&format!("json({c})"), &format!("{c}::json"));
            }
            pg
        }
    }
}

/// Inserts a profile — its compressed raw bytes (`raw_gzip`, a gzip stream of `p.raw`), its row and every sample —
/// inside `tx`, or finds the identical earlier upload (nothing written). The caller commits. `written` hears the
/// samples written so far, a statement at a time.
///
/// On PostgreSQL, replicas storing the same bytes at once are serialized by a transaction-scoped advisory lock on
/// the hash: the second waits for the first to commit, then finds its profile (one profile; both are answered
/// with it). SQLite's `BEGIN IMMEDIATE` already admits one writer.
pub(crate) async fn insert_profile_in(
    tx: &mut sqlx::Transaction<'_, sqlx::Any>,
    engine: super::Engine,
    p: &NewProfile<'_>,
    raw_gzip: Vec<u8>,
    samples: &SampleBatch,
    written: &(dyn Fn(u64) + Sync),
) -> Result<Stored, StoreError> {
    let id: String = p.sha256.chars().take(16).collect();
    if engine == super::Engine::Postgres {
        sqlx::query("SELECT pg_advisory_xact_lock($1)")
            .bind(super::replicas::upload_lock(&p.sha256))
            .execute(&mut **tx)
            .await?;
    }
    let existing = sqlx::query(&format!("SELECT {PROFILE_COLUMNS} FROM profiles WHERE sha256 = $1"))
        .bind(&p.sha256)
        .fetch_optional(&mut **tx)
        .await?;
    if let Some(row) = existing {
        return Ok(Stored::Duplicate(decode_profile(&row)?));
    }
    sqlx::query(
        "INSERT INTO profiles (id, sha256, format, system, gpu, labels, raw_gzip, raw_bytes, samples, rejected) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)",
    )
    .bind(&id)
    .bind(&p.sha256)
    .bind(&p.format)
    .bind(&p.system)
    .bind(&p.gpu)
    .bind(json(&p.labels)?)
    .bind(raw_gzip)
    .bind(p.raw.len() as i64)
    .bind(samples.len() as i64)
    .bind(json(&p.rejected)?)
    .execute(&mut **tx)
    .await?;
    let sql = |chunk: usize| {
        super::values_sql(
            engine,
            "INSERT INTO op_samples (profile_id, op, phase, dtype, gpu, d0, d1, d2, d3, d4, time_us, attributes, \
             split_key, engine, kernel_source, compute_dtype)",
            16,
            chunk,
        )
    };
    for chunk in samples.ops.chunks(BATCH) {
        let sql = sql(chunk.len());
        let mut q = sqlx::query(&sql);
        for (s, key) in chunk {
            q = q
                .bind(&id)
                .bind(s.op.as_str())
                .bind(s.phase.as_str())
                .bind(s.dtype.as_str())
                .bind(&s.gpu)
                .bind(s.dims[0] as i64)
                .bind(s.dims[1] as i64)
                .bind(s.dims[2] as i64)
                .bind(s.dims[3] as i64)
                .bind(s.dims[4] as i64)
                .bind(s.time_us)
                .bind(json(&s.attributes)?)
                .bind(*key as i64);
            let (engine, kernel, compute) = engine_columns(&s.attributes);
            q = q.bind(engine).bind(kernel).bind(compute);
        }
        q.execute(&mut **tx).await?;
        written(chunk.len() as u64);
    }
    for chunk in samples.comms.chunks(BATCH) {
        let sql = super::values_sql(
            engine,
            "INSERT INTO comm_samples (profile_id, system, collective, bytes, ranks, nodes, gpus_per_node, \
             time_us, algbw_gbs, busbw_gbs, dtype, attributes)",
            12,
            chunk.len(),
        );
        let mut q = sqlx::query(&sql);
        for s in chunk {
            q = q
                .bind(&id)
                .bind(&p.system)
                .bind(s.collective.as_str())
                .bind(s.bytes as i64)
                .bind(s.ranks as i64)
                .bind(s.nodes.map(|v| v as i64))
                .bind(s.gpus_per_node.map(|v| v as i64))
                .bind(s.time_us)
                .bind(s.algbw_gbs)
                .bind(s.busbw_gbs)
                .bind(&s.dtype)
                .bind(json(&s.attributes)?);
        }
        q.execute(&mut **tx).await?;
        written(chunk.len() as u64);
    }
    for chunk in samples.kernels.chunks(BATCH) {
        let sql = super::values_sql(
            engine,
            "INSERT INTO kernel_samples (profile_id, gpu, name, duration_us, grid, block, metrics, attributes)",
            8,
            chunk.len(),
        );
        let mut q = sqlx::query(&sql);
        for s in chunk {
            q = q
                .bind(&id)
                .bind(&s.gpu)
                .bind(&s.name)
                .bind(s.duration_us)
                .bind(s.grid.map(|g| json(&g)).transpose()?)
                .bind(s.block.map(|g| json(&g)).transpose()?)
                .bind(json(&s.metrics)?)
                .bind(json(&s.attributes)?);
        }
        q.execute(&mut **tx).await?;
        written(chunk.len() as u64);
    }
    for chunk in samples.timers.chunks(BATCH) {
        let sql = super::values_sql(
            engine,
            "INSERT INTO timer_samples (profile_id, name, grp, rank, thread, calls, exclusive_us, inclusive_us, \
             attributes)",
            9,
            chunk.len(),
        );
        let mut q = sqlx::query(&sql);
        for s in chunk {
            q = q
                .bind(&id)
                .bind(&s.name)
                .bind(&s.group)
                .bind(s.rank.map(|v| v as i64))
                .bind(s.thread.map(|v| v as i64))
                .bind(s.calls)
                .bind(s.exclusive_us)
                .bind(s.inclusive_us)
                .bind(json(&s.attributes)?);
        }
        q.execute(&mut **tx).await?;
        written(chunk.len() as u64);
    }
    let row = sqlx::query(&format!("SELECT {PROFILE_COLUMNS} FROM profiles WHERE id = $1"))
        .bind(&id)
        .fetch_one(&mut **tx)
        .await?;
    Ok(Stored::Created(decode_profile(&row)?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::op::Collective;
    use crate::store::jobs::JobState;

    fn upload(raw: &[u8]) -> NewProfile<'_> {
        NewProfile {
            sha256: hex::encode(raw).repeat(4),
            format: "nccl_tests".into(),
            system: Some("dgx-h100".into()),
            gpu: None,
            labels: BTreeMap::new(),
            raw,
            rejected: Vec::new(),
        }
    }

    #[tokio::test]
    async fn the_follow_up_job_commits_with_the_upload_and_not_for_a_duplicate() {
        for store in crate::store::testing::stores().await {
            let batch = SampleBatch {
                comms: vec![CommSample::timed(Collective::AllReduce, 1 << 20, 8, 50.0)],
                ..SampleBatch::default()
            };
            let job = FollowUpJob {
                kind: "calibrate".into(),
                params: serde_json::json!({"system": "dgx-h100"}),
                dedupe: true,
            };
            let first = store.insert_profile(&upload(b"run 1"), &batch, Some(&job)).await.unwrap();
            assert!(matches!(first, Stored::Created(_)));
            let queued = store.get_job(1).await.unwrap();
            assert_eq!(
                (queued.kind.as_str(), queued.state, &queued.params),
                ("calibrate", JobState::Queued, &job.params)
            );
            // The same bytes again: a duplicate, no second job; other bytes: deduplicated onto the queued job.
            let again = store.insert_profile(&upload(b"run 1"), &batch, Some(&job)).await.unwrap();
            assert!(matches!(again, Stored::Duplicate(_)));
            store.insert_profile(&upload(b"run 2"), &batch, Some(&job)).await.unwrap();
            assert!(
                matches!(store.get_job(2).await, Err(StoreError::NotFound(_))),
                "exactly one calibrate job: the duplicate queues none, the second upload reuses the queued one"
            );
        }
    }
}
