-- GPUs imported from measurements (MT4G): new devices, or refinements of catalog GPUs under their catalog name.
CREATE TABLE gpus (
    name        TEXT PRIMARY KEY NOT NULL,
    spec        TEXT NOT NULL CHECK (json_valid(spec)),
    aliases     TEXT NOT NULL DEFAULT '[]' CHECK (json_valid(aliases)),
    source      TEXT NOT NULL,
    updated_at  TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
) STRICT;
