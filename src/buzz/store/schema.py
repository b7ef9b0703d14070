"""The tables of relay.md §13.2, written once and typed per dialect.

Type slots: `{key}` ASCII identifiers compared bytewise (ids, pubkeys, channel ids; PostgreSQL
pins the "C" collation so `ORDER BY id` is bytewise as the tie rule needs), `{int}` 64-bit
integers, `{utf8}` client text compared byte-exactly (PostgreSQL bytea, because text cannot
hold U+0000), `{json}` the tags array. Only the event key and the search index differ in shape:
SQLite gives events an integer `seq` so the contentless FTS5 table can point at rows by rowid.

`deleted_addresses` records kind 5 `a` deletions (relay.md §3.1 item 5, §10.1 item 4): later
versions at the address with `created_at ≤ deleted_until` lose. Replaceable kinds use `d = ''`.

`nip98_seen` is the HTTP bridge's replay guard (relay.md §15 item 1): NIP-98 event ids used
within their window, in the database so that every replica and a restarted relay see them.

`relay_bans` is the operator's ban list of relay.md §7.3 item 2.3 and `relay_settings` the
operator's switches that a running relay re-reads (`workspace` = `open` | `closed`, §4.4); both
are written by `buzz admin` (`buzz.store.operator`).

`event_tags.in_channel` is 1 for an `h` row naming the event's own channel, 0 otherwise (NULL on
rows written before it existed): PostgreSQL's `#h` window reads the others from a partial index.

`agent_owners` is the registered owner of relay.md §7.3 item 4: agent → owner, first write wins.

Workspace tables (`buzz.store.workspace`): `event_threads` (root and depth of each reply, §9
item 1), `reactions` (the active-reaction index, §9 item 3), `dm_channels` (participant set →
DM channel, the sorted pubkeys joined by `,`, §4.8) and `dm_hidden` (§4.8 item 4).

`jobs` holds one row per job request 43001 (`buzz.store.jobs`, jobs spec §5.3 item 6): the
state its lifecycle events moved it to, checked and changed in their insert's transaction.

Media tables (`buzz.store.media`, media.md §10): `media_blobs` (one row per stored blob, the
authority for its type and extension), `media_uploaders` (who holds which blob, for access and
quota), `media_refs` (blob → referencing event; a reference counts while its event is live,
decision 194) and `media_chunks` (the bytes in 1 MiB rows when `BUZZ_MEDIA_STORE=db`; keys
`<sha256>` and `<sha256>.thumb.jpg`).
"""

from __future__ import annotations

