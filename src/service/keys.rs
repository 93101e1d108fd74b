//! API keys: creation (the key is shown once), listing, revocation and authentication.
//!
//! A key is `pck_<key_id>_<secret>`: `key_id` (12 hex digits) is public and finds the stored record; the secret
//! (64 hex digits, 256 random bits from the OS) never leaves the client. Only the SHA-256 of the whole key is
//! stored, and the presented key's hash is compared to it in constant time.

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use utoipa::ToSchema;

use super::{Service, ServiceError};
use crate::store::keys::KeyRecord;

/// What a key may do. `write` includes `read`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum Scope {
    Read,
    Write,
}

impl Scope {
    /// The stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            Scope::Read => "read",
            Scope::Write => "write",
        }
    }

    fn parse(s: &str) -> Option<Scope> {
        match s {
            "read" => Some(Scope::Read),
            "write" => Some(Scope::Write),
            _ => None,
        }
    }
}

/// Who a request authenticated as.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Principal {
    pub key_id: String,
    pub name: String,
    pub scope: Scope,
}

/// Why a presented key is not accepted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AuthError {
    #[error("the key is not a perfcast API key (pck_…)")]
    Malformed,
    #[error("unknown API key")]
    Unknown,
    #[error("the API key was revoked")]
    Revoked,
}

/// A new key: the secret string (shown once) and its record.
#[derive(Debug, Clone)]
pub struct NewKey {
    pub key: String,
    pub record: KeyRecord,
}

/// What `perfcast keys list` shows of a key: its record without the hash. Timestamps are RFC 3339 UTC strings as
/// stored; `revoked_at` and `last_used_at` are null when the key was never revoked or never used.
///
/// The fields are declared in alphabetical order because that is the order the listing has always printed them
/// in (it was built as a `serde_json` map, which sorts its keys).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct KeyInfo {
    pub created_at: String,
    /// Public part of the key (`pck_<key_id>_…`), 12 hex digits.
    pub key_id: String,
    pub last_used_at: Option<String>,
    /// The name it was created with.
    pub name: String,
    pub revoked_at: Option<String>,
    /// `read` or `write` (write includes read).
    pub scope: String,
}

impl From<KeyRecord> for KeyInfo {
    fn from(k: KeyRecord) -> Self {
        KeyInfo {
            created_at: k.created_at,
            key_id: k.key_id,
            last_used_at: k.last_used_at,
            name: k.name,
            revoked_at: k.revoked_at,
            scope: k.scope,
        }
    }
}

fn sha256_hex(s: &str) -> String {
    hex::encode(Sha256::digest(s.as_bytes()))
}

fn random_hex(bytes: usize) -> Result<String, ServiceError> {
    let mut buf = vec![0u8; bytes];
    getrandom::getrandom(&mut buf).map_err(|e| {
        ServiceError::Internal(crate::store::StoreError::Corrupt(format!("no randomness from the OS: {e}")))
    })?;
    Ok(hex::encode(buf))
}

/// The `key_id` of a well-formed key string.
pub fn key_id(key: &str) -> Option<&str> {
    let rest = key.strip_prefix("pck_")?;
    let (id, secret) = rest.split_once('_')?;
    (id.len() == 12 && secret.len() == 64 && id.chars().chain(secret.chars()).all(|c| c.is_ascii_hexdigit()))
        .then_some(id)
}

impl Service {
    /// Creates a key named `name` with `scope`. Errors: an empty name.
    pub async fn create_key(&self, name: &str, scope: Scope) -> Result<NewKey, ServiceError> {
        if name.trim().is_empty() {
            return Err(ServiceError::invalid("name", "must not be empty"));
        }
        let id = random_hex(6)?;
        let key = format!("pck_{id}_{}", random_hex(32)?);
        let record = self.store.insert_key(&id, name, scope.as_str(), &sha256_hex(&key)).await?;
        Ok(NewKey { key, record })
    }

