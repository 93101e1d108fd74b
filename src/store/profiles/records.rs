//! What the `profiles` table stores and gives back: an upload to store ([`NewProfile`], [`SampleBatch`]), a stored
//! profile ([`ProfileRecord`]), what storing did ([`Stored`]) and a stored sample as the API shows it
//! ([`SampleRow`]), with the row decoding they share.

use std::collections::BTreeMap;

use sqlx::Row;

use crate::samples::{CommSample, KernelSample, OpSample, Rejected, TimerSample};
use crate::store::StoreError;

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

/// A stored sample as `GET /v1/profiles/{id}/samples` shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct SampleRow {
    pub kind: &'static str,
    pub id: i64,
    /// The sample as JSON (its kind's fields).
    pub data: serde_json::Value,
}

pub(super) fn decode_profile(row: &sqlx::any::AnyRow) -> Result<ProfileRecord, StoreError> {
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

pub(super) const PROFILE_COLUMNS: &str =
    "id, sha256, format, system, gpu, labels, raw_bytes, samples, rejected, created_at";
