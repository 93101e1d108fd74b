-- Communication calibration per system: the fitted link classes and collective groups (JSON), replaced as a whole
-- by each calibration.
CREATE TABLE system_calibrations (
    system       TEXT PRIMARY KEY NOT NULL REFERENCES systems(name),
    calibration  TEXT NOT NULL CHECK (json_valid(calibration)),
    samples      INTEGER NOT NULL CHECK (samples >= 0),
    created_at   TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
) STRICT;
