-- chatd schema: the whole current schema of a fresh database.
--
-- `PRAGMA user_version` (set by the last line) is the schema version. A database
-- at an older version is upgraded step by step by store/migrate.go, which runs
-- the "-- Version N" sections at the end of this file; a database at a newer
-- version is refused. Timestamps are integer microseconds since the Unix
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

-- Rooms. A soft-deleted room (deleted_at set) disappears from every listing
-- and read. quota_owner_id is the human accountable for the room under the
-- plan quotas: the creator, or the owner of the creating agent.
CREATE TABLE rooms (
    id              TEXT PRIMARY KEY,
    organization_id TEXT NOT NULL REFERENCES organizations (id),
    title           TEXT,
    title_locked    INTEGER NOT NULL DEFAULT 0 CHECK (title_locked IN (0, 1)),
    task_id         TEXT,
    type            TEXT NOT NULL DEFAULT 'direct' CHECK (type IN ('direct', 'group', 'task')),
    status          TEXT NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'archived', 'closed')),
    creator_id      TEXT NOT NULL,
    creator_type    TEXT NOT NULL CHECK (creator_type IN ('User', 'Agent')),
    quota_owner_id  TEXT NOT NULL REFERENCES users (id),
    last_message_at INTEGER,
    message_count   INTEGER NOT NULL DEFAULT 0,
    inserted_at     INTEGER NOT NULL,
    updated_at      INTEGER NOT NULL,
    deleted_at      INTEGER
) STRICT;

CREATE INDEX rooms_quota_owner ON rooms (quota_owner_id) WHERE deleted_at IS NULL;

-- Who is in a room: a user or an agent (exactly one of user_id, agent_id;
-- member_id repeats it so that membership is one index whatever the kind).
-- A blocked row grants no read access, and a blocked agent cannot post.
CREATE TABLE participants (
    room_id     TEXT NOT NULL REFERENCES rooms (id),
    member_id   TEXT NOT NULL,
    user_id     TEXT REFERENCES users (id),
    agent_id    TEXT REFERENCES agents (id),
    role        TEXT NOT NULL CHECK (role IN ('owner', 'admin', 'member')),
    status      TEXT NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'blocked')),
    inserted_at INTEGER NOT NULL,
    updated_at  INTEGER NOT NULL,
    PRIMARY KEY (room_id, member_id),
    CHECK ((user_id IS NULL) != (agent_id IS NULL)),
    CHECK (member_id = coalesce(user_id, agent_id))
) STRICT, WITHOUT ROWID;

CREATE INDEX participants_member ON participants (member_id, room_id);

-- Messages: text messages and events. seq is the order of the room's
-- history and the key of every message listing. sender_name is captured at
-- write time; mentions holds the resolved mention list as JSON.
CREATE TABLE messages (
    seq          INTEGER PRIMARY KEY,
    id           TEXT NOT NULL UNIQUE,
    room_id      TEXT NOT NULL REFERENCES rooms (id),
    sender_id    TEXT NOT NULL,
    sender_type  TEXT NOT NULL CHECK (sender_type IN ('User', 'Agent')),
    sender_name  TEXT NOT NULL,
    message_type TEXT NOT NULL CHECK (message_type IN
        ('text', 'tool_call', 'tool_result', 'thought', 'error', 'task', 'attention', 'system', 'action', 'guidelines')),
    content      TEXT NOT NULL,
    mentions     TEXT NOT NULL DEFAULT '[]' CHECK (json_valid(mentions)),
    metadata     TEXT NOT NULL DEFAULT '{}' CHECK (json_valid(metadata)),
    inserted_at  INTEGER NOT NULL,
    updated_at   INTEGER NOT NULL
) STRICT;

CREATE INDEX messages_room ON messages (room_id, seq);
CREATE INDEX messages_sender ON messages (room_id, sender_id, seq);

-- One row per agent a text message mentions: that agent's delivery state
-- and its processing attempts (JSON, most recent last). The partial index
-- makes "oldest message not processed yet" (/next) one index probe.
CREATE TABLE deliveries (
    agent_id        TEXT NOT NULL REFERENCES agents (id),
    room_id         TEXT NOT NULL REFERENCES rooms (id),
    message_seq     INTEGER NOT NULL REFERENCES messages (seq),
    status          TEXT NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'delivered', 'processing', 'processed', 'failed')),
    current_attempt INTEGER NOT NULL DEFAULT 0,
    attempts        TEXT NOT NULL DEFAULT '[]' CHECK (json_valid(attempts)),
    processed_at    INTEGER,
    updated_at      INTEGER NOT NULL,
    PRIMARY KEY (agent_id, room_id, message_seq)
) STRICT, WITHOUT ROWID;

