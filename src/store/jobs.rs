//! The `jobs` table: background work that survives crashes.

use sqlx::Row;

use super::{Store, StoreError};

/// A job's lifecycle state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JobState {
    Queued,
    Running,
    Succeeded,
    Failed,
}

impl JobState {
    /// The stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            JobState::Queued => "queued",
            JobState::Running => "running",
            JobState::Succeeded => "succeeded",
            JobState::Failed => "failed",
        }
    }

    fn parse(s: &str) -> Result<JobState, StoreError> {
        Ok(match s {
            "queued" => JobState::Queued,
            "running" => JobState::Running,
            "succeeded" => JobState::Succeeded,
            "failed" => JobState::Failed,
            other => return Err(StoreError::Corrupt(format!("job state {other:?}"))),
        })
    }
}

/// A stored job.
#[derive(Debug, Clone, PartialEq)]
pub struct JobRecord {
    pub id: i64,
    pub kind: String,
    pub state: JobState,
    /// 0–1.
    pub progress: f64,
    pub message: String,
    pub params: serde_json::Value,
    pub result: Option<serde_json::Value>,
    /// Times the job was started (> 1 after an interrupted run).
    pub attempts: i64,
    pub created_at: String,
    pub started_at: Option<String>,
    pub finished_at: Option<String>,
}

const COLUMNS: &str =
    "id, kind, state, progress, message, params, result, attempts, created_at, started_at, finished_at";

fn decode(r: &sqlx::any::AnyRow) -> Result<JobRecord, StoreError> {
    let params: String = r.try_get("params")?;
    let result: Option<String> = r.try_get("result")?;
    let parse = |s: &str| serde_json::from_str(s).map_err(|e| StoreError::Corrupt(e.to_string()));
    Ok(JobRecord {
        id: r.try_get("id")?,
        kind: r.try_get("kind")?,
        state: JobState::parse(&r.try_get::<String, _>("state")?)?,
        progress: r.try_get("progress")?,
        message: r.try_get("message")?,
        params: parse(&params)?,
        result: result.as_deref().map(parse).transpose()?,
        attempts: r.try_get("attempts")?,
        created_at: r.try_get("created_at")?,
        started_at: r.try_get("started_at")?,
        finished_at: r.try_get("finished_at")?,
    })
}

/// How long a claim made by [`Store::claim_job`] (without a runner's lease) holds: a day.
const UNLEASED_S: i64 = 86_400;

/// The owner [`Store::claim_job`] claims for (a caller running the job at once in its own process).
pub const LOCAL_OWNER: &str = "local";

impl Store {
    /// Queues a job of `kind` with `params`, unless `dedupe` and a queued job of that kind with the same params
    /// exists (then that one is returned).
    pub async fn create_job(
        &self,
        kind: &str,
        params: &serde_json::Value,
        dedupe: bool,
    ) -> Result<JobRecord, StoreError> {
        let mut tx = self.begin().await?;
        let r = create_job_in(&mut tx, self.engine(), kind, params, dedupe).await?;
        tx.commit().await?;
        Ok(r)
    }

    /// One job. Errors: [`StoreError::NotFound`].
    pub async fn get_job(&self, id: i64) -> Result<JobRecord, StoreError> {
        let r = sqlx::query(&format!("SELECT {COLUMNS} FROM jobs WHERE id = $1"))
            .bind(id)
            .fetch_optional(self.pool())
            .await?
            .ok_or_else(|| StoreError::NotFound(format!("job {id}")))?;
        decode(&r)
    }

    /// Marks the oldest queued job of one of `kinds` running (attempts + 1) and returns it, for a caller that
    /// runs it at once in this process (no heartbeat: the claim holds a day; its owner is [`LOCAL_OWNER`]).
    pub async fn claim_job(&self, kinds: &[&str]) -> Result<Option<JobRecord>, StoreError> {
        self.claim_job_for(kinds, LOCAL_OWNER, UNLEASED_S).await
    }

