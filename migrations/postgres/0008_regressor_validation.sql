-- PostgreSQL form of migrations/sqlite/0008_regressor_validation.sql: BIGINT for INTEGER, DOUBLE PRECISION for REAL, BYTEA for BLOB, identity ids, JSON checked by a jsonb cast; timestamps stay RFC 3339 UTC text.
-- A model version's validation rows as its chosen candidate's hold-out model predicted them (what validation_mape
-- measures), evenly thinned to at most 2,000 rows at training time: the points of GET /v1/regressors/{key}/plot.svg.
-- One row per version; versions trained before this table existed have none (retrain them to plot them).
CREATE TABLE regressor_validation (
    regressor_id  BIGINT PRIMARY KEY NOT NULL REFERENCES regressors(id) ON DELETE CASCADE,
    points        TEXT NOT NULL CHECK ((points::jsonb IS NOT NULL))  -- [[measured_us, analytic_us, predicted_us], ...]
);