CREATE INDEX deliveries_open ON deliveries (agent_id, room_id, message_seq) WHERE status != 'processed';
CREATE INDEX deliveries_message ON deliveries (message_seq);

-- The room goal (board) and its append-only audit. Actors are JSON objects
-- {id, name, type, handle} captured at write time.
CREATE TABLE boards (
    room_id      TEXT PRIMARY KEY REFERENCES rooms (id),
    goal_title   TEXT,
    goal_summary TEXT,
    created_by   TEXT NOT NULL CHECK (json_valid(created_by)),
    updated_by   TEXT NOT NULL CHECK (json_valid(updated_by)),
    inserted_at  INTEGER NOT NULL,
    updated_at   INTEGER NOT NULL
) STRICT;

CREATE TABLE board_events (
    seq     INTEGER PRIMARY KEY,
    room_id TEXT NOT NULL REFERENCES rooms (id),
    actor   TEXT NOT NULL CHECK (json_valid(actor)),
    event   TEXT NOT NULL CHECK (event IN ('goal_set', 'goal_edited')),
    payload TEXT NOT NULL CHECK (json_valid(payload)),
    at      INTEGER NOT NULL
) STRICT;

CREATE INDEX board_events_room ON board_events (room_id, seq);

-- Server-wide secrets and settings (the token-signing secret lives here, so a
-- backup of the file is a complete, self-contained copy of the server).
CREATE TABLE settings (
    name  TEXT PRIMARY KEY,
    value BLOB NOT NULL
) STRICT;

-- Version 2 ---------------------------------------------------------------
-- Contacts, memories, room tasks and delegations. A version-1 database is
-- upgraded by running this section as it stands (store/migrate.go cuts it out
-- at the "-- Version N" lines), so each section holds only new objects.

-- Contacts: one row per direction (the id is the owner's record of it), so
-- "my contacts" is one index range. Requests go from a requester to a
-- recipient; at most one pending request per direction.
CREATE TABLE contacts (
    id           TEXT PRIMARY KEY,
    owner_id     TEXT NOT NULL,
    owner_type   TEXT NOT NULL CHECK (owner_type IN ('User', 'Agent')),
    contact_id   TEXT NOT NULL,
    contact_type TEXT NOT NULL CHECK (contact_type IN ('User', 'Agent')),
    inserted_at  INTEGER NOT NULL,
    UNIQUE (owner_id, contact_id)
) STRICT;

CREATE TABLE contact_requests (
    id             TEXT PRIMARY KEY,
    requester_id   TEXT NOT NULL,
    requester_type TEXT NOT NULL CHECK (requester_type IN ('User', 'Agent')),
    recipient_id   TEXT NOT NULL,
    recipient_type TEXT NOT NULL CHECK (recipient_type IN ('User', 'Agent')),
    message        TEXT,
    status         TEXT NOT NULL CHECK (status IN ('pending', 'approved', 'rejected', 'cancelled', 'expired')),
    inserted_at    INTEGER NOT NULL,
    responded_at   INTEGER
) STRICT;

CREATE UNIQUE INDEX contact_requests_pending ON contact_requests (requester_id, recipient_id) WHERE status = 'pending';
CREATE INDEX contact_requests_recipient ON contact_requests (recipient_id, status, inserted_at);
CREATE INDEX contact_requests_requester ON contact_requests (requester_id, status, inserted_at);

-- Memories agents keep about subjects (people and agents) or for their
-- whole organization; content is indexed for full-text search.
CREATE TABLE memories (
    id              TEXT PRIMARY KEY,
    organization_id TEXT NOT NULL REFERENCES organizations (id),
    source_agent_id TEXT NOT NULL REFERENCES agents (id),
    scope           TEXT NOT NULL CHECK (scope IN ('subject', 'organization')),
    subject_id      TEXT,
    chat_room_id    TEXT,
    system          TEXT NOT NULL CHECK (system IN ('sensory', 'working', 'long_term')),
    type            TEXT NOT NULL CHECK (type IN ('iconic', 'echoic', 'haptic', 'episodic', 'semantic', 'procedural')),
    segment         TEXT NOT NULL CHECK (segment IN ('user', 'agent', 'tool', 'guideline')),
    content         TEXT NOT NULL,
    thought         TEXT,
    metadata        TEXT CHECK (metadata IS NULL OR json_valid(metadata)),
    status          TEXT NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'superseded', 'archived')),
    superseded_by   TEXT,
    inserted_at     INTEGER NOT NULL,
    updated_at      INTEGER NOT NULL,
    CHECK ((scope = 'subject') = (subject_id IS NOT NULL))
) STRICT;

