//! The `system_calibrations` table and the communication samples calibration reads.

use sqlx::Row;

use super::{Store, StoreError};
use crate::op::Collective;
use crate::samples::CommSample;

/// A stored calibration (the JSON of [`crate::comm::calibrated::SystemCalibration`]).
#[derive(Debug, Clone, PartialEq)]
pub struct StoredCalibration {
    pub system: String,
    pub calibration: serde_json::Value,
    pub samples: u64,
    pub created_at: String,
}

fn collective(name: &str) -> Option<Collective> {
    serde_json::from_value(serde_json::Value::String(name.to_string())).ok()
}

impl Store {
    /// Every communication sample stored for `system`.
    pub async fn comm_samples(&self, system: &str) -> Result<Vec<CommSample>, StoreError> {
        let rows = sqlx::query(
            "SELECT collective, bytes, ranks, nodes, gpus_per_node, time_us, algbw_gbs, busbw_gbs, dtype, attributes
             FROM comm_samples WHERE system = $1 ORDER BY id",
        )
        .bind(system)
        .fetch_all(self.pool())
        .await?;
        let mut out = Vec::with_capacity(rows.len());
        for r in rows {
            let name: String = r.try_get("collective")?;
            let Some(c) = collective(&name) else { continue };
            let attrs: String = r.try_get("attributes")?;
            out.push(CommSample {
                collective: c,
                bytes: r.try_get::<i64, _>("bytes")? as u64,
                ranks: r.try_get::<i64, _>("ranks")? as u32,
                nodes: r.try_get::<Option<i64>, _>("nodes")?.map(|v| v as u32),
                gpus_per_node: r.try_get::<Option<i64>, _>("gpus_per_node")?.map(|v| v as u32),
                time_us: r.try_get("time_us")?,
                algbw_gbs: r.try_get("algbw_gbs")?,
                busbw_gbs: r.try_get("busbw_gbs")?,
                dtype: r.try_get("dtype")?,
                attributes: serde_json::from_str(&attrs).unwrap_or_default(),
            });
        }
        Ok(out)
    }

    /// Systems with communication samples, and how many each has.
    pub async fn comm_sample_counts(&self) -> Result<Vec<(String, u64)>, StoreError> {
        let rows = sqlx::query(
            "SELECT system, COUNT(*) AS n FROM comm_samples WHERE system IS NOT NULL GROUP BY system ORDER BY system",
        )
        .fetch_all(self.pool())
        .await?;
        rows.iter().map(|r| Ok((r.try_get("system")?, r.try_get::<i64, _>("n")? as u64))).collect()
    }

    /// Stores (replaces) the calibration of `system`.
    pub async fn put_calibration(
        &self,
        system: &str,
        calibration: &serde_json::Value,
        samples: u64,
    ) -> Result<StoredCalibration, StoreError> {
        let mut tx = self.begin().await?;
        let r = sqlx::query(&format!(
            "INSERT INTO system_calibrations (system, calibration, samples) VALUES ($1, $2, $3)
             ON CONFLICT(system) DO UPDATE SET calibration = excluded.calibration, samples = excluded.samples,
                 created_at = {}
             RETURNING system, calibration, samples, created_at",
            self.engine().now()
        ))
        .bind(system)
        .bind(calibration.to_string())
        .bind(samples as i64)
        .fetch_one(&mut *tx)
        .await?;
        tx.commit().await?;
        self.note_system_change();
        decode(&r)
    }

    /// The calibration of `system`, if it was calibrated.
    pub async fn calibration(&self, system: &str) -> Result<Option<StoredCalibration>, StoreError> {
        let r =
            sqlx::query("SELECT system, calibration, samples, created_at FROM system_calibrations WHERE system = $1")
                .bind(system)
                .fetch_optional(self.pool())
                .await?;
        r.as_ref().map(decode).transpose()
    }
}

fn decode(r: &sqlx::any::AnyRow) -> Result<StoredCalibration, StoreError> {
    let c: String = r.try_get("calibration")?;
    Ok(StoredCalibration {
        system: r.try_get("system")?,
        calibration: serde_json::from_str(&c).map_err(|e| StoreError::Corrupt(e.to_string()))?,
        samples: r.try_get::<i64, _>("samples")? as u64,
        created_at: r.try_get("created_at")?,
    })
}

impl Store {
    /// Every stored kernel sample with its id.
    pub async fn kernel_samples(&self) -> Result<Vec<(i64, crate::samples::KernelSample)>, StoreError> {
        let rows = sqlx::query(
            "SELECT id, gpu, name, duration_us, grid, block, metrics, attributes FROM kernel_samples ORDER BY id",
        )
        .fetch_all(self.pool())
        .await?;
        rows.iter().map(|r| Ok((r.try_get("id")?, decode_kernel(r)?))).collect()
    }

    /// One kernel sample. Errors: [`StoreError::NotFound`].
    pub async fn kernel_sample(&self, id: i64) -> Result<crate::samples::KernelSample, StoreError> {
        let r = sqlx::query(
            "SELECT id, gpu, name, duration_us, grid, block, metrics, attributes FROM kernel_samples WHERE id = $1",
        )
        .bind(id)
        .fetch_optional(self.pool())
        .await?
        .ok_or_else(|| StoreError::NotFound(format!("kernel sample {id}")))?;
        decode_kernel(&r)
    }
}

fn decode_kernel(r: &sqlx::any::AnyRow) -> Result<crate::samples::KernelSample, StoreError> {
    let j = |c: &str| -> Result<Option<String>, StoreError> { Ok(r.try_get::<Option<String>, _>(c)?) };
    let parse3 = |v: Option<String>| v.and_then(|s| serde_json::from_str::<[u64; 3]>(&s).ok());
    Ok(crate::samples::KernelSample {
        name: r.try_get("name")?,
        gpu: r.try_get("gpu")?,
        duration_us: r.try_get("duration_us")?,
        grid: parse3(j("grid")?),
        block: parse3(j("block")?),
        metrics: serde_json::from_str(&j("metrics")?.unwrap_or_default()).unwrap_or_default(),
        attributes: serde_json::from_str(&j("attributes")?.unwrap_or_default()).unwrap_or_default(),
    })
}
