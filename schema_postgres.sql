-- chatd schema for PostgreSQL (15 and later): the whole current schema of a
-- fresh database. It is schema.sql's schema, table for table, column for
-- column in the same order, index for index and constraint for constraint;
-- store/schema_postgres_test.go holds the two together. The version is the
-- row of schema_version, at the end (schema.sql keeps it in PRAGMA
-- user_version). Timestamps are integer microseconds since the Unix epoch
-- (UTC); ids are UUIDv7 strings, so primary-key order is creation order.
--
-- Where it differs from schema.sql, and why:
--
-- * Integers are BIGINT: times in microseconds overflow a 32-bit INTEGER.
--   Flags stay 0/1 integers, as chatd reads them. Blobs are BYTEA.
-- * A SQLite `INTEGER PRIMARY KEY` (a rowid: messages.seq, board_events.seq,
--   task_events.seq) is an identity column: an insert without it takes the
--   next number (read back with RETURNING). Unlike a rowid, a number is
--   never handed out twice, even after the largest row is deleted, and an
--   insert rolled back leaves a gap. An insert may name the number itself,
--   but then the sequence must be moved past it (setval).
-- * Every text column is COLLATE "C", so text compares, sorts and is
--   indexed byte by byte, as in SQLite, whatever collation the database was
--   created with: paging by id or name never depends on a locale, and an
--   operating system's locale update cannot silently reorder an index.
-- * SQLite's COLLATE NOCASE columns (organization names, handles, email)
--   are CITEXT COLLATE "C": citext compares lowercased values, and lower()
--   under "C" folds the ASCII letters only, exactly as NOCASE does. Being a
--   type, it keeps `handle = $1` and the unique indexes case-insensitive
--   with the queries unchanged. (A lower() index would need every query to
--   say lower(handle) = lower($1), and one that forgets is a wrong answer,
--   not an error.)
-- * json_valid() checks call chatd_json_valid() (PostgreSQL 15 has no IS
--   JSON): a document that is not JSON fails the CHECK (SQLSTATE 23514), as
--   in SQLite.
-- * Full-text search is PostgreSQL's: messages and memories have a
--   generated column, search, holding their content's words, and a GIN index
--   on it. SQLite's FTS5 tables, their queue and their triggers have no
--   counterpart here.
-- * Up to version 12, the first on PostgreSQL, columns that schema.sql
--   adds with ALTER TABLE are in their CREATE TABLE, at the same place (the
--   end), and the data upgrades of its "-- Version N" sections are left
--   out: no PostgreSQL database is older. From version 13 on, this file
--   grows as schema.sql does: each version's objects follow a "-- Version
--   N" line at the end and set the schema_version row to N; that text
--   upgrades version N-1 to N (store/migrate.go).
--
-- citext and unaccent are trusted extensions: the database's owner may
-- create them, no superuser is needed.

CREATE EXTENSION IF NOT EXISTS citext;

-- Whether doc is JSON, for the CHECKs that schema.sql writes json_valid().
-- The cast raises an error for anything else, which is caught here.
CREATE FUNCTION chatd_json_valid(doc TEXT) RETURNS BOOLEAN
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE AS $$
BEGIN
    PERFORM doc::json;
    RETURN TRUE;
EXCEPTION WHEN invalid_text_representation OR untranslatable_character THEN
    RETURN FALSE;
END
$$;

-- The text full-text search indexes and matches: content without its
-- accents (cafe finds café, as in SQLite) where the unaccent extension is
-- installed on the server, else content as it is. Searches must put their
-- terms through it too. unaccent() is only STABLE, its rules being a file
-- one could edit, and a generated column takes IMMUTABLE functions alone:
-- this wrapper names its dictionary and is declared IMMUTABLE, which holds
-- as long as the rules stay as installed (after an edit, the search columns
-- must be recomputed). The 'simple' configuration then lowercases words
-- under the database's LC_CTYPE: in a database with LC_CTYPE 'C', ASCII
-- letters only.
DO $$
BEGIN
    IF EXISTS (SELECT FROM pg_available_extensions WHERE name = 'unaccent') THEN
        CREATE EXTENSION IF NOT EXISTS unaccent;
        EXECUTE $f$CREATE FUNCTION chatd_search_text(content TEXT) RETURNS TEXT
            LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
            RETURN unaccent('unaccent'::regdictionary, content)$f$;
    ELSE
        EXECUTE $f$CREATE FUNCTION chatd_search_text(content TEXT) RETURNS TEXT
            LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
            RETURN content$f$;
    END IF;
END
$$;

-- The words full-text search indexes and matches, as SQLite's unicode61
-- tokenizer finds them: chatd_search_text's text, lowercased, with every
-- character but a letter or a digit a space, so that the parser finds the
-- same words in a text and in a query (it would keep "«deploy", "-7" or an
-- e-mail address as one word). Letters and case are Unicode's where the
-- server has ICU, else the database's LC_CTYPE's. Searches put each term
-- of a query through it.
DO $$
BEGIN
    IF EXISTS (SELECT FROM pg_collation WHERE collname = 'und-x-icu') THEN
        EXECUTE $f$CREATE FUNCTION chatd_search_words(content TEXT) RETURNS TEXT
            LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
            RETURN lower(regexp_replace(chatd_search_text(content) COLLATE "und-x-icu", '[^[:alnum:]]+', ' ', 'g'))$f$;
    ELSE
        EXECUTE $f$CREATE FUNCTION chatd_search_words(content TEXT) RETURNS TEXT
            LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
            RETURN lower(regexp_replace(chatd_search_text(content), '[^[:alnum:]\u0080-\U0010FFFF]+', ' ', 'g'))$f$;
    END IF;