CREATE INDEX memories_organization ON memories (organization_id, inserted_at);
CREATE INDEX memories_subject ON memories (subject_id, inserted_at) WHERE subject_id IS NOT NULL;
CREATE INDEX memories_source ON memories (source_agent_id, inserted_at);

CREATE VIRTUAL TABLE memories_fts USING fts5 (content, content = 'memories', content_rowid = 'rowid');

CREATE TRIGGER memories_fts_insert AFTER INSERT ON memories BEGIN
    INSERT INTO memories_fts (rowid, content) VALUES (new.rowid, new.content);
END;
CREATE TRIGGER memories_fts_delete AFTER DELETE ON memories BEGIN
    INSERT INTO memories_fts (memories_fts, rowid, content) VALUES ('delete', old.rowid, old.content);
END;
CREATE TRIGGER memories_fts_update AFTER UPDATE OF content ON memories BEGIN
    INSERT INTO memories_fts (memories_fts, rowid, content) VALUES ('delete', old.rowid, old.content);
    INSERT INTO memories_fts (rowid, content) VALUES (new.rowid, new.content);
END;

-- Tasks on a room's board, numbered per room (#1, #2, ... never reused),
-- with each participant's own assignment and an append-only history.
-- Actors are JSON objects {id, name, type, handle} captured at write time.
CREATE TABLE tasks (
    id               TEXT PRIMARY KEY,
    room_id          TEXT NOT NULL REFERENCES rooms (id),
    number           INTEGER NOT NULL,
    subject          TEXT NOT NULL,
    detail           TEXT NOT NULL DEFAULT '',
    state            TEXT NOT NULL DEFAULT 'active' CHECK (state IN ('active', 'cancelled', 'superseded', 'archived')),
    superseded_by_id TEXT,
    created_by       TEXT NOT NULL CHECK (json_valid(created_by)),
    inserted_at      INTEGER NOT NULL,
    updated_at       INTEGER NOT NULL,
    UNIQUE (room_id, number)
) STRICT;

CREATE TABLE task_assignments (
    task_id          TEXT NOT NULL REFERENCES tasks (id),
    assignee_id      TEXT NOT NULL,
    assignee         TEXT NOT NULL CHECK (json_valid(assignee)),
    status           TEXT NOT NULL CHECK (status IN ('pending', 'in_progress', 'blocked', 'in_review', 'failed', 'completed')),
    active_form      TEXT NOT NULL DEFAULT '',
    linked_native_id TEXT NOT NULL DEFAULT '',
    updated_at       INTEGER NOT NULL,
    PRIMARY KEY (task_id, assignee_id)
) STRICT, WITHOUT ROWID;

CREATE TABLE task_events (
    seq     INTEGER PRIMARY KEY,
    task_id TEXT NOT NULL REFERENCES tasks (id),
    actor   TEXT NOT NULL CHECK (json_valid(actor)),
    event   TEXT NOT NULL CHECK (event IN ('created', 'edited', 'status_changed', 'commented', 'dropped', 'cancelled',
        'superseded', 'archived', 'unarchived')),
    payload TEXT NOT NULL CHECK (json_valid(payload)),
    at      INTEGER NOT NULL
) STRICT;

CREATE INDEX task_events_task ON task_events (task_id, seq);

-- Delegations: a person lets one of their agents act on the Human API on
-- their behalf. The grant is a one-time secret (stored as a digest) that the
-- agent exchanges for a short-lived token; revoking ends both.
CREATE TABLE delegations (
    id               TEXT PRIMARY KEY,
    user_id          TEXT NOT NULL REFERENCES users (id),
    agent_id         TEXT NOT NULL REFERENCES agents (id),
    scopes           TEXT NOT NULL CHECK (json_valid(scopes)),
    grant_digest     BLOB NOT NULL UNIQUE,
    grant_expires_at INTEGER NOT NULL,
    token_ttl        INTEGER NOT NULL,
    exchanged_at     INTEGER,
    revoked_at       INTEGER,
    last_used_at     INTEGER,
    inserted_at      INTEGER NOT NULL
) STRICT;