    /// Creates the database's first key (write scope) named `name`, unless a key exists: None then. Replicas
    /// starting at once on one empty database create exactly one ([`crate::store::Store::insert_first_key`]).
    pub async fn create_first_key(&self, name: &str) -> Result<Option<NewKey>, ServiceError> {
        let id = random_hex(6)?;
        let key = format!("pck_{id}_{}", random_hex(32)?);
        let record = self.store.insert_first_key(&id, name, Scope::Write.as_str(), &sha256_hex(&key)).await?;
        Ok(record.map(|record| NewKey { key, record }))
    }

    /// Stores a key given from outside (the `api_key` setting) with write scope, unless it exists. Errors: a
    /// malformed key.
    pub async fn ensure_key(&self, key: &str, name: &str) -> Result<(), ServiceError> {
        let id = key_id(key).ok_or_else(|| {
            ServiceError::invalid(
                "api_key",
                "must look like pck_<12 hex digits>_<64 hex digits> (perfcast keys create prints one)",
            )
        })?;
        if self.store.key(id).await?.is_none() {
            match self.store.insert_key(id, name, Scope::Write.as_str(), &sha256_hex(key)).await {
                // Replicas starting at once on one database: another one stored it first.
                Ok(_) | Err(crate::store::StoreError::Conflict(_)) => {}
                Err(e) => return Err(e.into()),
            }
        }
        Ok(())
    }

    /// Every key's record (no secrets: none are stored).
    pub async fn keys(&self) -> Result<Vec<KeyRecord>, ServiceError> {
        Ok(self.store.list_keys().await?)
    }

    /// Revokes keys by id or name; returns how many.
    pub async fn revoke_key(&self, which: &str) -> Result<u64, ServiceError> {
        Ok(self.store.revoke_key(which).await?)
    }

    /// Checks a presented key. Errors: malformed, unknown or revoked key; `Internal` for database failures.
    pub async fn authenticate(&self, key: &str) -> Result<Result<Principal, AuthError>, ServiceError> {
        let Some(id) = key_id(key) else { return Ok(Err(AuthError::Malformed)) };
        let Some(record) = self.store.key(id).await? else { return Ok(Err(AuthError::Unknown)) };
        if !constant_time_eq::constant_time_eq(sha256_hex(key).as_bytes(), record.sha256.as_bytes()) {
            return Ok(Err(AuthError::Unknown));
        }
        if record.revoked_at.is_some() {
            return Ok(Err(AuthError::Revoked));
        }
        let _ = self.store.touch_key(id).await;
        let scope = Scope::parse(&record.scope).unwrap_or(Scope::Read);
        Ok(Ok(Principal { key_id: record.key_id, name: record.name, scope }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_format() {
        let k = format!("pck_{}_{}", "a1b2c3d4e5f6", "0".repeat(64));
        assert_eq!(key_id(&k), Some("a1b2c3d4e5f6"));
        assert_eq!(key_id("pck_short_x"), None);
        assert_eq!(key_id(&k.replace("pck_", "xyz_")), None);
        assert_eq!(key_id(&format!("{k}z")), None);
        // SHA-256 of "abc" (FIPS 180-2 example).
        assert_eq!(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    }

    #[test]
    fn key_info_leaves_out_the_hash_and_keeps_the_listing_order() {
        let record = KeyRecord {
            key_id: "a1b2c3d4e5f6".into(),
            name: "ci".into(),
            scope: "read".into(),
            sha256: "0".repeat(64),
            created_at: "2026-01-01T00:00:00.000Z".into(),
            revoked_at: None,
            last_used_at: Some("2026-01-02T00:00:00.000Z".into()),
        };
        let json = serde_json::to_string(&KeyInfo::from(record)).unwrap();
        assert_eq!(
            json,
            r#"{"created_at":"2026-01-01T00:00:00.000Z","key_id":"a1b2c3d4e5f6","last_used_at":"2026-01-02T00:00:00.000Z","name":"ci","revoked_at":null,"scope":"read"}"#
        );
    }
}
