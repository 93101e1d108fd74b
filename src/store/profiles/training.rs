//! The operator samples training reads ([`Store::op_rows`], [`OpRow`]; counts per key, [`OpCount`]) and the
//! datasets a model's samples came from ([`Store::op_datasets`], at most [`MAX_DATASETS`] names).

use sqlx::Row;

use crate::op::Dims;
use crate::store::{Store, StoreError};

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

/// Most dataset names a model version's provenance lists.
pub const MAX_DATASETS: usize = 25;

impl Store {
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
