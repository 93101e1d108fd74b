//! The `regressors` table: every model version, exactly one active per key.

use serde::{Deserialize, Serialize};
use sqlx::Row;

use super::{Store, StoreError};
use crate::learn::fit::ValidationPoint;
use crate::learn::FitSummary;

/// Where a model version came from (the `provenance` column).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct Provenance {
    /// Shipped with perfcast: trained by `perfcast models bundle` on the measurements bundled in the binary, and
    /// installed at the database's first start. False: trained in this database.
    pub bundled: bool,
    /// The bundle's version (a hash of its contents), for bundled versions.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bundle: Option<String>,
    /// The datasets of its training rows: a bundled dataset's name (`aiconfigurator`, `neusight`, …), or
    /// `upload <profile id> (<format>)` for an upload without a `dataset` label.
    pub datasets: Vec<String>,
    /// Git commit of the perfcast code that trained it, when known (bundled versions: the commit the bundle was
    /// built at; here: the `PERFCAST_GIT_COMMIT` the binary was built with, if any).
    pub commit: Option<String>,
    /// perfcast version (Cargo package version) of the code that trained it.
    pub perfcast_version: Option<String>,
    /// When it was trained (RFC 3339, UTC).
    pub trained_at: Option<String>,
}

/// A model version to store.
#[derive(Debug, Clone, PartialEq)]
pub struct NewRegressor {
    pub key: String,
    pub family: String,
    /// `all` or a GPU name.
    pub scope: String,
    pub model: String,
    pub holdout_model: String,
    pub feature_names: Vec<String>,
    /// The fit's configuration, accuracy and training set (one column each).
    pub fit: FitSummary,
    /// Why it was or was not activated.
    pub promotion: serde_json::Value,
    /// Where it came from.
    pub provenance: Provenance,
    /// Activate it (deactivating the key's previous active version).
    pub activate: bool,
    /// The validation rows with the hold-out predictions, for the accuracy plot (already thinned by the fit; stored
    /// as f32 triples, about 35 bytes a row).
    pub validation_points: Vec<ValidationPoint>,
}

/// A stored model version (model texts only where asked for).
#[derive(Debug, Clone, PartialEq)]
pub struct RegressorRecord {
    pub id: i64,
    pub key: String,
    pub family: String,
    pub scope: String,
    pub version: i64,
    pub active: bool,
    pub model: Option<String>,
    pub feature_names: Vec<String>,
    /// The fit's configuration, accuracy and training set.
    pub fit: FitSummary,
    pub promotion: serde_json::Value,
    pub provenance: Provenance,
    pub job_id: Option<i64>,
    pub created_at: String,
}

const META: &str = "id, key, family, scope, version, active, feature_names, candidate, candidates, validation_mape, \
    validation_signed, analytic_validation_mape, train_rows, validation_rows, samples, summary, importance, promotion, \
    provenance, job_id, created_at";

fn decode(r: &sqlx::any::AnyRow, with_model: bool) -> Result<RegressorRecord, StoreError> {
    let j = |c: &str| -> Result<serde_json::Value, StoreError> {
        let s: String = r.try_get(c)?;
        serde_json::from_str(&s).map_err(|e| StoreError::Corrupt(format!("regressor {c}: {e}")))
    };
    let names: Vec<String> =
        serde_json::from_value(j("feature_names")?).map_err(|e| StoreError::Corrupt(e.to_string()))?;
    Ok(RegressorRecord {
        id: r.try_get("id")?,
        key: r.try_get("key")?,
        family: r.try_get("family")?,
        scope: r.try_get("scope")?,
        version: r.try_get("version")?,
        active: r.try_get::<i64, _>("active")? != 0,
        model: if with_model { Some(r.try_get("model")?) } else { None },
        feature_names: names,
        fit: FitSummary {
            candidate: j("candidate")?,
            candidates: j("candidates")?,
            validation_mape: r.try_get("validation_mape")?,
            validation_signed: r.try_get("validation_signed")?,
            analytic_validation_mape: r.try_get("analytic_validation_mape")?,
            train_rows: r.try_get::<i64, _>("train_rows")? as u64,
            validation_rows: r.try_get::<i64, _>("validation_rows")? as u64,
            samples: r.try_get::<i64, _>("samples")? as u64,
            summary: j("summary")?,
            importance: j("importance")?,
        },
        promotion: j("promotion")?,
        provenance: serde_json::from_value(j("provenance")?)
            .map_err(|e| StoreError::Corrupt(format!("regressor provenance: {e}")))?,
        job_id: r.try_get("job_id")?,
        created_at: r.try_get("created_at")?,
    })
}

