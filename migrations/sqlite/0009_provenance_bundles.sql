-- Provenance of every model version (JSON): whether it shipped with perfcast (`bundled`, trained by `perfcast models
-- bundle` on the measurements bundled in the binary) or was trained in this database, the datasets of its training
-- rows, the perfcast commit and version of the code that trained it, and when. '{}' for versions stored before.
ALTER TABLE regressors ADD COLUMN provenance TEXT NOT NULL DEFAULT '{}' CHECK (json_valid(provenance));

-- Bundled measurement sets (models/bundled) installed in this database: the version (a hash of the bundle's
-- contents) and its manifest. A start with a bundle version not listed here installs it.
CREATE TABLE bundles (
    version       TEXT PRIMARY KEY NOT NULL,
    manifest      TEXT NOT NULL CHECK (json_valid(manifest)),
    installed_at  TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
) STRICT;
