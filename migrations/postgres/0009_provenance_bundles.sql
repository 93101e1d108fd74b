-- PostgreSQL form of migrations/sqlite/0009_provenance_bundles.sql: BIGINT for INTEGER, DOUBLE PRECISION for REAL, BYTEA for BLOB, identity ids, JSON checked by a jsonb cast; timestamps stay RFC 3339 UTC text.
-- Provenance of every model version (JSON): whether it shipped with perfcast (`bundled`, trained by `perfcast models
-- bundle` on the measurements bundled in the binary) or was trained in this database, the datasets of its training
-- rows, the perfcast commit and version of the code that trained it, and when. '{}' for versions stored before.
ALTER TABLE regressors ADD COLUMN provenance TEXT NOT NULL DEFAULT '{}' CHECK ((provenance::jsonb IS NOT NULL));

-- Bundled measurement sets (models/bundled) installed in this database: the version (a hash of the bundle's
-- contents) and its manifest. A start with a bundle version not listed here installs it.
CREATE TABLE bundles (
    version       TEXT PRIMARY KEY NOT NULL,
    manifest      TEXT NOT NULL CHECK ((manifest::jsonb IS NOT NULL)),
    installed_at  TEXT NOT NULL DEFAULT (to_char(clock_timestamp() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'))
);
