-- Training runs users uploaded to calibrate a system × framework (POST /v1/systems/{system}/training-runs): the
-- configuration as a training-prediction request (JSON), the log (its format and text), the steps it held, the
-- warm-up dropped, the measured iteration time (median of the rest, s) and the iteration time predicted for the
-- configuration when the run was uploaded (uncalibrated, s).
CREATE TABLE training_runs (
    id                     INTEGER PRIMARY KEY,
    system                 TEXT NOT NULL REFERENCES systems(name),
    framework              TEXT NOT NULL,
    format                 TEXT NOT NULL,
    config                 TEXT NOT NULL CHECK (json_valid(config)),
    log                    TEXT NOT NULL,
    steps                  INTEGER NOT NULL CHECK (steps >= 2),
    warmup_steps           INTEGER NOT NULL CHECK (warmup_steps >= 1),
    measured_iteration_s   REAL NOT NULL CHECK (measured_iteration_s > 0),
    predicted_iteration_s  REAL NOT NULL CHECK (predicted_iteration_s > 0),
    created_at             TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
) STRICT;
CREATE INDEX training_runs_by_system ON training_runs (system, framework);

-- The calibration of training predictions per system × framework fitted to its runs (src/llm/calibration.rs,
-- JSON), replaced as a whole by each fit; `accepted` = 1 when the leave-one-out gate passed and predictions use it.
CREATE TABLE training_calibrations (
    system       TEXT NOT NULL REFERENCES systems(name),
    framework    TEXT NOT NULL,
    calibration  TEXT NOT NULL CHECK (json_valid(calibration)),
    accepted     INTEGER NOT NULL CHECK (accepted IN (0, 1)),
    created_at   TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
    PRIMARY KEY (system, framework)
) STRICT;
