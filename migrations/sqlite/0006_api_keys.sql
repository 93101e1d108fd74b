-- API keys: only a SHA-256 of each key is stored; `key_id` is the public part used to find it.
CREATE TABLE api_keys (
    key_id       TEXT PRIMARY KEY NOT NULL,
    name         TEXT NOT NULL,
    scope        TEXT NOT NULL CHECK (scope IN ('read', 'write')),
    sha256       TEXT NOT NULL,
    created_at   TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
    revoked_at   TEXT,
    last_used_at TEXT
) STRICT;
CREATE INDEX api_keys_by_name ON api_keys (name);