CREATE INDEX delegations_agent ON delegations (agent_id, inserted_at);

-- Version 3 ---------------------------------------------------------------

-- Files uploaded to a room, stored in fixed-size chunks inside this database
-- (one backup holds everything; a Range read touches only its chunks). A
-- file is 'uploading' while its chunks arrive and 'ready' once its size and
-- digest checked out; only ready files can be attached or downloaded.
CREATE TABLE files (
    id            TEXT PRIMARY KEY,
    room_id       TEXT NOT NULL REFERENCES rooms (id),
    uploader_id   TEXT NOT NULL,
    uploader_type TEXT NOT NULL CHECK (uploader_type IN ('User', 'Agent')),
    name          TEXT NOT NULL,
    content_type  TEXT NOT NULL,
    size          INTEGER NOT NULL DEFAULT 0,
    sha256        TEXT NOT NULL,
    chunk_size    INTEGER NOT NULL,
    status        TEXT NOT NULL DEFAULT 'uploading' CHECK (status IN ('uploading', 'ready')),
    inserted_at   INTEGER NOT NULL
) STRICT;

CREATE INDEX files_room ON files (room_id, inserted_at);
CREATE INDEX files_uploading ON files (status) WHERE status = 'uploading';

CREATE TABLE file_chunks (
    file_id TEXT NOT NULL REFERENCES files (id) ON DELETE CASCADE,
    n       INTEGER NOT NULL,
    data    BLOB NOT NULL,
    PRIMARY KEY (file_id, n)
) STRICT;

-- Which files a message carries, in the order it listed them.
CREATE TABLE message_attachments (
    message_seq INTEGER NOT NULL REFERENCES messages (seq) ON DELETE CASCADE,
    position    INTEGER NOT NULL,
    file_id     TEXT NOT NULL REFERENCES files (id),
    PRIMARY KEY (message_seq, position)
) STRICT, WITHOUT ROWID;

CREATE INDEX message_attachments_file ON message_attachments (file_id);

-- Bulk deletion jobs and their items, persisted so that a job survives a
-- restart: items are attempted in position order and each item's outcome is
-- written in the same transaction as its deletion, so none runs twice.
CREATE TABLE bulk_jobs (
    id            TEXT PRIMARY KEY,
    user_id       TEXT NOT NULL REFERENCES users (id),
    resource_type TEXT NOT NULL CHECK (resource_type IN ('chat', 'agent')),
    force         INTEGER NOT NULL DEFAULT 0 CHECK (force IN (0, 1)),
    status        TEXT NOT NULL DEFAULT 'queued' CHECK (status IN ('queued', 'processing', 'completed', 'failed')),
    inserted_at   INTEGER NOT NULL,
    started_at    INTEGER,
    completed_at  INTEGER
) STRICT;

CREATE INDEX bulk_jobs_open ON bulk_jobs (inserted_at) WHERE status IN ('queued', 'processing');

CREATE TABLE bulk_job_items (
    job_id        TEXT NOT NULL REFERENCES bulk_jobs (id),
    position      INTEGER NOT NULL,
    target_id     TEXT NOT NULL,
    status        TEXT NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'succeeded', 'failed')),
    error_code    TEXT,
    error_message TEXT,
    PRIMARY KEY (job_id, position)
) STRICT, WITHOUT ROWID;

-- Version 4 ---------------------------------------------------------------

-- Accounts for the web app. A person's password is stored only as an
-- argon2id hash in PHC form ($argon2id$v=19$m=...,t=...,p=...$salt$hash), so
-- its parameters can be raised later without a schema change.
CREATE TABLE user_passwords (
    user_id    TEXT PRIMARY KEY REFERENCES users (id) ON DELETE CASCADE,
    hash       TEXT NOT NULL,
    updated_at INTEGER NOT NULL
) STRICT;

-- One row per sign-in. A session token names its row, and every use checks
-- the row is live, so signing out ends the token at once.
CREATE TABLE sessions (
    id          TEXT PRIMARY KEY,
    user_id     TEXT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    inserted_at INTEGER NOT NULL,
    expires_at  INTEGER NOT NULL,
    revoked_at  INTEGER
) STRICT;