END
$$;

CREATE TABLE organizations (
    id          TEXT COLLATE "C" PRIMARY KEY,
    name        CITEXT COLLATE "C" NOT NULL UNIQUE,
    inserted_at BIGINT NOT NULL
);

-- removed_at: a person an admin removed (store/people.go). The row stays,
-- so that what they wrote keeps its sender and their handle is never
-- someone else's, but nothing authenticates, lists or finds them any more.
CREATE TABLE users (
    id                  TEXT COLLATE "C" PRIMARY KEY,
    organization_id     TEXT COLLATE "C" NOT NULL REFERENCES organizations (id),
    handle              CITEXT COLLATE "C" NOT NULL UNIQUE,
    email               CITEXT COLLATE "C",
    first_name          TEXT COLLATE "C" NOT NULL,
    last_name           TEXT COLLATE "C" NOT NULL DEFAULT '',
    role                TEXT COLLATE "C" NOT NULL CHECK (role IN ('user', 'admin')),
    listed_in_directory BIGINT NOT NULL DEFAULT 0 CHECK (listed_in_directory IN (0, 1)),
    inserted_at         BIGINT NOT NULL,
    updated_at          BIGINT NOT NULL,
    removed_at          BIGINT
);

CREATE UNIQUE INDEX users_email ON users (email) WHERE email IS NOT NULL;
CREATE INDEX users_organization ON users (organization_id);

-- An agent's handle is "<owner handle>/<slug>". User handles never change, so the
-- full handle is stored to make lookups by handle a single index probe. A deleted
-- agent keeps its row (old messages still name their sender) but frees its handle.
CREATE TABLE agents (
    id                       TEXT COLLATE "C" PRIMARY KEY,
    owner_id                 TEXT COLLATE "C" NOT NULL REFERENCES users (id),
    organization_id          TEXT COLLATE "C" NOT NULL REFERENCES organizations (id),
    slug                     TEXT COLLATE "C" NOT NULL,
    handle                   CITEXT COLLATE "C" NOT NULL,
    name                     TEXT COLLATE "C" NOT NULL,
    description              TEXT COLLATE "C",
    bio                      TEXT COLLATE "C",
    tags                     TEXT COLLATE "C" NOT NULL DEFAULT '[]'
        CHECK (CASE WHEN chatd_json_valid(tags) THEN json_typeof(tags::json) = 'array' ELSE FALSE END),
    listed_in_directory      BIGINT NOT NULL DEFAULT 0 CHECK (listed_in_directory IN (0, 1)),
    is_external              BIGINT NOT NULL DEFAULT 1 CHECK (is_external IN (0, 1)),
    is_global                BIGINT NOT NULL DEFAULT 0 CHECK (is_global IN (0, 1)),
    shared_with_organization BIGINT NOT NULL DEFAULT 0 CHECK (shared_with_organization IN (0, 1)),
    inserted_at              BIGINT NOT NULL,
    updated_at               BIGINT NOT NULL,
    deleted_at               BIGINT
);

CREATE UNIQUE INDEX agents_handle ON agents (handle) WHERE deleted_at IS NULL;
CREATE INDEX agents_owner ON agents (owner_id, inserted_at) WHERE deleted_at IS NULL;

-- API keys are stored as SHA-256 digests only; the key itself is shown once. A key
-- belongs to exactly one user (human key) or one agent (agent key). People
-- name their keys to tell them apart; keys made before names read "".
CREATE TABLE api_keys (
    id           TEXT COLLATE "C" PRIMARY KEY,
    digest       BYTEA NOT NULL UNIQUE CHECK (octet_length(digest) = 32),
    prefix       TEXT COLLATE "C" NOT NULL,
    user_id      TEXT COLLATE "C" REFERENCES users (id) ON DELETE CASCADE,
    agent_id     TEXT COLLATE "C" REFERENCES agents (id) ON DELETE CASCADE,
    inserted_at  BIGINT NOT NULL,
    last_used_at BIGINT,
    name         TEXT COLLATE "C" NOT NULL DEFAULT '',
    CHECK ((user_id IS NULL) != (agent_id IS NULL))
);

CREATE INDEX api_keys_user ON api_keys (user_id) WHERE user_id IS NOT NULL;
CREATE INDEX api_keys_agent ON api_keys (agent_id) WHERE agent_id IS NOT NULL;