    /// Claims for `owner` (a replica) the oldest job of one of `kinds` that is queued, or running under an expired
    /// lease (its replica died): marks it running with attempts + 1 and a lease of `lease_s` seconds, which the
    /// owner renews ([`Store::renew_job_lease`]). Exactly one claimer gets a job: `BEGIN IMMEDIATE` on SQLite,
    /// `FOR UPDATE SKIP LOCKED` on PostgreSQL (concurrent replicas take different jobs without waiting).
    pub async fn claim_job_for(
        &self,
        kinds: &[&str],
        owner: &str,
        lease_s: i64,
    ) -> Result<Option<JobRecord>, StoreError> {
        if kinds.is_empty() {
            return Ok(None);
        }
        let e = self.engine();
        let (now, until) = (e.now(), e.now_plus(lease_s));
        let kinds_in = (0..kinds.len()).map(|i| format!("${}", i + 2)).collect::<Vec<_>>().join(", ");
        let sql = format!(
            "UPDATE jobs SET state = 'running', attempts = attempts + 1, started_at = {now}, progress = 0,
                 message = CASE WHEN state = 'running' THEN 're-run: the replica running it stopped renewing its lease'
                           ELSE 'started' END,
                 owner = $1, lease_until = {until}
             WHERE id = (SELECT id FROM jobs
                         WHERE (state = 'queued' OR (state = 'running' AND lease_until < {now}))
                           AND kind IN ({kinds_in})
                         ORDER BY id LIMIT 1{})
             RETURNING {COLUMNS}",
            e.skip_locked()
        );
        let mut tx = self.begin().await?;
        let mut q = sqlx::query(&sql).bind(owner);
        for k in kinds {
            q = q.bind(*k);
        }
        let r = q.fetch_optional(&mut *tx).await?;
        tx.commit().await?;
        r.as_ref().map(decode).transpose()
    }

    /// Extends `owner`'s lease on running job `id` by `lease_s` seconds from now (the runner's heartbeat). False
    /// when the job is no longer `owner`'s (it finished, or another replica took it over after the lease expired).
    pub async fn renew_job_lease(&self, id: i64, owner: &str, lease_s: i64) -> Result<bool, StoreError> {
        let n = sqlx::query(&format!(
            "UPDATE jobs SET lease_until = {} WHERE id = $1 AND owner = $2 AND state = 'running'",
            self.engine().now_plus(lease_s)
        ))
        .bind(id)
        .bind(owner)
        .execute(self.pool())
        .await?
        .rows_affected();
        Ok(n > 0)
    }

    /// Records progress (0–1) and a message of a running job.
    pub async fn job_progress(&self, id: i64, progress: f64, message: &str) -> Result<(), StoreError> {
        sqlx::query("UPDATE jobs SET progress = $1, message = $2 WHERE id = $3 AND state = 'running'")
            .bind(progress.clamp(0.0, 1.0))
            .bind(message)
            .bind(id)
            .execute(self.pool())
            .await?;
        Ok(())
    }

    /// Records the end of running job `id` for `owner` (the replica that claimed it): its state (`succeeded` when
    /// `ok`, else `failed`), message and result. Only the current owner's finish counts: when the job is no longer
    /// `owner`'s running job — another replica claimed it again after `owner`'s lease expired, or a restart queued
    /// it again — nothing is written and the answer is false, so the current owner's result stands.
    pub async fn finish_job(
        &self,
        id: i64,
        owner: &str,
        ok: bool,
        message: &str,
        result: &serde_json::Value,
    ) -> Result<bool, StoreError> {
        let n = sqlx::query(&format!(
            "UPDATE jobs SET state = $1, progress = CASE WHEN $2 THEN 1 ELSE progress END, message = $3, result = $4,
                 finished_at = {}, lease_until = NULL
             WHERE id = $5 AND owner = $6 AND state = 'running'",
            self.engine().now()
        ))
        .bind(if ok { "succeeded" } else { "failed" })
        .bind(ok)
        .bind(message)
        .bind(result.to_string())
        .bind(id)
        .bind(owner)
        .execute(self.pool())
        .await?
        .rows_affected();
        Ok(n > 0)
    }

    /// Queues again the jobs left `running` by a process that died; returns how many. On SQLite (one process per
    /// file) every running job; on PostgreSQL only those whose lease expired or that never had one, since other
    /// replicas may be running the rest.
    pub async fn requeue_interrupted_jobs(&self) -> Result<u64, StoreError> {
        let only_expired = match self.engine() {
            super::Engine::Sqlite => String::new(),
            super::Engine::Postgres => format!(" AND (lease_until IS NULL OR lease_until < {})", self.engine().now()),
        };
        let n = sqlx::query(&format!(
            "UPDATE jobs SET state = 'queued', owner = NULL, lease_until = NULL,
                 message = 'interrupted by a restart; queued again' WHERE state = 'running'{only_expired}"
        ))
        .execute(self.pool())
        .await?
        .rows_affected();
        Ok(n)
    }
}