_TABLES = """
CREATE TABLE IF NOT EXISTS channels (
    id {key} PRIMARY KEY,
    name {text} NOT NULL,
    about {text} NOT NULL DEFAULT '',
    visibility {text} NOT NULL CHECK (visibility IN ('open', 'private')),
    channel_type {text} NOT NULL CHECK (channel_type IN ('stream', 'forum', 'dm', 'workflow')),
    topic {text} NOT NULL DEFAULT '',
    purpose {text} NOT NULL DEFAULT '',
    ttl_seconds {int},
    created_by {key} NOT NULL,
    created_at {int} NOT NULL,
    archived_at {int},
    deleted_at {int}
);
CREATE TABLE IF NOT EXISTS channel_members (
    channel_id {key} NOT NULL REFERENCES channels (id),
    pubkey {key} NOT NULL,
    role {text} NOT NULL CHECK (role IN ('owner', 'admin', 'member', 'guest', 'bot')),
    invited_by {key},
    joined_at {int} NOT NULL,
    removed_at {int},
    removed_by {key},
    PRIMARY KEY (channel_id, pubkey)
);
CREATE INDEX IF NOT EXISTS channel_members_by_pubkey ON channel_members (pubkey, channel_id);
CREATE TABLE IF NOT EXISTS events (
    {event_key},
    pubkey {key} NOT NULL,
    created_at {int} NOT NULL,
    kind {int} NOT NULL,
    tags {json} NOT NULL,
    content {utf8} NOT NULL,
    sig {key} NOT NULL,
    received_at {int} NOT NULL,
    channel_id {key} REFERENCES channels (id) DEFERRABLE INITIALLY DEFERRED,
    d_tag {utf8},
    deleted_at {int}
);
CREATE INDEX IF NOT EXISTS events_by_kind ON events (kind, created_at);
-- authors+kinds in time order (relay.md §6.4): one index seek per (author, kind) pair.
DROP INDEX IF EXISTS events_by_pubkey;
CREATE INDEX IF NOT EXISTS events_by_author ON events (pubkey, kind, created_at);
-- Partial: global events (no channel) and non-addressable kinds (no d) skip a B-tree each on
-- insert: every query on these columns compares them with a value, which implies NOT NULL.
DROP INDEX IF EXISTS events_by_channel;
{channel_index};
DROP INDEX IF EXISTS events_by_address;
CREATE INDEX IF NOT EXISTS events_by_d_tag ON events (kind, pubkey, d_tag) WHERE d_tag IS NOT NULL;
CREATE INDEX IF NOT EXISTS events_by_time ON events (created_at, id);
CREATE TABLE IF NOT EXISTS event_tags (
    event_id {key} NOT NULL REFERENCES events (id),
    name {key} NOT NULL,
    value {utf8} NOT NULL,
    in_channel {int},
    PRIMARY KEY (event_id, name, value)
);
CREATE INDEX IF NOT EXISTS event_tags_by_value ON event_tags (name, value, event_id);
CREATE TABLE IF NOT EXISTS relay_members (
    pubkey {key} PRIMARY KEY,
    role {key} NOT NULL,
    added_at {int} NOT NULL
);
CREATE TABLE IF NOT EXISTS relay_bans (
    pubkey {key} PRIMARY KEY,
    reason {text} NOT NULL DEFAULT '',
    banned_at {int} NOT NULL
);
CREATE TABLE IF NOT EXISTS relay_settings (
    name {key} PRIMARY KEY,
    value {text} NOT NULL
);
CREATE TABLE IF NOT EXISTS agent_owners (
    agent {key} PRIMARY KEY,
    owner {key} NOT NULL,
    created_at {int} NOT NULL
);
CREATE TABLE IF NOT EXISTS event_threads (
    event_id {key} PRIMARY KEY REFERENCES events (id),
    root_id {key} NOT NULL,
    parent_id {key} NOT NULL,
    depth {int} NOT NULL
);
CREATE INDEX IF NOT EXISTS event_threads_by_root ON event_threads (root_id);
CREATE TABLE IF NOT EXISTS reactions (
    author {key} NOT NULL,
    target_id {key} NOT NULL,
    content {utf8} NOT NULL,
    event_id {key} NOT NULL UNIQUE REFERENCES events (id),
    PRIMARY KEY (author, target_id, content)
);
CREATE TABLE IF NOT EXISTS dm_channels (
    participants {key} PRIMARY KEY,
    channel_id {key} NOT NULL REFERENCES channels (id)
);
CREATE TABLE IF NOT EXISTS dm_hidden (
    channel_id {key} NOT NULL REFERENCES channels (id),
    pubkey {key} NOT NULL,
    PRIMARY KEY (channel_id, pubkey)
);
CREATE TABLE IF NOT EXISTS jobs (
    id {key} PRIMARY KEY REFERENCES events (id),
    channel_id {key} NOT NULL,
    requester {key} NOT NULL,
    assignee {key} NOT NULL,
    state {text} NOT NULL,
    last_seq {int} NOT NULL,
    disposition {text},
    parent {key},
    created_at {int} NOT NULL,
    updated_at {int} NOT NULL
);
CREATE TABLE IF NOT EXISTS deleted_addresses (
    kind {int} NOT NULL,
    pubkey {key} NOT NULL,
    d {utf8} NOT NULL,
    deleted_until {int} NOT NULL,
    PRIMARY KEY (kind, pubkey, d)
);
CREATE TABLE IF NOT EXISTS nip98_seen (
    event_id {key} PRIMARY KEY,
    expires_at {int} NOT NULL
);
CREATE INDEX IF NOT EXISTS nip98_seen_by_expiry ON nip98_seen (expires_at);
CREATE TABLE IF NOT EXISTS media_blobs (
    sha256 {key} PRIMARY KEY,
    type {text} NOT NULL,
    ext {text} NOT NULL,
    size {int} NOT NULL,
    width {int},
    height {int},
    blurhash {text},
    has_thumb {int} NOT NULL DEFAULT 0,
    created_at {int} NOT NULL,
    last_upload_at {int} NOT NULL
);
CREATE INDEX IF NOT EXISTS media_blobs_by_upload ON media_blobs (last_upload_at);
CREATE TABLE IF NOT EXISTS media_uploaders (
    sha256 {key} NOT NULL REFERENCES media_blobs (sha256),
    pubkey {key} NOT NULL,
    uploaded_at {int} NOT NULL,
    PRIMARY KEY (sha256, pubkey)
);
CREATE INDEX IF NOT EXISTS media_uploaders_by_pubkey ON media_uploaders (pubkey, sha256);
CREATE TABLE IF NOT EXISTS media_refs (
    sha256 {key} NOT NULL,
    event_id {key} NOT NULL,
    PRIMARY KEY (sha256, event_id)
);
CREATE INDEX IF NOT EXISTS media_refs_by_event ON media_refs (event_id);
CREATE TABLE IF NOT EXISTS media_chunks (
    key {key} NOT NULL,
    seq {int} NOT NULL,
    data {bytes} NOT NULL,
    PRIMARY KEY (key, seq)
)
"""