-- Rooms. A soft-deleted room (deleted_at set) disappears from every listing
-- and read. quota_owner_id is the human accountable for the room under the
-- plan quotas: the creator, or the owner of the creating agent.
CREATE TABLE rooms (
    id              TEXT COLLATE "C" PRIMARY KEY,
    organization_id TEXT COLLATE "C" NOT NULL REFERENCES organizations (id),
    title           TEXT COLLATE "C",
    title_locked    BIGINT NOT NULL DEFAULT 0 CHECK (title_locked IN (0, 1)),
    task_id         TEXT COLLATE "C",
    type            TEXT COLLATE "C" NOT NULL DEFAULT 'direct' CHECK (type IN ('direct', 'group', 'task')),
    status          TEXT COLLATE "C" NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'archived', 'closed')),
    creator_id      TEXT COLLATE "C" NOT NULL,
    creator_type    TEXT COLLATE "C" NOT NULL CHECK (creator_type IN ('User', 'Agent')),
    quota_owner_id  TEXT COLLATE "C" NOT NULL REFERENCES users (id),
    last_message_at BIGINT,
    message_count   BIGINT NOT NULL DEFAULT 0,
    inserted_at     BIGINT NOT NULL,
    updated_at      BIGINT NOT NULL,
    deleted_at      BIGINT
);

CREATE INDEX rooms_quota_owner ON rooms (quota_owner_id) WHERE deleted_at IS NULL;

-- Who is in a room: a user or an agent (exactly one of user_id, agent_id;
-- member_id repeats it so that membership is one index whatever the kind).
-- A blocked row grants no read access, and a blocked agent cannot post.
CREATE TABLE participants (
    room_id     TEXT COLLATE "C" NOT NULL REFERENCES rooms (id),
    member_id   TEXT COLLATE "C" NOT NULL,
    user_id     TEXT COLLATE "C" REFERENCES users (id),
    agent_id    TEXT COLLATE "C" REFERENCES agents (id),
    role        TEXT COLLATE "C" NOT NULL CHECK (role IN ('owner', 'admin', 'member')),
    status      TEXT COLLATE "C" NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'blocked')),
    inserted_at BIGINT NOT NULL,
    updated_at  BIGINT NOT NULL,
    PRIMARY KEY (room_id, member_id),
    CHECK ((user_id IS NULL) != (agent_id IS NULL)),
    CHECK (member_id = coalesce(user_id, agent_id))
);

CREATE INDEX participants_member ON participants (member_id, room_id);

-- Messages: text messages and events. seq is the order of the room's
-- history and the key of every message listing. sender_name is captured at
-- write time; mentions holds the resolved mention list as JSON.
--
-- Replies, edits and deletions: a reply names its parent, a message of the
-- same room (reply_to_seq); a parent removed for good leaves its replies
-- without one. edited_at is when the content last changed; deleted_at makes
-- the message a tombstone: its content, attachments and edit history are
-- gone, its place in the room stays.
CREATE TABLE messages (
    seq          BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
    id           TEXT COLLATE "C" NOT NULL UNIQUE,
    room_id      TEXT COLLATE "C" NOT NULL REFERENCES rooms (id),
    sender_id    TEXT COLLATE "C" NOT NULL,
    sender_type  TEXT COLLATE "C" NOT NULL CHECK (sender_type IN ('User', 'Agent')),
    sender_name  TEXT COLLATE "C" NOT NULL,
    message_type TEXT COLLATE "C" NOT NULL CHECK (message_type IN
        ('text', 'tool_call', 'tool_result', 'thought', 'error', 'task', 'attention', 'system', 'action', 'guidelines')),
    content      TEXT COLLATE "C" NOT NULL,
    mentions     TEXT COLLATE "C" NOT NULL DEFAULT '[]' CHECK (chatd_json_valid(mentions)),
    metadata     TEXT COLLATE "C" NOT NULL DEFAULT '{}' CHECK (chatd_json_valid(metadata)),
    inserted_at  BIGINT NOT NULL,
    updated_at   BIGINT NOT NULL,
    reply_to_seq BIGINT REFERENCES messages (seq) ON DELETE SET NULL,
    edited_at    BIGINT,
    deleted_at   BIGINT,
    -- Full-text search (GET /api/v1/me/search and /api/v1/agent/search):
    -- the words of content, kept by PostgreSQL as content changes. The
    -- 'simple' configuration keeps every word as written, lowercased, with
    -- no stemming and no stop words. A search keeps to the rooms its caller
    -- reads, so a deleted room's messages are never found.
    search       TSVECTOR GENERATED ALWAYS AS (to_tsvector('simple', chatd_search_words(content))) STORED
);

CREATE INDEX messages_room ON messages (room_id, seq);
CREATE INDEX messages_sender ON messages (room_id, sender_id, seq);
CREATE INDEX messages_replies ON messages (reply_to_seq, seq) WHERE reply_to_seq IS NOT NULL;
-- The search index: which messages hold a word.
CREATE INDEX messages_search ON messages USING gin (search);

-- One row per agent a text message mentions: that agent's delivery state
-- and its processing attempts (JSON, most recent last). The partial index
-- makes "oldest message not processed yet" (/next) one index probe.
CREATE TABLE deliveries (
    agent_id        TEXT COLLATE "C" NOT NULL REFERENCES agents (id),
    room_id         TEXT COLLATE "C" NOT NULL REFERENCES rooms (id),
    message_seq     BIGINT NOT NULL REFERENCES messages (seq),
    status          TEXT COLLATE "C" NOT NULL DEFAULT 'pending'
        CHECK (status IN ('pending', 'delivered', 'processing', 'processed', 'failed')),
    current_attempt BIGINT NOT NULL DEFAULT 0,
    attempts        TEXT COLLATE "C" NOT NULL DEFAULT '[]' CHECK (chatd_json_valid(attempts)),
    processed_at    BIGINT,
    updated_at      BIGINT NOT NULL,
    PRIMARY KEY (agent_id, room_id, message_seq)
);

