-- chatd schema: the whole current schema of a fresh database.
--
-- `PRAGMA user_version` (set by the last line) is the schema version. A database
-- at an older version is upgraded step by step by store/migrate.go; a database at
-- a newer version is refused. Timestamps are integer microseconds since the Unix
-- epoch (UTC); ids are UUIDv7 strings, so primary-key order is creation order.

CREATE TABLE organizations (
    id          TEXT PRIMARY KEY,
    name        TEXT NOT NULL UNIQUE COLLATE NOCASE,
    inserted_at INTEGER NOT NULL
) STRICT;

CREATE TABLE users (
    id                  TEXT PRIMARY KEY,
    organization_id     TEXT NOT NULL REFERENCES organizations (id),
    handle              TEXT NOT NULL UNIQUE COLLATE NOCASE,
    email               TEXT COLLATE NOCASE,
    first_name          TEXT NOT NULL,
    last_name           TEXT NOT NULL DEFAULT '',
    role                TEXT NOT NULL CHECK (role IN ('user', 'admin')),
    listed_in_directory INTEGER NOT NULL DEFAULT 0 CHECK (listed_in_directory IN (0, 1)),
    inserted_at         INTEGER NOT NULL,
    updated_at          INTEGER NOT NULL
) STRICT;

CREATE UNIQUE INDEX users_email ON users (email) WHERE email IS NOT NULL;
CREATE INDEX users_organization ON users (organization_id);

-- An agent's handle is "<owner handle>/<slug>". User handles never change, so the
-- full handle is stored to make lookups by handle a single index probe. A deleted
-- agent keeps its row (old messages still name their sender) but frees its handle.
CREATE TABLE agents (
    id                       TEXT PRIMARY KEY,
    owner_id                 TEXT NOT NULL REFERENCES users (id),
    organization_id          TEXT NOT NULL REFERENCES organizations (id),
    slug                     TEXT NOT NULL,
    handle                   TEXT NOT NULL COLLATE NOCASE,
    name                     TEXT NOT NULL,
    description              TEXT,
    bio                      TEXT,
    tags                     TEXT NOT NULL DEFAULT '[]' CHECK (json_valid(tags) AND json_type(tags) = 'array'),
    listed_in_directory      INTEGER NOT NULL DEFAULT 0 CHECK (listed_in_directory IN (0, 1)),
    is_external              INTEGER NOT NULL DEFAULT 1 CHECK (is_external IN (0, 1)),
    is_global                INTEGER NOT NULL DEFAULT 0 CHECK (is_global IN (0, 1)),
    shared_with_organization INTEGER NOT NULL DEFAULT 0 CHECK (shared_with_organization IN (0, 1)),
    inserted_at              INTEGER NOT NULL,
    updated_at               INTEGER NOT NULL,
    deleted_at               INTEGER
) STRICT;

CREATE UNIQUE INDEX agents_handle ON agents (handle) WHERE deleted_at IS NULL;
CREATE INDEX agents_owner ON agents (owner_id, inserted_at) WHERE deleted_at IS NULL;

-- API keys are stored as SHA-256 digests only; the key itself is shown once. A key
-- belongs to exactly one user (human key) or one agent (agent key).
CREATE TABLE api_keys (
    id           TEXT PRIMARY KEY,
    digest       BLOB NOT NULL UNIQUE CHECK (length(digest) = 32),
    prefix       TEXT NOT NULL,
    user_id      TEXT REFERENCES users (id) ON DELETE CASCADE,
    agent_id     TEXT REFERENCES agents (id) ON DELETE CASCADE,
    inserted_at  INTEGER NOT NULL,
    last_used_at INTEGER,
    CHECK ((user_id IS NULL) != (agent_id IS NULL))
) STRICT;

CREATE INDEX api_keys_user ON api_keys (user_id) WHERE user_id IS NOT NULL;
CREATE INDEX api_keys_agent ON api_keys (agent_id) WHERE agent_id IS NOT NULL;

-- Server-wide secrets and settings (the token-signing secret lives here, so a
-- backup of the file is a complete, self-contained copy of the server).
CREATE TABLE settings (
    name  TEXT PRIMARY KEY,
    value BLOB NOT NULL
) STRICT;

PRAGMA user_version = 1;