# Workflow engine tables (`buzz.store.workflows`, workflows.md §11.1): a run's and a step's
# details are the runner's JSON (`data`); the columns are what is queried.
_WORKFLOW_TABLES = """
CREATE TABLE IF NOT EXISTS workflows (
    id {key} PRIMARY KEY,
    channel_id {key} NOT NULL,
    owner {key} NOT NULL,
    name {text} NOT NULL,
    head_event_id {key} NOT NULL,
    definition {text} NOT NULL,
    definition_hash {key} NOT NULL,
    trigger_on {key} NOT NULL,
    elevated {int} NOT NULL,
    enabled {int} NOT NULL,
    status {key} NOT NULL,
    secret_hash {key},
    accepted_at {int} NOT NULL,
    created_at {int} NOT NULL,
    updated_at {int} NOT NULL
);
CREATE INDEX IF NOT EXISTS workflows_by_channel ON workflows (channel_id, id);
CREATE INDEX IF NOT EXISTS workflows_by_trigger ON workflows (trigger_on, id);
CREATE TABLE IF NOT EXISTS workflow_runs (
    id {key} PRIMARY KEY,
    workflow_id {key} NOT NULL,
    status {key} NOT NULL,
    created_at {int} NOT NULL,
    current_step {int} NOT NULL,
    seq {int} NOT NULL,
    wake_at {int},
    error_code {key},
    lease_owner {key},
    lease_until {int},
    data {text} NOT NULL
);
CREATE INDEX IF NOT EXISTS workflow_runs_by_workflow ON workflow_runs (workflow_id, created_at, id);
CREATE INDEX IF NOT EXISTS workflow_runs_by_status ON workflow_runs (status, created_at, id);
CREATE TABLE IF NOT EXISTS workflow_steps (
    run_id {key} NOT NULL,
    idx {int} NOT NULL,
    data {text} NOT NULL,
    PRIMARY KEY (run_id, idx)
);
CREATE TABLE IF NOT EXISTS workflow_approvals (
    reference {key} PRIMARY KEY,
    workflow_id {key} NOT NULL,
    run_id {key} NOT NULL,
    channel_id {key} NOT NULL,
    status {key} NOT NULL,
    expires_at {int} NOT NULL,
    request_event_id {key},
    data {text} NOT NULL
);
CREATE INDEX IF NOT EXISTS workflow_approvals_by_run ON workflow_approvals (run_id);
CREATE INDEX IF NOT EXISTS workflow_approvals_by_request ON workflow_approvals (request_event_id);
CREATE INDEX IF NOT EXISTS workflow_approvals_by_expiry ON workflow_approvals (status, expires_at);
CREATE TABLE IF NOT EXISTS workflow_schedule_claims (
    workflow_id {key} NOT NULL,
    scheduled_for {int} NOT NULL,
    claimed_at {int} NOT NULL,
    run_id {key} NOT NULL,
    PRIMARY KEY (workflow_id, scheduled_for)
);
CREATE TABLE IF NOT EXISTS workflow_webhook_keys (
    workflow_id {key} NOT NULL,
    idempotency_key {text} NOT NULL,
    run_id {key} NOT NULL,
    created_at {int} NOT NULL,
    PRIMARY KEY (workflow_id, idempotency_key)
)
"""