CREATE INDEX deliveries_open ON deliveries (agent_id, room_id, message_seq) WHERE status != 'processed';
CREATE INDEX deliveries_message ON deliveries (message_seq);

-- The room goal (board) and its append-only audit. Actors are JSON objects
-- {id, name, type, handle} captured at write time.
CREATE TABLE boards (
    room_id      TEXT COLLATE "C" PRIMARY KEY REFERENCES rooms (id),
    goal_title   TEXT COLLATE "C",
    goal_summary TEXT COLLATE "C",
    created_by   TEXT COLLATE "C" NOT NULL CHECK (chatd_json_valid(created_by)),
    updated_by   TEXT COLLATE "C" NOT NULL CHECK (chatd_json_valid(updated_by)),
    inserted_at  BIGINT NOT NULL,
    updated_at   BIGINT NOT NULL
);

CREATE TABLE board_events (
    seq     BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
    room_id TEXT COLLATE "C" NOT NULL REFERENCES rooms (id),
    actor   TEXT COLLATE "C" NOT NULL CHECK (chatd_json_valid(actor)),
    event   TEXT COLLATE "C" NOT NULL CHECK (event IN ('goal_set', 'goal_edited')),
    payload TEXT COLLATE "C" NOT NULL CHECK (chatd_json_valid(payload)),
    at      BIGINT NOT NULL
);

CREATE INDEX board_events_room ON board_events (room_id, seq);

-- Server-wide secrets and settings (the token-signing secret lives here, so
-- the database alone is a complete, self-contained copy of the server).
CREATE TABLE settings (
    name  TEXT COLLATE "C" PRIMARY KEY,
    value BYTEA NOT NULL
);

-- Contacts: one row per direction (the id is the owner's record of it), so
-- "my contacts" is one index range. Requests go from a requester to a
-- recipient; at most one pending request per direction.
CREATE TABLE contacts (
    id           TEXT COLLATE "C" PRIMARY KEY,
    owner_id     TEXT COLLATE "C" NOT NULL,
    owner_type   TEXT COLLATE "C" NOT NULL CHECK (owner_type IN ('User', 'Agent')),
    contact_id   TEXT COLLATE "C" NOT NULL,
    contact_type TEXT COLLATE "C" NOT NULL CHECK (contact_type IN ('User', 'Agent')),
    inserted_at  BIGINT NOT NULL,
    UNIQUE (owner_id, contact_id)
);

CREATE TABLE contact_requests (
    id             TEXT COLLATE "C" PRIMARY KEY,
    requester_id   TEXT COLLATE "C" NOT NULL,
    requester_type TEXT COLLATE "C" NOT NULL CHECK (requester_type IN ('User', 'Agent')),
    recipient_id   TEXT COLLATE "C" NOT NULL,
    recipient_type TEXT COLLATE "C" NOT NULL CHECK (recipient_type IN ('User', 'Agent')),
    message        TEXT COLLATE "C",
    status         TEXT COLLATE "C" NOT NULL CHECK (status IN ('pending', 'approved', 'rejected', 'cancelled', 'expired')),
    inserted_at    BIGINT NOT NULL,
    responded_at   BIGINT
);

CREATE UNIQUE INDEX contact_requests_pending ON contact_requests (requester_id, recipient_id) WHERE status = 'pending';
CREATE INDEX contact_requests_recipient ON contact_requests (recipient_id, status, inserted_at);
CREATE INDEX contact_requests_requester ON contact_requests (requester_id, status, inserted_at);

-- Memories agents keep about subjects (people and agents) or for their
-- whole organization; content is indexed for full-text search.
CREATE TABLE memories (
    id              TEXT COLLATE "C" PRIMARY KEY,
    organization_id TEXT COLLATE "C" NOT NULL REFERENCES organizations (id),
    source_agent_id TEXT COLLATE "C" NOT NULL REFERENCES agents (id),
    scope           TEXT COLLATE "C" NOT NULL CHECK (scope IN ('subject', 'organization')),
    subject_id      TEXT COLLATE "C",
    chat_room_id    TEXT COLLATE "C",
    system          TEXT COLLATE "C" NOT NULL CHECK (system IN ('sensory', 'working', 'long_term')),
    type            TEXT COLLATE "C" NOT NULL
        CHECK (type IN ('iconic', 'echoic', 'haptic', 'episodic', 'semantic', 'procedural')),
    segment         TEXT COLLATE "C" NOT NULL CHECK (segment IN ('user', 'agent', 'tool', 'guideline')),
    content         TEXT COLLATE "C" NOT NULL,
    thought         TEXT COLLATE "C",
    metadata        TEXT COLLATE "C" CHECK (metadata IS NULL OR chatd_json_valid(metadata)),
    status          TEXT COLLATE "C" NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'superseded', 'archived')),
    superseded_by   TEXT COLLATE "C",
    inserted_at     BIGINT NOT NULL,
    updated_at      BIGINT NOT NULL,
    -- Full-text search over content, as for messages.
    search          TSVECTOR GENERATED ALWAYS AS (to_tsvector('simple', chatd_search_words(content))) STORED,
    CHECK ((scope = 'subject') = (subject_id IS NOT NULL))
);