/// `[[measured_us, analytic_us, predicted_us], ...]` at f32 precision (plenty for a plot, half the text of f64).
fn encode_points(points: &[ValidationPoint]) -> String {
    let rows: Vec<[f32; 3]> =
        points.iter().map(|p| [p.measured_us as f32, p.analytic_us as f32, p.predicted_us as f32]).collect();
    serde_json::to_string(&rows).unwrap_or_else(|_| "[]".into()) // ok: finite f32 arrays always serialize
}

fn decode_points(text: &str) -> Result<Vec<ValidationPoint>, StoreError> {
    let rows: Vec<[f64; 3]> =
        serde_json::from_str(text).map_err(|e| StoreError::Corrupt(format!("regressor validation points: {e}")))?;
    Ok(rows.into_iter().map(|[m, a, p]| ValidationPoint { measured_us: m, analytic_us: a, predicted_us: p }).collect())
}

impl Store {
    /// Stores new versions (each the key's next version number) and applies their activation, all in one
    /// transaction: a crash leaves either all of them or none. Returns the stored records (without model texts).
    pub async fn insert_regressors(
        &self,
        job_id: Option<i64>,
        new: &[NewRegressor],
    ) -> Result<Vec<RegressorRecord>, StoreError> {
        let mut tx = self.begin().await?;
        let out = insert_regressors_in(&mut tx, job_id, new).await?;
        tx.commit().await?;
        Ok(out)
    }

    /// Every active version with its model text (what the registry loads).
    pub async fn active_regressors(&self) -> Result<Vec<RegressorRecord>, StoreError> {
        let rows = sqlx::query(&format!("SELECT {META}, model FROM regressors WHERE active = 1 ORDER BY key"))
            .fetch_all(self.pool())
            .await?;
        rows.iter().map(|r| decode(r, true)).collect()
    }

    /// Every active version with its model and hold-out model texts (what `perfcast models bundle` exports).
    pub async fn active_regressors_with_holdout(&self) -> Result<Vec<(RegressorRecord, String)>, StoreError> {
        let rows =
            sqlx::query(&format!("SELECT {META}, model, holdout_model FROM regressors WHERE active = 1 ORDER BY key"))
                .fetch_all(self.pool())
                .await?;
        rows.iter().map(|r| Ok((decode(r, true)?, r.try_get("holdout_model")?))).collect()
    }

    /// The active version's hold-out model text of `key` and its version, if the key has an active version.
    pub async fn active_holdout(&self, key: &str) -> Result<Option<(i64, String)>, StoreError> {
        let r = sqlx::query("SELECT version, holdout_model FROM regressors WHERE key = $1 AND active = 1")
            .bind(key)
            .fetch_optional(self.pool())
            .await?;
        r.map(|r| Ok((r.try_get("version")?, r.try_get("holdout_model")?))).transpose()
    }

    /// The newest version's sample count of `key` (0 when never trained).
    pub async fn latest_trained_samples(&self, key: &str) -> Result<u64, StoreError> {
        let n: Option<i64> =
            sqlx::query_scalar("SELECT samples FROM regressors WHERE key = $1 ORDER BY version DESC LIMIT 1")
                .bind(key)
                .fetch_optional(self.pool())
                .await?;
        Ok(n.unwrap_or(0) as u64)
    }

    /// All versions of every key (without model texts), by key and version.
    pub async fn list_regressors(&self) -> Result<Vec<RegressorRecord>, StoreError> {
        let rows =
            sqlx::query(&format!("SELECT {META} FROM regressors ORDER BY key, version")).fetch_all(self.pool()).await?;
        rows.iter().map(|r| decode(r, false)).collect()
    }

