-- PostgreSQL form of migrations/sqlite/0003_calibrations.sql: BIGINT for INTEGER, DOUBLE PRECISION for REAL, BYTEA for BLOB, identity ids, JSON checked by a jsonb cast; timestamps stay RFC 3339 UTC text.
-- Communication calibration per system: the fitted link classes and collective groups (JSON), replaced as a whole
-- by each calibration.
CREATE TABLE system_calibrations (
    system       TEXT PRIMARY KEY NOT NULL REFERENCES systems(name),
    calibration  TEXT NOT NULL CHECK ((calibration::jsonb IS NOT NULL)),
    samples      BIGINT NOT NULL CHECK (samples >= 0),
    created_at   TEXT NOT NULL DEFAULT (to_char(clock_timestamp() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'))
);
