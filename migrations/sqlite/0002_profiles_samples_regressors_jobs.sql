-- Profile uploads: the raw bytes (gzip) so a better parser can re-read them, and the samples parsed from them.
CREATE TABLE profiles (
    id          TEXT PRIMARY KEY NOT NULL,             -- first 16 hex digits of sha256
    sha256      TEXT NOT NULL UNIQUE,                  -- of the uploaded (decoded) bytes: idempotency key
    format      TEXT NOT NULL,
    system      TEXT REFERENCES systems(name),
    gpu         TEXT,                                  -- the upload's gpu parameter, canonical name
    labels      TEXT NOT NULL DEFAULT '{}' CHECK (json_valid(labels)),
    raw_gzip    BLOB NOT NULL,
    raw_bytes   INTEGER NOT NULL CHECK (raw_bytes >= 0),
    samples     INTEGER NOT NULL CHECK (samples >= 0),
    rejected    TEXT NOT NULL DEFAULT '[]' CHECK (json_valid(rejected)),
    created_at  TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
) STRICT;

-- Operator samples, normalized: class, phase, dtype, canonical GPU, dims (see src/op), time in µs.
CREATE TABLE op_samples (
    id          INTEGER PRIMARY KEY,
    profile_id  TEXT NOT NULL REFERENCES profiles(id) ON DELETE CASCADE,
    op          TEXT NOT NULL,
    phase       TEXT NOT NULL CHECK (phase IN ('fwd', 'bwd')),
    dtype       TEXT NOT NULL,
    gpu         TEXT NOT NULL,
    d0          INTEGER NOT NULL,
    d1          INTEGER NOT NULL,
    d2          INTEGER NOT NULL,
    d3          INTEGER NOT NULL,
    time_us     REAL NOT NULL CHECK (time_us > 0),
    attributes  TEXT NOT NULL DEFAULT '{}' CHECK (json_valid(attributes)),
    split_key   INTEGER NOT NULL                       -- stable hash deciding the 80/20 side
) STRICT;
CREATE INDEX op_samples_by_key ON op_samples (op, phase, dtype, gpu);
CREATE INDEX op_samples_by_profile ON op_samples (profile_id);

-- Communication samples (OSU, nccl-tests, traces): on the upload's system when given.
CREATE TABLE comm_samples (
    id             INTEGER PRIMARY KEY,
    profile_id     TEXT NOT NULL REFERENCES profiles(id) ON DELETE CASCADE,
    system         TEXT REFERENCES systems(name),
    collective     TEXT NOT NULL,
    bytes          INTEGER NOT NULL CHECK (bytes >= 0),
    ranks          INTEGER NOT NULL CHECK (ranks >= 1),
    nodes          INTEGER,
    gpus_per_node  INTEGER,
    time_us        REAL NOT NULL CHECK (time_us > 0),
    algbw_gbs      REAL,
    busbw_gbs      REAL,
    dtype          TEXT,
    attributes     TEXT NOT NULL DEFAULT '{}' CHECK (json_valid(attributes))
) STRICT;
CREATE INDEX comm_samples_by_system ON comm_samples (system, collective);
CREATE INDEX comm_samples_by_profile ON comm_samples (profile_id);

-- Kernel samples (Nsight Compute, rocprof, traces).
CREATE TABLE kernel_samples (
    id           INTEGER PRIMARY KEY,
    profile_id   TEXT NOT NULL REFERENCES profiles(id) ON DELETE CASCADE,
    gpu          TEXT,
    name         TEXT NOT NULL,
    duration_us  REAL NOT NULL CHECK (duration_us > 0),
    grid         TEXT CHECK (grid IS NULL OR json_valid(grid)),
    block        TEXT CHECK (block IS NULL OR json_valid(block)),
    metrics      TEXT NOT NULL DEFAULT '{}' CHECK (json_valid(metrics)),
    attributes   TEXT NOT NULL DEFAULT '{}' CHECK (json_valid(attributes))
) STRICT;
CREATE INDEX kernel_samples_by_gpu ON kernel_samples (gpu);
CREATE INDEX kernel_samples_by_profile ON kernel_samples (profile_id);

-- Background jobs (retraining, later calibration and searches): rows survive crashes; a job found 'running'
-- at startup was interrupted and is queued again.
CREATE TABLE jobs (
    id           INTEGER PRIMARY KEY,
    kind         TEXT NOT NULL,
    state        TEXT NOT NULL CHECK (state IN ('queued', 'running', 'succeeded', 'failed')),
    progress     REAL NOT NULL DEFAULT 0 CHECK (progress >= 0 AND progress <= 1),
    message      TEXT NOT NULL DEFAULT '',
    params       TEXT NOT NULL DEFAULT '{}' CHECK (json_valid(params)),
    result       TEXT CHECK (result IS NULL OR json_valid(result)),
    attempts     INTEGER NOT NULL DEFAULT 0,
    created_at   TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
    started_at   TEXT,
    finished_at  TEXT
) STRICT;
CREATE INDEX jobs_by_state ON jobs (state, id);

-- Learned models: every version is kept; exactly one version per key is active.
CREATE TABLE regressors (
    id                        INTEGER PRIMARY KEY,
    key                       TEXT NOT NULL,
    family                    TEXT NOT NULL,
    scope                     TEXT NOT NULL,          -- 'all' or a GPU name
    version                   INTEGER NOT NULL CHECK (version >= 1),
    active                    INTEGER NOT NULL DEFAULT 0 CHECK (active IN (0, 1)),
    model                     TEXT NOT NULL,          -- LightGBM text, refit on all rows
    holdout_model             TEXT NOT NULL,          -- the same configuration trained on the 80 % side
    feature_names             TEXT NOT NULL CHECK (json_valid(feature_names)),
    candidate                 TEXT NOT NULL CHECK (json_valid(candidate)),
    candidates                TEXT NOT NULL CHECK (json_valid(candidates)),
    validation_mape           REAL NOT NULL,
    validation_signed         REAL NOT NULL,
    analytic_validation_mape  REAL NOT NULL,
    train_rows                INTEGER NOT NULL,
    validation_rows           INTEGER NOT NULL,
    samples                   INTEGER NOT NULL,
    summary                   TEXT NOT NULL CHECK (json_valid(summary)),
    importance                TEXT NOT NULL CHECK (json_valid(importance)),
    promotion                 TEXT NOT NULL CHECK (json_valid(promotion)),
    job_id                    INTEGER REFERENCES jobs(id),
    created_at                TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
    UNIQUE (key, version)
) STRICT;
CREATE UNIQUE INDEX regressors_one_active_per_key ON regressors (key) WHERE active = 1;