CREATE INDEX memories_organization ON memories (organization_id, inserted_at);
CREATE INDEX memories_subject ON memories (subject_id, inserted_at) WHERE subject_id IS NOT NULL;
CREATE INDEX memories_source ON memories (source_agent_id, inserted_at);
-- The search index: which memories hold a word.
CREATE INDEX memories_search ON memories USING gin (search);

-- Tasks on a room's board, numbered per room (#1, #2, ... never reused),
-- with each participant's own assignment and an append-only history.
-- Actors are JSON objects {id, name, type, handle} captured at write time.
CREATE TABLE tasks (
    id               TEXT COLLATE "C" PRIMARY KEY,
    room_id          TEXT COLLATE "C" NOT NULL REFERENCES rooms (id),
    number           BIGINT NOT NULL,
    subject          TEXT COLLATE "C" NOT NULL,
    detail           TEXT COLLATE "C" NOT NULL DEFAULT '',
    state            TEXT COLLATE "C" NOT NULL DEFAULT 'active'
        CHECK (state IN ('active', 'cancelled', 'superseded', 'archived')),
    superseded_by_id TEXT COLLATE "C",
    created_by       TEXT COLLATE "C" NOT NULL CHECK (chatd_json_valid(created_by)),
    inserted_at      BIGINT NOT NULL,
    updated_at       BIGINT NOT NULL,
    UNIQUE (room_id, number)
);

CREATE TABLE task_assignments (
    task_id          TEXT COLLATE "C" NOT NULL REFERENCES tasks (id),
    assignee_id      TEXT COLLATE "C" NOT NULL,
    assignee         TEXT COLLATE "C" NOT NULL CHECK (chatd_json_valid(assignee)),
    status           TEXT COLLATE "C" NOT NULL
        CHECK (status IN ('pending', 'in_progress', 'blocked', 'in_review', 'failed', 'completed')),
    active_form      TEXT COLLATE "C" NOT NULL DEFAULT '',
    linked_native_id TEXT COLLATE "C" NOT NULL DEFAULT '',
    updated_at       BIGINT NOT NULL,
    PRIMARY KEY (task_id, assignee_id)
);

CREATE TABLE task_events (
    seq     BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
    task_id TEXT COLLATE "C" NOT NULL REFERENCES tasks (id),
    actor   TEXT COLLATE "C" NOT NULL CHECK (chatd_json_valid(actor)),
    event   TEXT COLLATE "C" NOT NULL CHECK (event IN ('created', 'edited', 'status_changed', 'commented', 'dropped', 'cancelled',
        'superseded', 'archived', 'unarchived')),
    payload TEXT COLLATE "C" NOT NULL CHECK (chatd_json_valid(payload)),
    at      BIGINT NOT NULL
);

CREATE INDEX task_events_task ON task_events (task_id, seq);

-- Delegations: a person lets one of their agents act on the Human API on
-- their behalf. The grant is a one-time secret (stored as a digest) that the
-- agent exchanges for a short-lived token; revoking ends both.
CREATE TABLE delegations (
    id               TEXT COLLATE "C" PRIMARY KEY,
    user_id          TEXT COLLATE "C" NOT NULL REFERENCES users (id),
    agent_id         TEXT COLLATE "C" NOT NULL REFERENCES agents (id),
    scopes           TEXT COLLATE "C" NOT NULL CHECK (chatd_json_valid(scopes)),
    grant_digest     BYTEA NOT NULL UNIQUE,
    grant_expires_at BIGINT NOT NULL,
    token_ttl        BIGINT NOT NULL,
    exchanged_at     BIGINT,
    revoked_at       BIGINT,
    last_used_at     BIGINT,
    inserted_at      BIGINT NOT NULL
);

CREATE INDEX delegations_agent ON delegations (agent_id, inserted_at);

-- Files uploaded to a room, stored in fixed-size chunks inside this database
-- (one backup holds everything; a Range read touches only its chunks). A
-- file is 'uploading' while its chunks arrive and 'ready' once its size and
-- digest checked out; only ready files can be attached or downloaded.
--
-- A file past its room's file retention is expired first (expired_at: it
-- reads as missing at once, and its attachments go), then its chunks are
-- deleted a few at a time, then the file itself: one large file never
-- holds up the writer for long, and a restart goes on where the last run
-- stopped.
CREATE TABLE files (
    id            TEXT COLLATE "C" PRIMARY KEY,
    room_id       TEXT COLLATE "C" NOT NULL REFERENCES rooms (id),
    uploader_id   TEXT COLLATE "C" NOT NULL,
    uploader_type TEXT COLLATE "C" NOT NULL CHECK (uploader_type IN ('User', 'Agent')),
    name          TEXT COLLATE "C" NOT NULL,
    content_type  TEXT COLLATE "C" NOT NULL,
    size          BIGINT NOT NULL DEFAULT 0,
    sha256        TEXT COLLATE "C" NOT NULL,
    chunk_size    BIGINT NOT NULL,
    status        TEXT COLLATE "C" NOT NULL DEFAULT 'uploading' CHECK (status IN ('uploading', 'ready')),
    inserted_at   BIGINT NOT NULL,
    expired_at    BIGINT
);

CREATE INDEX files_room ON files (room_id, inserted_at);
CREATE INDEX files_uploading ON files (status) WHERE status = 'uploading';
CREATE INDEX files_expired ON files (expired_at) WHERE expired_at IS NOT NULL;

