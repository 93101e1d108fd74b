//! The `systems` table.

use sqlx::Row;

use super::{Store, StoreError};
use crate::hw::{presets, SystemSpec};

/// A stored system with its metadata.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredSystem {
    pub spec: SystemSpec,
    /// Shipped with every new database.
    pub preset: bool,
    /// RFC 3339 UTC.
    pub created_at: String,
}

fn decode(row: &sqlx::any::AnyRow) -> Result<StoredSystem, StoreError> {
    let name: String = row.try_get("name")?;
    let spec: String = row.try_get("spec")?;
    let spec: SystemSpec =
        serde_json::from_str(&spec).map_err(|e| StoreError::Corrupt(format!("system {name}: {e}")))?;
    Ok(StoredSystem { spec, preset: row.try_get::<i64, _>("preset")? != 0, created_at: row.try_get("created_at")? })
}

impl Store {
    /// Inserts the preset systems that are missing (existing rows are left alone).
    pub(super) async fn seed_presets(&self) -> Result<(), StoreError> {
        let mut tx = self.begin().await?;
        for p in presets() {
            let json = serde_json::to_string(&p).map_err(|e| StoreError::Corrupt(e.to_string()))?;
            sqlx::query("INSERT INTO systems (name, spec, preset) VALUES ($1, $2, 1) ON CONFLICT DO NOTHING")
                .bind(&p.name)
                .bind(json)
                .execute(&mut *tx)
                .await?;
        }
        tx.commit().await?;
        self.note_system_change();
        Ok(())
    }

    /// Stores a new system. Errors: [`StoreError::Conflict`] when the name is taken.
    pub async fn insert_system(&self, spec: &SystemSpec) -> Result<StoredSystem, StoreError> {
        let json = serde_json::to_string(spec).map_err(|e| StoreError::Corrupt(e.to_string()))?;
        let mut tx = self.begin().await?;
        let inserted = sqlx::query("INSERT INTO systems (name, spec) VALUES ($1, $2) ON CONFLICT(name) DO NOTHING")
            .bind(&spec.name)
            .bind(json)
            .execute(&mut *tx)
            .await?
            .rows_affected();
        if inserted == 0 {
            return Err(StoreError::Conflict(format!("system {:?}", spec.name)));
        }
        let row = sqlx::query("SELECT name, spec, preset, created_at FROM systems WHERE name = $1")
            .bind(&spec.name)
            .fetch_one(&mut *tx)
            .await?;
        tx.commit().await?;
        self.note_system_change();
        decode(&row)
    }

    /// All systems, by name.
    pub async fn list_systems(&self) -> Result<Vec<StoredSystem>, StoreError> {
        let rows = sqlx::query("SELECT name, spec, preset, created_at FROM systems ORDER BY name")
            .fetch_all(self.pool())
            .await?;
        rows.iter().map(decode).collect()
    }

    /// One system. Errors: [`StoreError::NotFound`].
    pub async fn get_system(&self, name: &str) -> Result<StoredSystem, StoreError> {
        let row = sqlx::query("SELECT name, spec, preset, created_at FROM systems WHERE name = $1")
            .bind(name)
            .fetch_optional(self.pool())
            .await?
            .ok_or_else(|| StoreError::NotFound(format!("system {name:?}")))?;
        decode(&row)
    }
}