/// A job to queue in the same transaction as another write (an upload and the calibration it calls for), so a
/// crash cannot commit the one without the other.
#[derive(Debug, Clone, PartialEq)]
pub struct FollowUpJob {
    /// Job kind (`calibrate`, …).
    pub kind: String,
    /// The job's parameters (JSON).
    pub params: serde_json::Value,
    /// Reuse a queued job of the same kind and parameters instead of adding one.
    pub dedupe: bool,
}

/// [`Store::create_job`] inside the caller's transaction `tx`.
pub(super) async fn create_job_in(
    tx: &mut sqlx::Transaction<'_, sqlx::Any>,
    engine: super::Engine,
    kind: &str,
    params: &serde_json::Value,
    dedupe: bool,
) -> Result<JobRecord, StoreError> {
    if dedupe {
        if let Some(r) = sqlx::query(&format!(
            "SELECT {COLUMNS} FROM jobs WHERE kind = $1 AND state = 'queued' AND {}
             ORDER BY id LIMIT 1",
            engine.json_equal("params", "$2")
        ))
        .bind(kind)
        .bind(params.to_string())
        .fetch_optional(&mut **tx)
        .await?
        {
            return decode(&r);
        }
    }
    let r =
        sqlx::query(&format!("INSERT INTO jobs (kind, state, params) VALUES ($1, 'queued', $2) RETURNING {COLUMNS}"))
            .bind(kind)
            .bind(params.to_string())
            .fetch_one(&mut **tx)
            .await?;
    decode(&r)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::JobState;
    use crate::store::testing::stores;

    /// Replica A claims a job under a 1 s lease and stalls; once the lease expired replica B claims it again. A's
    /// late finish must not overwrite the job (B still runs it), and B's finish is what the job ends with.
    #[tokio::test]
    async fn a_finish_by_a_replica_that_lost_its_lease_is_ignored() {
        for store in stores().await {
            let b = store.reopen().await;
            let job = store.create_job("calibrate", &json!({"system": "dgx-h100"}), false).await.unwrap();
            let claimed = store.claim_job_for(&["calibrate"], "replica-a", 1).await.unwrap().unwrap();
            assert_eq!((claimed.id, claimed.attempts), (job.id, 1));
            // The lease stores milliseconds: 2.1 s after a 1 s lease it has expired on either engine's clock.
            tokio::time::sleep(std::time::Duration::from_millis(2100)).await;
            let reclaimed = b.claim_job_for(&["calibrate"], "replica-b", 60).await.unwrap().unwrap();
            assert_eq!((reclaimed.id, reclaimed.attempts), (job.id, 2));

            let a_recorded =
                store.finish_job(job.id, "replica-a", false, "A's stale failure", &json!({"by": "a"})).await.unwrap();
            assert!(!a_recorded, "A no longer owns the job: its finish must be refused");
            let now = b.get_job(job.id).await.unwrap();
            assert_eq!((now.state, now.result, now.finished_at), (JobState::Running, None, None));
            assert_eq!(now.attempts, 2);

            let b_recorded = b.finish_job(job.id, "replica-b", true, "done by B", &json!({"by": "b"})).await.unwrap();
            assert!(b_recorded);
            let done = store.get_job(job.id).await.unwrap();
            assert_eq!(
                (done.state, done.message.as_str(), done.result),
                (JobState::Succeeded, "done by B", Some(json!({"by": "b"})))
            );
            assert_eq!(done.progress, 1.0);
            assert!(done.finished_at.is_some());
            // A finished job stays finished: neither a second finish by B nor one by A changes it.
            assert!(!b.finish_job(job.id, "replica-b", false, "again", &json!({})).await.unwrap());
            assert!(!store.finish_job(job.id, "replica-a", true, "late", &json!({"by": "a"})).await.unwrap());
            assert_eq!(store.get_job(job.id).await.unwrap().result, Some(json!({"by": "b"})));
        }
    }
}
