-- PostgreSQL form of migrations/sqlite/0005_gpus.sql: BIGINT for INTEGER, DOUBLE PRECISION for REAL, BYTEA for BLOB, identity ids, JSON checked by a jsonb cast; timestamps stay RFC 3339 UTC text.
-- GPUs imported from measurements (MT4G): new devices, or refinements of catalog GPUs under their catalog name.
CREATE TABLE gpus (
    name        TEXT PRIMARY KEY NOT NULL,
    spec        TEXT NOT NULL CHECK ((spec::jsonb IS NOT NULL)),
    aliases     TEXT NOT NULL DEFAULT '[]' CHECK ((aliases::jsonb IS NOT NULL)),
    source      TEXT NOT NULL,
    updated_at  TEXT NOT NULL DEFAULT (to_char(clock_timestamp() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'))
);
