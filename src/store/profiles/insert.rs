//! Storing an upload ([`Store::insert_profile`], [`insert_profile_in`]): the compressed raw bytes, the profile row
//! and every sample in one transaction, or the identical earlier upload; and the columns an operator sample's
//! engine and kernel are stored in ([`engine_columns`]).

use std::io::Write;

use super::records::{decode_profile, NewProfile, SampleBatch, Stored, PROFILE_COLUMNS};
use crate::store::jobs::{create_job_in, FollowUpJob};
use crate::store::{Store, StoreError};

/// The columns an operator sample's engine and kernel are stored in, from its attributes (migration
/// `0011_op_sample_engine.sql`): the engine's wire name or '' ([`crate::samples::kernel_family`]), the
/// `kernel_source` attribute or '', and the `attn_dtype` attribute as a perfcast precision name or ''.
pub fn engine_columns(attributes: &crate::samples::Attributes) -> (&'static str, String, &'static str) {
    let engine = crate::samples::kernel_family(attributes).map_or("", |f| f.as_str());
    let kernel = attributes.get("kernel_source").cloned().unwrap_or_default();
    let compute = crate::samples::compute_dtype(attributes).map_or("", |p| p.as_str());
    (engine, kernel, compute)
}

fn gzip(raw: &[u8]) -> Result<Vec<u8>, StoreError> {
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    enc.write_all(raw).and_then(|_| enc.finish()).map_err(|e| StoreError::Corrupt(format!("gzip: {e}")))
}

fn json<T: serde::Serialize>(v: &T) -> Result<String, StoreError> {
    serde_json::to_string(v).map_err(|e| StoreError::Corrupt(e.to_string()))
}

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
    engine: crate::store::Engine,
    p: &NewProfile<'_>,
    raw_gzip: Vec<u8>,
    samples: &SampleBatch,
    written: &(dyn Fn(u64) + Sync),
) -> Result<Stored, StoreError> {
    let id: String = p.sha256.chars().take(16).collect();
    if engine == crate::store::Engine::Postgres {
        sqlx::query("SELECT pg_advisory_xact_lock($1)")
            .bind(crate::store::replicas::upload_lock(&p.sha256))
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
        crate::store::values_sql(
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
        let sql = crate::store::values_sql(
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
        let sql = crate::store::values_sql(
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
        let sql = crate::store::values_sql(
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
    use std::collections::BTreeMap;

    use super::*;
    use crate::op::Collective;
    use crate::samples::CommSample;
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
