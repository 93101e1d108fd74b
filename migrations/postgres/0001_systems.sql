-- PostgreSQL form of migrations/sqlite/0001_systems.sql: BIGINT for INTEGER, DOUBLE PRECISION for REAL, BYTEA for BLOB, identity ids, JSON checked by a jsonb cast; timestamps stay RFC 3339 UTC text.
-- Systems: a name and the system description as the client gave it (JSON), resolved against the GPU catalog on
-- read so catalog corrections reach every system. Presets are seeded by the application at startup.
CREATE TABLE systems (
    name        TEXT PRIMARY KEY NOT NULL,
    spec        TEXT NOT NULL CHECK ((spec::jsonb IS NOT NULL)),
    preset      BIGINT NOT NULL DEFAULT 0 CHECK (preset IN (0, 1)),
    created_at  TEXT NOT NULL DEFAULT (to_char(clock_timestamp() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'))
);