CREATE TABLE file_chunks (
    file_id TEXT COLLATE "C" NOT NULL REFERENCES files (id) ON DELETE CASCADE,
    n       BIGINT NOT NULL,
    data    BYTEA NOT NULL,
    PRIMARY KEY (file_id, n)
);

-- Which files a message carries, in the order it listed them.
CREATE TABLE message_attachments (
    message_seq BIGINT NOT NULL REFERENCES messages (seq) ON DELETE CASCADE,
    position    BIGINT NOT NULL,
    file_id     TEXT COLLATE "C" NOT NULL REFERENCES files (id),
    PRIMARY KEY (message_seq, position)
);

CREATE INDEX message_attachments_file ON message_attachments (file_id);

-- Bulk deletion jobs and their items, persisted so that a job survives a
-- restart: items are attempted in position order and each item's outcome is
-- written in the same transaction as its deletion, so none runs twice.
CREATE TABLE bulk_jobs (
    id            TEXT COLLATE "C" PRIMARY KEY,
    user_id       TEXT COLLATE "C" NOT NULL REFERENCES users (id),
    resource_type TEXT COLLATE "C" NOT NULL CHECK (resource_type IN ('chat', 'agent')),
    force         BIGINT NOT NULL DEFAULT 0 CHECK (force IN (0, 1)),
    status        TEXT COLLATE "C" NOT NULL DEFAULT 'queued' CHECK (status IN ('queued', 'processing', 'completed', 'failed')),
    inserted_at   BIGINT NOT NULL,
    started_at    BIGINT,
    completed_at  BIGINT
);

CREATE INDEX bulk_jobs_open ON bulk_jobs (inserted_at) WHERE status IN ('queued', 'processing');

CREATE TABLE bulk_job_items (
    job_id        TEXT COLLATE "C" NOT NULL REFERENCES bulk_jobs (id),
    position      BIGINT NOT NULL,
    target_id     TEXT COLLATE "C" NOT NULL,
    status        TEXT COLLATE "C" NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'succeeded', 'failed')),
    error_code    TEXT COLLATE "C",
    error_message TEXT COLLATE "C",
    PRIMARY KEY (job_id, position)
);

-- Accounts for the web app. A person's password is stored only as an
-- argon2id hash in PHC form ($argon2id$v=19$m=...,t=...,p=...$salt$hash), so
-- its parameters can be raised later without a schema change.
CREATE TABLE user_passwords (
    user_id    TEXT COLLATE "C" PRIMARY KEY REFERENCES users (id) ON DELETE CASCADE,
    hash       TEXT COLLATE "C" NOT NULL,
    updated_at BIGINT NOT NULL
);

-- One row per sign-in. A session token names its row, and every use checks
-- the row is live, so signing out ends the token at once.
CREATE TABLE sessions (
    id          TEXT COLLATE "C" PRIMARY KEY,
    user_id     TEXT COLLATE "C" NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    inserted_at BIGINT NOT NULL,
    expires_at  BIGINT NOT NULL,
    revoked_at  BIGINT
);

CREATE INDEX sessions_user ON sessions (user_id);

-- The first-run link that creates the first person: single use, short
-- lived, stored as a digest only.
CREATE TABLE setup_tokens (
    digest     BYTEA PRIMARY KEY CHECK (octet_length(digest) = 32),
    expires_at BIGINT NOT NULL,
    used_at    BIGINT
);

-- How far each person has read each room, for chatd's own unread counts
-- (the Band API has none): the seq of the last message they read; no row
-- reads as 0, nothing read. Keyed by person and room rather than kept on
-- participants, since a person also reads rooms through the agents they own,
-- where they have no participant row.
CREATE TABLE read_markers (
    user_id       TEXT COLLATE "C" NOT NULL REFERENCES users (id),
    room_id       TEXT COLLATE "C" NOT NULL REFERENCES rooms (id),
    last_read_seq BIGINT NOT NULL,
    PRIMARY KEY (user_id, room_id)
);

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
    id                   TEXT COLLATE "C" PRIMARY KEY,
    agent_id             TEXT COLLATE "C" NOT NULL REFERENCES agents (id),
    url                  TEXT COLLATE "C" NOT NULL,
    description          TEXT COLLATE "C" NOT NULL DEFAULT '',
    secret               TEXT COLLATE "C" NOT NULL,
    consecutive_failures BIGINT NOT NULL DEFAULT 0,
    sent_through         BIGINT NOT NULL DEFAULT 0,
    paused_at            BIGINT,
    pause_reason         TEXT COLLATE "C",
    inserted_at          BIGINT NOT NULL,
    updated_at           BIGINT NOT NULL,
    UNIQUE (agent_id, url),
    CHECK ((paused_at IS NULL) = (pause_reason IS NULL))
);

