-- Systems: a name and the system description as the client gave it (JSON), resolved against the GPU catalog on
-- read so catalog corrections reach every system. Presets are seeded by the application at startup.
CREATE TABLE systems (
    name        TEXT PRIMARY KEY NOT NULL,
    spec        TEXT NOT NULL CHECK (json_valid(spec)),
    preset      INTEGER NOT NULL DEFAULT 0 CHECK (preset IN (0, 1)),
    created_at  TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
) STRICT;
