-- A model version's validation rows as its chosen candidate's hold-out model predicted them (what validation_mape
-- measures), evenly thinned to at most 2,000 rows at training time: the points of GET /v1/regressors/{key}/plot.svg.
-- One row per version; versions trained before this table existed have none (retrain them to plot them).
CREATE TABLE regressor_validation (
    regressor_id  INTEGER PRIMARY KEY NOT NULL REFERENCES regressors(id) ON DELETE CASCADE,
    points        TEXT NOT NULL CHECK (json_valid(points))  -- [[measured_us, analytic_us, predicted_us], ...]
) STRICT;