-- The webhook outbox and its delivery log in one: a row per endpoint and
-- message, written in the transaction that stores the message, so a
-- committed message always has its deliveries. id is the webhook-id header,
-- the same on every attempt; nothing looks a row up by it, so it has no
-- index: each index is one more page a message's commit writes. A pending
-- row waits for next_attempt_at; an endpoint is sent its pending rows one
-- at a time, in message order, the first being the first after its
-- sent_through. The last_* columns describe the latest attempt.
CREATE TABLE webhook_deliveries (
    id               TEXT COLLATE "C" NOT NULL,
    endpoint_id      TEXT COLLATE "C" NOT NULL REFERENCES webhook_endpoints (id) ON DELETE CASCADE,
    message_seq      BIGINT NOT NULL REFERENCES messages (seq),
    status           TEXT COLLATE "C" NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'delivered', 'failed')),
    attempts         BIGINT NOT NULL DEFAULT 0,
    next_attempt_at  BIGINT NOT NULL,
    last_attempt_at  BIGINT,
    last_status_code BIGINT,
    last_latency_ms  BIGINT,
    last_error       TEXT COLLATE "C",
    inserted_at      BIGINT NOT NULL,
    completed_at     BIGINT,
    UNIQUE (endpoint_id, message_seq)
);

-- Deleting a message looks up its webhook requests by message (the
-- foreign key's own check does too): without this index, a scan of the
-- whole outbox per message deleted.
CREATE INDEX webhook_deliveries_message ON webhook_deliveries (message_seq);

-- A message's edit history, for the room's owner: the content it had before
-- each edit (edit 1 holds the original), and when that edit was made.
CREATE TABLE message_edits (
    message_seq BIGINT NOT NULL REFERENCES messages (seq) ON DELETE CASCADE,
    edit        BIGINT NOT NULL,
    content     TEXT COLLATE "C" NOT NULL,
    edited_at   BIGINT NOT NULL,
    PRIMARY KEY (message_seq, edit)
);

-- Reactions: at most one of each emoji per person or agent on a message.
CREATE TABLE reactions (
    message_seq BIGINT NOT NULL REFERENCES messages (seq) ON DELETE CASCADE,
    emoji       TEXT COLLATE "C" NOT NULL,
    actor_id    TEXT COLLATE "C" NOT NULL,
    actor_type  TEXT COLLATE "C" NOT NULL CHECK (actor_type IN ('User', 'Agent')),
    inserted_at BIGINT NOT NULL,
    PRIMARY KEY (message_seq, emoji, actor_id)
);

-- OAuth sign-in for MCP clients (server/server_oauth.go): a client registers
-- itself (RFC 7591), a person consents in the web app to let it act as one of
-- their agents or as themselves, and the client exchanges the one-time code
-- for tokens that work on /mcp. Every secret (code, access and refresh token)
-- is stored as its SHA-256 digest only; a client id is no secret.

-- Registered clients. Anyone may register one, so clients that were never
-- used are dropped after a day when the table is near its bound.
CREATE TABLE oauth_clients (
    id            TEXT COLLATE "C" PRIMARY KEY,
    name          TEXT COLLATE "C" NOT NULL,
    uri           TEXT COLLATE "C" NOT NULL DEFAULT '',
    redirect_uris TEXT COLLATE "C" NOT NULL, -- a JSON array of the registered redirect URIs
    inserted_at   BIGINT NOT NULL,
    last_used_at  BIGINT
);

-- One row per consent that tokens were issued for: the client acts as the
-- agent (agent_id set) or as the person. expires_at is when its newest
-- refresh token lapses; revoking (revoked_at) ends every token of the grant.
CREATE TABLE oauth_grants (
    id           TEXT COLLATE "C" PRIMARY KEY,
    client_id    TEXT COLLATE "C" NOT NULL REFERENCES oauth_clients (id),
    user_id      TEXT COLLATE "C" NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    agent_id     TEXT COLLATE "C" REFERENCES agents (id),
    scope        TEXT COLLATE "C" NOT NULL,
    resource     TEXT COLLATE "C" NOT NULL,
    inserted_at  BIGINT NOT NULL,
    expires_at   BIGINT NOT NULL,
    revoked_at   BIGINT,
    last_used_at BIGINT
);

CREATE INDEX oauth_grants_user ON oauth_grants (user_id);
CREATE INDEX oauth_grants_client ON oauth_grants (client_id);

-- Authorization codes: single use and short lived. A used code stays until it
-- expires, so that a second use is recognized (and ends the grant it made).
CREATE TABLE oauth_codes (
    digest         BYTEA PRIMARY KEY CHECK (octet_length(digest) = 32),
    client_id      TEXT COLLATE "C" NOT NULL REFERENCES oauth_clients (id),
    user_id        TEXT COLLATE "C" NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    agent_id       TEXT COLLATE "C" REFERENCES agents (id),
    redirect_uri   TEXT COLLATE "C" NOT NULL,
    code_challenge TEXT COLLATE "C" NOT NULL,
    scope          TEXT COLLATE "C" NOT NULL,
    resource       TEXT COLLATE "C" NOT NULL,
    expires_at     BIGINT NOT NULL,
    used_at        BIGINT,
    grant_id       TEXT COLLATE "C" REFERENCES oauth_grants (id) ON DELETE CASCADE
);

CREATE INDEX oauth_codes_expiry ON oauth_codes (expires_at);

-- Access and refresh tokens of a grant. A refresh token works once: its use
-- (rotated_at) issues the next pair, and a second use ends the grant.
CREATE TABLE oauth_tokens (
    digest      BYTEA PRIMARY KEY CHECK (octet_length(digest) = 32),
    grant_id    TEXT COLLATE "C" NOT NULL REFERENCES oauth_grants (id) ON DELETE CASCADE,
    kind        TEXT COLLATE "C" NOT NULL CHECK (kind IN ('access', 'refresh')),
    inserted_at BIGINT NOT NULL,
    expires_at  BIGINT NOT NULL,
    rotated_at  BIGINT
);

CREATE INDEX oauth_tokens_grant ON oauth_tokens (grant_id);

-- Attention messages a person put away in the web app ("Mark done"), one row
-- per person and message: each person's list of what needs them is their
-- own. A message removed from the database (with its room) takes its marks
-- with it; a deleted message (a tombstone) keeps them.
CREATE TABLE attention_marks (
    user_id     TEXT COLLATE "C" NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    room_id     TEXT COLLATE "C" NOT NULL,
    message_seq BIGINT NOT NULL REFERENCES messages (seq) ON DELETE CASCADE,
    done_at     BIGINT NOT NULL,
    PRIMARY KEY (user_id, message_seq)
);

CREATE INDEX attention_marks_room ON attention_marks (user_id, room_id);
CREATE INDEX attention_marks_message ON attention_marks (message_seq);

-- Invitations (server/server_invitations.go): an organization's admin
-- invites a person with a one-time link, valid a week, stored as its
-- SHA-256 digest only; the invited person picks their handle, name and
-- password on it and joins the organization with the role it names.
CREATE TABLE invitations (
    id              TEXT COLLATE "C" PRIMARY KEY,
    digest          BYTEA NOT NULL UNIQUE CHECK (octet_length(digest) = 32),
    organization_id TEXT COLLATE "C" NOT NULL REFERENCES organizations (id),
    role            TEXT COLLATE "C" NOT NULL CHECK (role IN ('user', 'admin')),
    invited_by      TEXT COLLATE "C" REFERENCES users (id) ON DELETE SET NULL,
    inserted_at     BIGINT NOT NULL,
    expires_at      BIGINT NOT NULL,
    used_at         BIGINT,
    used_by         TEXT COLLATE "C" REFERENCES users (id) ON DELETE SET NULL
);

CREATE INDEX invitations_organization ON invitations (organization_id, inserted_at);

-- Retention (store/retention.go): how many days messages, events and files
-- are kept, as an organization's default and a room's own setting. A NULL
-- count keeps that kind forever (the organization's default) or follows the
-- organization (a room's); a room's count can only shorten what its
-- organization keeps. No row reads as all NULL: nothing is ever deleted
-- until someone asks for it.
CREATE TABLE organization_retention (
    organization_id TEXT COLLATE "C" PRIMARY KEY REFERENCES organizations (id),
    text_days       BIGINT CHECK (text_days BETWEEN 1 AND 36500),
    event_days      BIGINT CHECK (event_days BETWEEN 1 AND 36500),
    file_days       BIGINT CHECK (file_days BETWEEN 1 AND 36500),
    updated_by      TEXT COLLATE "C" NOT NULL,
    updated_at      BIGINT NOT NULL
);

CREATE TABLE room_retention (
    room_id    TEXT COLLATE "C" PRIMARY KEY REFERENCES rooms (id),
    text_days  BIGINT CHECK (text_days BETWEEN 1 AND 36500),
    event_days BIGINT CHECK (event_days BETWEEN 1 AND 36500),
    file_days  BIGINT CHECK (file_days BETWEEN 1 AND 36500),
    updated_by TEXT COLLATE "C" NOT NULL,
    updated_at BIGINT NOT NULL
);

-- How far the purge has gone through each room, per kind ('text' or
-- 'event'): every message of that kind with a seq up to through_seq is
-- gone. Each purge step goes on from here, so no row is scanned twice for
-- a kind, whatever the other kind keeps.
CREATE TABLE retention_marks (
    room_id     TEXT COLLATE "C" NOT NULL REFERENCES rooms (id),
    kind        TEXT COLLATE "C" NOT NULL CHECK (kind IN ('text', 'event')),
    through_seq BIGINT NOT NULL,
    PRIMARY KEY (room_id, kind)
);

-- The schema version, schema.sql's PRAGMA user_version: one row. Later
-- versions append their objects below under a "-- Version N" line, as in
-- schema.sql, and end by setting the row to N.
CREATE TABLE schema_version (version BIGINT NOT NULL);
INSERT INTO schema_version (version) VALUES (12);

-- Version 13 --------------------------------------------------------------

CREATE TABLE leases (
    name       TEXT COLLATE "C" PRIMARY KEY,
    holder     TEXT COLLATE "C" NOT NULL,
    expires_at BIGINT NOT NULL
);

-- PostgreSQL only: the changes each write committed, as the pushes of the
-- process that wrote them describe them (store/cluster.go), so that every
-- other chatd process on the database pushes them to its own clients too.
-- Written in the write's own transaction, so a change is here exactly when
-- it committed; seq follows commit order (writers take turns: the write
-- lock). Rows are kept a few minutes: a process that was away longer
-- catches up through REST, as every client does after a gap.
CREATE TABLE cluster_changes (
    seq     BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    origin  TEXT COLLATE "C" NOT NULL,
    at      BIGINT NOT NULL,
    body    TEXT COLLATE "C" NOT NULL
);
CREATE INDEX cluster_changes_at ON cluster_changes (at);

UPDATE schema_version SET version = 13;