CREATE INDEX sessions_user ON sessions (user_id);

-- The first-run link that creates the first person: single use, short
-- lived, stored as a digest only.
CREATE TABLE setup_tokens (
    digest     BLOB PRIMARY KEY CHECK (length(digest) = 32),
    expires_at INTEGER NOT NULL,
    used_at    INTEGER
) STRICT;

-- People name their keys to tell them apart; keys made before names read "".
ALTER TABLE api_keys ADD COLUMN name TEXT NOT NULL DEFAULT '';

-- Version 5 ---------------------------------------------------------------

-- How far each person has read each room, for chatd's own unread counts
-- (the Band API has none): the seq of the last message they read; no row
-- reads as 0, nothing read. Keyed by person and room rather than kept on
-- participants, since a person also reads rooms through the agents they own,
-- where they have no participant row.
CREATE TABLE read_markers (
    user_id       TEXT NOT NULL REFERENCES users (id),
    room_id       TEXT NOT NULL REFERENCES rooms (id),
    last_read_seq INTEGER NOT NULL,
    PRIMARY KEY (user_id, room_id)
) STRICT, WITHOUT ROWID;

-- An upgraded database starts with everything already in its rooms read:
-- otherwise every room would light up at once with a backlog nobody missed.
-- (A new database has no rooms yet, so this inserts nothing.)
INSERT OR IGNORE INTO read_markers (user_id, room_id, last_read_seq)
SELECT reader, room_id, seq FROM (
    SELECT coalesce(p.user_id, a.owner_id) AS reader, p.room_id,
        (SELECT max(m.seq) FROM messages m WHERE m.room_id = p.room_id) AS seq
    FROM participants p LEFT JOIN agents a ON a.id = p.agent_id AND a.deleted_at IS NULL
) WHERE reader IS NOT NULL AND seq IS NOT NULL;

-- Version 6 ---------------------------------------------------------------

-- Webhook endpoints: the URLs an agent registered for chatd to POST each new
-- message addressed to it. Unlike an API key, the signing secret is stored
-- as issued, not as a digest: chatd signs every request with it, so it must
-- be able to read it back. It is answered once, when the endpoint is
-- created, and never again. A paused endpoint (paused_at and pause_reason
-- set) keeps its queue and is sent nothing until it is resumed;
-- consecutive_failures counts the failed attempts since its last success.
-- An endpoint's deliveries end (delivered, or failed for good) strictly in
-- message order, so sent_through, the message seq through which all of
-- them have ended, marks where its pending ones begin.
CREATE TABLE webhook_endpoints (
    id                   TEXT PRIMARY KEY,
    agent_id             TEXT NOT NULL REFERENCES agents (id),
    url                  TEXT NOT NULL,
    description          TEXT NOT NULL DEFAULT '',
    secret               TEXT NOT NULL,
    consecutive_failures INTEGER NOT NULL DEFAULT 0,
    sent_through         INTEGER NOT NULL DEFAULT 0,
    paused_at            INTEGER,
    pause_reason         TEXT,
    inserted_at          INTEGER NOT NULL,
    updated_at           INTEGER NOT NULL,
    UNIQUE (agent_id, url),
    CHECK ((paused_at IS NULL) = (pause_reason IS NULL))
) STRICT;

-- The webhook outbox and its delivery log in one: a row per endpoint and
-- message, written in the transaction that stores the message, so a
-- committed message always has its deliveries. id is the webhook-id header,
-- the same on every attempt; nothing looks a row up by it, so it has no
-- index: each index is one more page a message's commit writes. A pending
-- row waits for next_attempt_at; an endpoint is sent its pending rows one
-- at a time, in message order, the first being the first after its
-- sent_through. The last_* columns describe the latest attempt.
CREATE TABLE webhook_deliveries (
    id               TEXT NOT NULL,
    endpoint_id      TEXT NOT NULL REFERENCES webhook_endpoints (id) ON DELETE CASCADE,
    message_seq      INTEGER NOT NULL REFERENCES messages (seq),
    status           TEXT NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'delivered', 'failed')),
    attempts         INTEGER NOT NULL DEFAULT 0,
    next_attempt_at  INTEGER NOT NULL,
    last_attempt_at  INTEGER,
    last_status_code INTEGER,
    last_latency_ms  INTEGER,
    last_error       TEXT,
    inserted_at      INTEGER NOT NULL,
    completed_at     INTEGER,
    UNIQUE (endpoint_id, message_seq)
) STRICT;

