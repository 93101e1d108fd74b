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

fn decode(r: &sqlx::sqlite::SqliteRow) -> Result<JobRecord, StoreError> {
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

const NOW: &str = "strftime('%Y-%m-%dT%H:%M:%fZ', 'now')";

impl Store {
    /// Queues a job of `kind` with `params`, unless `dedupe` and a queued job of that kind with the same params
    /// exists (then that one is returned).
    pub async fn create_job(
        &self,
        kind: &str,
        params: &serde_json::Value,
        dedupe: bool,
    ) -> Result<JobRecord, StoreError> {
        let mut tx = self.pool().begin_with("BEGIN IMMEDIATE").await?;
        let r = create_job_in(&mut tx, kind, params, dedupe).await?;
        tx.commit().await?;
        Ok(r)
    }

    /// One job. Errors: [`StoreError::NotFound`].
    pub async fn get_job(&self, id: i64) -> Result<JobRecord, StoreError> {
        let r = sqlx::query(&format!("SELECT {COLUMNS} FROM jobs WHERE id = ?"))
            .bind(id)
            .fetch_optional(self.pool())
            .await?
            .ok_or_else(|| StoreError::NotFound(format!("job {id}")))?;
        decode(&r)
    }

    /// Marks the oldest queued job of one of `kinds` running (attempts + 1) and returns it.
    pub async fn claim_job(&self, kinds: &[&str]) -> Result<Option<JobRecord>, StoreError> {
        let mut tx = self.pool().begin_with("BEGIN IMMEDIATE").await?;
        let kinds_json = serde_json::to_string(kinds).map_err(|e| StoreError::Corrupt(e.to_string()))?;
        let r = sqlx::query(&format!(
            "UPDATE jobs SET state = 'running', attempts = attempts + 1, started_at = {NOW}, progress = 0,
                 message = 'started'
             WHERE id = (SELECT id FROM jobs WHERE state = 'queued' AND kind IN (SELECT value FROM json_each(?))
                         ORDER BY id LIMIT 1)
             RETURNING {COLUMNS}"
        ))
        .bind(kinds_json)
        .fetch_optional(&mut *tx)
        .await?;
        tx.commit().await?;
        r.as_ref().map(decode).transpose()
    }

    /// Records progress (0–1) and a message of a running job.
    pub async fn job_progress(&self, id: i64, progress: f64, message: &str) -> Result<(), StoreError> {
        sqlx::query("UPDATE jobs SET progress = ?, message = ? WHERE id = ? AND state = 'running'")
            .bind(progress.clamp(0.0, 1.0))
            .bind(message)
            .bind(id)
            .execute(self.pool())
            .await?;
        Ok(())
    }

    /// Finishes a job with its result.
    pub async fn finish_job(
        &self,
        id: i64,
        ok: bool,
        message: &str,
        result: &serde_json::Value,
    ) -> Result<(), StoreError> {
        sqlx::query(&format!(
            "UPDATE jobs SET state = ?, progress = CASE WHEN ? THEN 1 ELSE progress END, message = ?, result = ?,
                 finished_at = {NOW} WHERE id = ?"
        ))
        .bind(if ok { "succeeded" } else { "failed" })
        .bind(ok)
        .bind(message)
        .bind(result.to_string())
        .bind(id)
        .execute(self.pool())
        .await?;
        Ok(())
    }

    /// Queues again every job left `running` by a process that died; returns how many.
    pub async fn requeue_interrupted_jobs(&self) -> Result<u64, StoreError> {
        let n = sqlx::query(
            "UPDATE jobs SET state = 'queued', message = 'interrupted by a restart; queued again' WHERE state = 'running'",
        )
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
    tx: &mut sqlx::Transaction<'_, sqlx::Sqlite>,
    kind: &str,
    params: &serde_json::Value,
    dedupe: bool,
) -> Result<JobRecord, StoreError> {
    if dedupe {
        if let Some(r) = sqlx::query(&format!(
            "SELECT {COLUMNS} FROM jobs WHERE kind = ? AND state = 'queued' AND json(params) = json(?)
             ORDER BY id LIMIT 1"
        ))
        .bind(kind)
        .bind(params.to_string())
        .fetch_optional(&mut **tx)
        .await?
        {
            return decode(&r);
        }
    }
    let r = sqlx::query(&format!("INSERT INTO jobs (kind, state, params) VALUES (?, 'queued', ?) RETURNING {COLUMNS}"))
        .bind(kind)
        .bind(params.to_string())
        .fetch_one(&mut **tx)
        .await?;
    decode(&r)
}
