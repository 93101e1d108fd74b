//! Reading stored profiles back: by hash, by id, a page of them, their raw bytes, and a page of one profile's
//! samples as JSON ([`Store::profile_samples`]).

use std::io::Read;

use sqlx::Row;

use super::records::{decode_profile, ProfileRecord, SampleRow, PROFILE_COLUMNS};
use crate::store::{Store, StoreError};

impl Store {
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
}

/// The query of [`Store::profile_samples`]: every sample of profile `$1` as (kind, sid, data) with `data` its JSON
/// text, by kind and id, `$2` rows from `$3`. SQLite's JSON functions; PostgreSQL's equivalents.
fn samples_sql(engine: crate::store::Engine) -> String {
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
        crate::store::Engine::Sqlite => sqlite.to_string(),
        crate::store::Engine::Postgres => {
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