-- Version 7 ---------------------------------------------------------------

-- Replies, edits, deletions and reactions. A reply names its parent, a
-- message of the same room (reply_to_seq); a parent removed for good leaves
-- its replies without one. edited_at is when the content last changed;
-- deleted_at makes the message a tombstone: its content, attachments and
-- edit history are gone, its place in the room stays.
ALTER TABLE messages ADD COLUMN reply_to_seq INTEGER REFERENCES messages (seq) ON DELETE SET NULL;
ALTER TABLE messages ADD COLUMN edited_at INTEGER;
ALTER TABLE messages ADD COLUMN deleted_at INTEGER;
CREATE INDEX messages_replies ON messages (reply_to_seq, seq) WHERE reply_to_seq IS NOT NULL;

-- A message's edit history, for the room's owner: the content it had before
-- each edit (edit 1 holds the original), and when that edit was made.
CREATE TABLE message_edits (
    message_seq INTEGER NOT NULL REFERENCES messages (seq) ON DELETE CASCADE,
    edit        INTEGER NOT NULL,
    content     TEXT NOT NULL,
    edited_at   INTEGER NOT NULL,
    PRIMARY KEY (message_seq, edit)
) STRICT, WITHOUT ROWID;

-- Reactions: at most one of each emoji per person or agent on a message.
CREATE TABLE reactions (
    message_seq INTEGER NOT NULL REFERENCES messages (seq) ON DELETE CASCADE,
    emoji       TEXT NOT NULL,
    actor_id    TEXT NOT NULL,
    actor_type  TEXT NOT NULL CHECK (actor_type IN ('User', 'Agent')),
    inserted_at INTEGER NOT NULL,
    PRIMARY KEY (message_seq, emoji, actor_id)
) STRICT, WITHOUT ROWID;

-- Version 8 ---------------------------------------------------------------

-- Full-text search over messages (GET /api/v1/me/search and
-- /api/v1/agent/search). The index holds every message's content: messages
-- is its content table (FTS5 "external content", so the text is stored once,
-- and snippets are read from there); a search keeps to the rooms its caller
-- reads, so a deleted room's messages are never found, and deleting a room
-- costs the index nothing. unicode61 with remove_diacritics 2 folds case and
-- accents (cafe finds café); docs/performance.md has the measurements that
-- chose it over trigram.
CREATE VIRTUAL TABLE messages_fts USING fts5 (content, content = 'messages', content_rowid = 'seq',
    tokenize = 'unicode61 remove_diacritics 2');

-- A new message is indexed beside its write, not in it: its insert queues it
-- here, and the indexer indexes what is queued in a write of its own a
-- moment later, or first thing when someone searches (store/search_index.go).
-- FTS5 writes what it was given as a new segment of the index at the end of
-- each transaction (and whenever a savepoint opens), so indexing in each
-- post's own commit would write a segment, and later merge it, per commit;
-- queued, one write indexes the messages of many. A change to a message still
-- queued needs nothing more (the queue's entry reads the content as it is
-- when indexed); one to a message already indexed changes the index at once.
-- FTS5 trusts a 'delete' blindly, so it is sent only for what is indexed.
CREATE TABLE messages_fts_queue (seq INTEGER PRIMARY KEY) STRICT;

CREATE TRIGGER messages_fts_insert AFTER INSERT ON messages BEGIN
    INSERT INTO messages_fts_queue (seq) VALUES (new.seq);
END;
CREATE TRIGGER messages_fts_update AFTER UPDATE OF content ON messages
WHEN NOT EXISTS (SELECT 1 FROM messages_fts_queue WHERE seq = new.seq) BEGIN
    INSERT INTO messages_fts (messages_fts, rowid, content) VALUES ('delete', old.seq, old.content);
    INSERT INTO messages_fts (rowid, content) VALUES (new.seq, new.content);
END;
CREATE TRIGGER messages_fts_delete AFTER DELETE ON messages BEGIN
    INSERT INTO messages_fts (messages_fts, rowid, content)
        SELECT 'delete', old.seq, old.content WHERE NOT EXISTS (SELECT 1 FROM messages_fts_queue WHERE seq = old.seq);
    DELETE FROM messages_fts_queue WHERE seq = old.seq;
