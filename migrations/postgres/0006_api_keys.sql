-- PostgreSQL form of migrations/sqlite/0006_api_keys.sql: BIGINT for INTEGER, DOUBLE PRECISION for REAL, BYTEA for BLOB, identity ids, JSON checked by a jsonb cast; timestamps stay RFC 3339 UTC text.
-- API keys: only a SHA-256 of each key is stored; `key_id` is the public part used to find it.
CREATE TABLE api_keys (
    key_id       TEXT PRIMARY KEY NOT NULL,
    name         TEXT NOT NULL,
    scope        TEXT NOT NULL CHECK (scope IN ('read', 'write')),
    sha256       TEXT NOT NULL,
    created_at   TEXT NOT NULL DEFAULT (to_char(clock_timestamp() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')),
    revoked_at   TEXT,
    last_used_at TEXT
);
CREATE INDEX api_keys_by_name ON api_keys (name);
