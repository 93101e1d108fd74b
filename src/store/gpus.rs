//! The `gpus` table: GPUs imported from measurements.

use sqlx::Row;

use super::{Store, StoreError};
use crate::hw::{GpuDirectory, GpuSpec};

impl Store {
    /// Inserts or replaces an imported GPU. Returns true when it was new.
    pub async fn put_gpu(&self, spec: &GpuSpec, aliases: &[String], source: &str) -> Result<bool, StoreError> {
        let json = serde_json::to_string(spec).map_err(|e| StoreError::Corrupt(e.to_string()))?;
        let aliases = serde_json::to_string(aliases).map_err(|e| StoreError::Corrupt(e.to_string()))?;
        let mut tx = self.begin().await?;
        let existed: Option<i64> =
            sqlx::query_scalar("SELECT 1 FROM gpus WHERE name = $1").bind(&spec.name).fetch_optional(&mut *tx).await?;
        sqlx::query(&format!(
            "INSERT INTO gpus (name, spec, aliases, source) VALUES ($1, $2, $3, $4)
             ON CONFLICT(name) DO UPDATE SET spec = excluded.spec, aliases = excluded.aliases, source = excluded.source,
                 updated_at = {}",
            self.engine().now()
        ))
        .bind(&spec.name)
        .bind(json)
        .bind(aliases)
        .bind(source)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        self.note_system_change();
        Ok(existed.is_none())
    }

    /// The GPU directory: the built-in catalog plus every imported GPU.
    pub async fn gpu_directory(&self) -> Result<GpuDirectory, StoreError> {
        let rows = sqlx::query("SELECT name, spec, aliases FROM gpus ORDER BY name").fetch_all(self.pool()).await?;
        let mut imported = Vec::with_capacity(rows.len());
        for r in rows {
            let name: String = r.try_get("name")?;
            let spec: String = r.try_get("spec")?;
            let aliases: String = r.try_get("aliases")?;
            let spec: GpuSpec =
                serde_json::from_str(&spec).map_err(|e| StoreError::Corrupt(format!("gpu {name}: {e}")))?;
            imported.push((spec, serde_json::from_str(&aliases).unwrap_or_default()));
        }
        Ok(GpuDirectory::new(imported))
    }
}