END;

-- An upgraded database indexes the messages it already holds (a new one
-- has none yet).
INSERT INTO messages_fts (messages_fts) VALUES ('rebuild');

-- Version 9 ---------------------------------------------------------------

-- OAuth sign-in for MCP clients (server/server_oauth.go): a client registers
-- itself (RFC 7591), a person consents in the web app to let it act as one of
-- their agents or as themselves, and the client exchanges the one-time code
-- for tokens that work on /mcp. Every secret (code, access and refresh token)
-- is stored as its SHA-256 digest only; a client id is no secret.

-- Registered clients. Anyone may register one, so clients that were never
-- used are dropped after a day when the table is near its bound.
CREATE TABLE oauth_clients (
    id            TEXT PRIMARY KEY,
    name          TEXT NOT NULL,
    uri           TEXT NOT NULL DEFAULT '',
    redirect_uris TEXT NOT NULL, -- a JSON array of the registered redirect URIs
    inserted_at   INTEGER NOT NULL,
    last_used_at  INTEGER
) STRICT;

-- One row per consent that tokens were issued for: the client acts as the
-- agent (agent_id set) or as the person. expires_at is when its newest
-- refresh token lapses; revoking (revoked_at) ends every token of the grant.
CREATE TABLE oauth_grants (
    id           TEXT PRIMARY KEY,
    client_id    TEXT NOT NULL REFERENCES oauth_clients (id),
    user_id      TEXT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    agent_id     TEXT REFERENCES agents (id),
    scope        TEXT NOT NULL,
    resource     TEXT NOT NULL,
    inserted_at  INTEGER NOT NULL,
    expires_at   INTEGER NOT NULL,
    revoked_at   INTEGER,
    last_used_at INTEGER
) STRICT;

CREATE INDEX oauth_grants_user ON oauth_grants (user_id);
CREATE INDEX oauth_grants_client ON oauth_grants (client_id);

-- Authorization codes: single use and short lived. A used code stays until it
-- expires, so that a second use is recognized (and ends the grant it made).
CREATE TABLE oauth_codes (
    digest         BLOB PRIMARY KEY CHECK (length(digest) = 32),
    client_id      TEXT NOT NULL REFERENCES oauth_clients (id),
    user_id        TEXT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    agent_id       TEXT REFERENCES agents (id),
    redirect_uri   TEXT NOT NULL,
    code_challenge TEXT NOT NULL,
    scope          TEXT NOT NULL,
    resource       TEXT NOT NULL,
    expires_at     INTEGER NOT NULL,
    used_at        INTEGER,
    grant_id       TEXT REFERENCES oauth_grants (id) ON DELETE CASCADE
) STRICT, WITHOUT ROWID;

CREATE INDEX oauth_codes_expiry ON oauth_codes (expires_at);

-- Access and refresh tokens of a grant. A refresh token works once: its use
-- (rotated_at) issues the next pair, and a second use ends the grant.
CREATE TABLE oauth_tokens (
    digest      BLOB PRIMARY KEY CHECK (length(digest) = 32),
    grant_id    TEXT NOT NULL REFERENCES oauth_grants (id) ON DELETE CASCADE,
    kind        TEXT NOT NULL CHECK (kind IN ('access', 'refresh')),
    inserted_at INTEGER NOT NULL,
    expires_at  INTEGER NOT NULL,
    rotated_at  INTEGER
) STRICT, WITHOUT ROWID;

CREATE INDEX oauth_tokens_grant ON oauth_tokens (grant_id);

-- Version 10 --------------------------------------------------------------

-- Attention messages a person put away in the web app ("Mark done"), one row
-- per person and message: each person's list of what needs them is their
-- own. A message removed from the database (with its room) takes its marks
-- with it; a deleted message (a tombstone) keeps them.
CREATE TABLE attention_marks (
    user_id     TEXT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    room_id     TEXT NOT NULL,
    message_seq INTEGER NOT NULL REFERENCES messages (seq) ON DELETE CASCADE,
    done_at     INTEGER NOT NULL,
    PRIMARY KEY (user_id, message_seq)
) STRICT, WITHOUT ROWID;

CREATE INDEX attention_marks_room ON attention_marks (user_id, room_id);
CREATE INDEX attention_marks_message ON attention_marks (message_seq);

