-- Profile timers (TAU timers per rank, rocprof API statistics and memory copies).
CREATE TABLE timer_samples (
    id            INTEGER PRIMARY KEY,
    profile_id    TEXT NOT NULL REFERENCES profiles(id) ON DELETE CASCADE,
    name          TEXT NOT NULL,
    grp           TEXT NOT NULL,
    rank          INTEGER,
    thread        INTEGER,
    calls         REAL NOT NULL CHECK (calls >= 0),
    exclusive_us  REAL NOT NULL,
    inclusive_us  REAL NOT NULL,
    attributes    TEXT NOT NULL DEFAULT '{}' CHECK (json_valid(attributes))
) STRICT;
CREATE INDEX timer_samples_by_profile ON timer_samples (profile_id);