    /// All versions of `key`, newest first. Errors: [`StoreError::NotFound`] when the key has none.
    pub async fn regressor_versions(&self, key: &str) -> Result<Vec<RegressorRecord>, StoreError> {
        let rows = sqlx::query(&format!("SELECT {META} FROM regressors WHERE key = $1 ORDER BY version DESC"))
            .bind(key)
            .fetch_all(self.pool())
            .await?;
        if rows.is_empty() {
            return Err(StoreError::NotFound(format!("regressor {key:?}")));
        }
        rows.iter().map(|r| decode(r, false)).collect()
    }

    /// The stored validation points of version `regressor_id` (a [`RegressorRecord::id`]); `None` for a version
    /// trained before they were stored.
    pub async fn validation_points(&self, regressor_id: i64) -> Result<Option<Vec<ValidationPoint>>, StoreError> {
        let text: Option<String> =
            sqlx::query_scalar("SELECT points FROM regressor_validation WHERE regressor_id = $1")
                .bind(regressor_id)
                .fetch_optional(self.pool())
                .await?;
        text.map(|t| decode_points(&t)).transpose()
    }
}

/// [`Store::insert_regressors`] inside `tx` (the caller commits).
pub(crate) async fn insert_regressors_in(
    tx: &mut sqlx::Transaction<'_, sqlx::Any>,
    job_id: Option<i64>,
    new: &[NewRegressor],
) -> Result<Vec<RegressorRecord>, StoreError> {
    let mut out = Vec::with_capacity(new.len());
    let corrupt = |e: serde_json::Error| StoreError::Corrupt(e.to_string());
    for n in new {
        let version: i64 = sqlx::query_scalar("SELECT COALESCE(MAX(version), 0) + 1 FROM regressors WHERE key = $1")
            .bind(&n.key)
            .fetch_one(&mut **tx)
            .await?;
        if n.activate {
            sqlx::query("UPDATE regressors SET active = 0 WHERE key = $1 AND active = 1")
                .bind(&n.key)
                .execute(&mut **tx)
                .await?;
        }
        let s = |v: &serde_json::Value| v.to_string();
        let r = sqlx::query(&format!(
            "INSERT INTO regressors (key, family, scope, version, active, model, holdout_model, feature_names,
                candidate, candidates, validation_mape, validation_signed, analytic_validation_mape, train_rows,
                validation_rows, samples, summary, importance, promotion, provenance, job_id)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21) RETURNING {META}"
        ))
        .bind(&n.key)
        .bind(&n.family)
        .bind(&n.scope)
        .bind(version)
        .bind(n.activate as i64)
        .bind(&n.model)
        .bind(&n.holdout_model)
        .bind(serde_json::to_string(&n.feature_names).map_err(corrupt)?)
        .bind(s(&n.fit.candidate))
        .bind(s(&n.fit.candidates))
        .bind(n.fit.validation_mape)
        .bind(n.fit.validation_signed)
        .bind(n.fit.analytic_validation_mape)
        .bind(n.fit.train_rows as i64)
        .bind(n.fit.validation_rows as i64)
        .bind(n.fit.samples as i64)
        .bind(s(&n.fit.summary))
        .bind(s(&n.fit.importance))
        .bind(s(&n.promotion))
        .bind(serde_json::to_string(&n.provenance).map_err(corrupt)?)
        .bind(job_id)
        .fetch_one(&mut **tx)
        .await?;
        let rec = decode(&r, false)?;
        // Bundled versions ship no hold-out predictions: their plot answers 409 rather than an empty chart.
        if !n.validation_points.is_empty() {
            sqlx::query("INSERT INTO regressor_validation (regressor_id, points) VALUES ($1, $2)")
                .bind(rec.id)
                .bind(encode_points(&n.validation_points))
                .execute(&mut **tx)
                .await?;
        }
        out.push(rec);
    }
    Ok(out)
}