-- Invitations (server/server_invitations.go): an organization's admin
-- invites a person with a one-time link, valid a week, stored as its
-- SHA-256 digest only; the invited person picks their handle, name and
-- password on it and joins the organization with the role it names.
CREATE TABLE invitations (
    id              TEXT PRIMARY KEY,
    digest          BLOB NOT NULL UNIQUE CHECK (length(digest) = 32),
    organization_id TEXT NOT NULL REFERENCES organizations (id),
    role            TEXT NOT NULL CHECK (role IN ('user', 'admin')),
    invited_by      TEXT REFERENCES users (id) ON DELETE SET NULL,
    inserted_at     INTEGER NOT NULL,
    expires_at      INTEGER NOT NULL,
    used_at         INTEGER,
    used_by         TEXT REFERENCES users (id) ON DELETE SET NULL
) STRICT;

CREATE INDEX invitations_organization ON invitations (organization_id, inserted_at);

-- Version 11 --------------------------------------------------------------

-- A person an admin removed (store/people.go): the row stays, so that what
-- they wrote keeps its sender and their handle is never someone else's, but
-- nothing authenticates, lists or finds them any more.
ALTER TABLE users ADD COLUMN removed_at INTEGER;

-- Version 12 --------------------------------------------------------------

-- Retention (store/retention.go): how many days messages, events and files
-- are kept, as an organization's default and a room's own setting. A NULL
-- count keeps that kind forever (the organization's default) or follows the
-- organization (a room's); a room's count can only shorten what its
-- organization keeps. No row reads as all NULL: nothing is ever deleted
-- until someone asks for it.
CREATE TABLE organization_retention (
    organization_id TEXT PRIMARY KEY REFERENCES organizations (id),
    text_days       INTEGER CHECK (text_days BETWEEN 1 AND 36500),
    event_days      INTEGER CHECK (event_days BETWEEN 1 AND 36500),
    file_days       INTEGER CHECK (file_days BETWEEN 1 AND 36500),
    updated_by      TEXT NOT NULL,
    updated_at      INTEGER NOT NULL
) STRICT;

CREATE TABLE room_retention (
    room_id    TEXT PRIMARY KEY REFERENCES rooms (id),
    text_days  INTEGER CHECK (text_days BETWEEN 1 AND 36500),
    event_days INTEGER CHECK (event_days BETWEEN 1 AND 36500),
    file_days  INTEGER CHECK (file_days BETWEEN 1 AND 36500),
    updated_by TEXT NOT NULL,
    updated_at INTEGER NOT NULL
) STRICT;

-- How far the purge has gone through each room, per kind ('text' or
-- 'event'): every message of that kind with a seq up to through_seq is
-- gone. Each purge step goes on from here, so no row is scanned twice for
-- a kind, whatever the other kind keeps.
CREATE TABLE retention_marks (
    room_id     TEXT NOT NULL REFERENCES rooms (id),
    kind        TEXT NOT NULL CHECK (kind IN ('text', 'event')),
    through_seq INTEGER NOT NULL,
    PRIMARY KEY (room_id, kind)
) STRICT, WITHOUT ROWID;

-- A file past its room's file retention is expired first (it reads as
-- missing at once, and its attachments go), then its chunks are deleted a
-- few at a time, then the file itself: one large file never holds the
-- write lock for long, and a restart goes on where the last run stopped.
ALTER TABLE files ADD COLUMN expired_at INTEGER;
CREATE INDEX files_expired ON files (expired_at) WHERE expired_at IS NOT NULL;

-- Deleting a message looks up its webhook requests by message (the
-- foreign key's own check does too): without this index, a scan of the
-- whole outbox per message deleted.
CREATE INDEX webhook_deliveries_message ON webhook_deliveries (message_seq);

-- Version 13 --------------------------------------------------------------

-- Leases (store/leases.go): which chatd process runs a job that must run
-- in one place at a time (the purge, retention, the sends of one webhook
-- endpoint), and until when. The holder renews its lease while it works;
-- one that stops renewing (it ended, or died) loses the job when the lease
-- expires, and another process takes it. Several nodes on one PostgreSQL
-- database need this; on SQLite one server holds the file, and its leases
-- are the same rows.
CREATE TABLE leases (
    name       TEXT PRIMARY KEY,
    holder     TEXT NOT NULL,
    expires_at INTEGER NOT NULL
) STRICT, WITHOUT ROWID;

PRAGMA user_version = 13;