_SQLITE_TYPES = {
    "key": "TEXT",
    "text": "TEXT",
    "int": "INTEGER",
    "utf8": "TEXT",
    "json": "TEXT",
    "bytes": "BLOB",
    "event_key": "seq INTEGER PRIMARY KEY,\n    id TEXT NOT NULL UNIQUE",
    "channel_index": "CREATE INDEX IF NOT EXISTS events_by_channel_id ON events (channel_id, created_at)"
    " WHERE channel_id IS NOT NULL",
}
_POSTGRES_TYPES = {
    "key": 'text COLLATE "C"',
    "text": "text",
    "int": "bigint",
    "utf8": "bytea",
    "json": "json",
    "bytes": "bytea",
    "event_key": 'id text COLLATE "C" PRIMARY KEY',
    # A channel's events in exactly the §6.4 order (created_at DESC, id ASC), so a `#h` window
    # reads one page of index entries, and ids without the heap (clauses._h_by_channel_page).
    # Replaces events_by_channel_id (dropped after the new one exists).
    "channel_index": "CREATE INDEX IF NOT EXISTS events_by_channel_time ON events"
    " (channel_id, created_at DESC, id) WHERE channel_id IS NOT NULL;\n"
    "DROP INDEX IF EXISTS events_by_channel_id",
}

# relay.md §11 item 3: searchable events only (the writer decides), whole tokens, no diacritic folding.
_SQLITE_SEARCH = """
CREATE VIRTUAL TABLE IF NOT EXISTS events_fts USING fts5 (
    content, content = '', tokenize = "unicode61 remove_diacritics 0"
)
"""
# fastupdate = off: with the default, new entries wait in the GIN index's pending list (up to
# gin_pending_list_limit, 4 MB) until a vacuum, and every search scans that whole list — after
# a bulk load, tens of milliseconds per search whatever the store's size. Each insert updates
# the index itself instead.
_POSTGRES_SEARCH = """
CREATE TABLE IF NOT EXISTS event_search (
    event_id text COLLATE "C" PRIMARY KEY REFERENCES events (id),
    tsv tsvector NOT NULL
);
CREATE INDEX IF NOT EXISTS event_search_tsv ON event_search USING GIN (tsv) WITH (fastupdate = off)
"""
# An index made before the switch is altered once and its pending list merged (one statement:
# the block's own `;` must not be split).
_POSTGRES_SEARCH_MIGRATION = """DO $$ BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_class WHERE oid = 'event_search_tsv'::regclass
                   AND reloptions @> ARRAY['fastupdate=off']) THEN
        ALTER INDEX event_search_tsv SET (fastupdate = off);
        PERFORM gin_clean_pending_list('event_search_tsv'::regclass);
    END IF;
END $$"""


TAG_ELSEWHERE_INDEX = (
    "CREATE INDEX IF NOT EXISTS event_tags_h_elsewhere ON event_tags (value, event_id)"
    " WHERE name = 'h' AND COALESCE(in_channel, 0) = 0"
)
# The `h` rows a `#h` window cannot read from the channel index (clauses._h_by_channel_page
# part 2): an h naming another channel than the event's, or on a global event. Rows written
# before the column existed are NULL and stay in the index: correct, only not as small. The
# column is added once (a DO block: no lock on the table when it exists).
_POSTGRES_TAG_MIGRATION = (
    """DO $$ BEGIN
    IF NOT EXISTS (SELECT 1 FROM information_schema.columns WHERE table_schema = current_schema()
                   AND table_name = 'event_tags' AND column_name = 'in_channel') THEN
        ALTER TABLE event_tags ADD COLUMN in_channel bigint;
    END IF;
END $$""",
    TAG_ELSEWHERE_INDEX,
)


def _statements(script: str) -> tuple[str, ...]:
    return tuple(s.strip() for s in script.split(";") if s.strip())


SQLITE = _statements(
    _TABLES.format(**_SQLITE_TYPES) + ";" + _SQLITE_SEARCH + ";" + _WORKFLOW_TABLES.format(**_SQLITE_TYPES)
)
# Blob chunks are stored as given: compressing already-compressed media (pglz on every 1 MiB
# row) costs CPU and saves nothing.
_POSTGRES_CHUNK_STORAGE = "ALTER TABLE media_chunks ALTER COLUMN data SET STORAGE EXTERNAL"
POSTGRES = (
    *_statements(_TABLES.format(**_POSTGRES_TYPES) + ";" + _POSTGRES_SEARCH),
    _POSTGRES_SEARCH_MIGRATION,
    *_POSTGRES_TAG_MIGRATION,
    _POSTGRES_CHUNK_STORAGE,
    *_statements(_WORKFLOW_TABLES.format(**_POSTGRES_TYPES)),
)
