"""The one storage interface both backends implement with identical semantics.

Source rules: relay.md §3.1 (replacement keys and the tie rule), §4.1 (channel and member
rows), §6.3–§6.5 (stored read scope, order, limits), §10 (deletion effects), §11 (search),
§13 (schema and writes).

The relay decides *whether* an event may be written and *what* it does (its effects); the
store applies the insert and the effects in one transaction and answers whether the event
was new. Reads take the reader so channel readability is pushed into SQL, and an `accept`
predicate (the per-event `visible` of relay.md §5.3) so `limit` counts visible events only.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Literal, Protocol

from buzz.core.errors import Duplicate, Invalid, Restricted, ServerError
from buzz.core.filters import Filter
from buzz.core.stored import StoredEvent
from buzz.store.workflow_rows import DeleteWorkflow, RunLease, WorkflowWrite


class InsertOutcome(Enum):
    """What an insert did (relay.md §3.1 items 4–5; issue 25 item 4: the three ways an event is
    not stored are told apart, since only the first is served)."""

    STORED = "stored"
    DUPLICATE = "duplicate"  # the id is stored and served (resubmitted)
    SUPERSEDED = "superseded"  # a newer version holds its replacement key: never served
    DELETED = "deleted"  # deleted (its id, or its address at or after its created_at)


class System(Enum):
    """The relay's own unscoped reads (every channel, also deleted ones)."""

    SYSTEM = "system"


SYSTEM = System.SYSTEM

Reader = str | frozenset[str] | None | Literal[System.SYSTEM]
"""Who reads: a pubkey (64 hex), or a set of them (a connection that authenticated several
reads every channel any of them may); None for an anonymous reader (global events and open
channels only); SYSTEM for the relay's internal lookups: `query`/`count` then skip the read
scope entirely (deleted channels included) and `readable_channels` answers "exists"."""

Visibility = Literal["open", "private"]
ChannelType = Literal["stream", "forum", "dm", "workflow"]
Role = Literal["owner", "admin", "member", "guest", "bot"]


# -- rows ---------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Channel:
    """A channel row (relay.md §4.1 item 2). Times are unix seconds; `id` a canonical UUID."""

    id: str
    name: str
    visibility: Visibility
    created_by: str
    created_at: int
    channel_type: ChannelType = "stream"
    about: str = ""
    topic: str = ""
    purpose: str = ""
    ttl_seconds: int | None = None
    archived_at: int | None = None
    deleted_at: int | None = None


@dataclass(frozen=True, slots=True)
class Member:
    """A member row (relay.md §4.1 item 3); active while `removed_at` is None."""

    channel_id: str
    pubkey: str
    role: Role
    joined_at: int
    invited_by: str | None = None
    removed_at: int | None = None
    removed_by: str | None = None

    @property
    def active(self) -> bool:
        return self.removed_at is None


@dataclass(frozen=True, slots=True)
class BlobRow:
    """A stored blob's metadata (media.md §10.1): `type` and `ext` are authoritative; `width`,
    `height` and `blurhash` are set for images; times are unix seconds."""

    sha256: str
    type: str
    ext: str
    size: int
    width: int | None = None
    height: int | None = None
    blurhash: str | None = None
    has_thumb: bool = False
    created_at: int = 0
    last_upload_at: int = 0


# -- effects applied in the same transaction as the insert ------------------------------------
# A time field left None means "the transaction's clock" (unix seconds at commit time).
@dataclass(frozen=True, slots=True)
class SoftDelete:
    """Soft-delete one event by id (kind 5 `e`, kind 9005). No-op when already deleted."""

    event_id: str


@dataclass(frozen=True, slots=True)
class DeleteAddress:
    """Kind 5 `a` deletion: soft-delete the versions at (kind, pubkey, d) with
    created_at ≤ `until`, and make later versions with created_at ≤ `until` lose (§10.1 item 4).

    For a replaceable kind `d` is ignored (its key is (pubkey, kind), §3.1); for a regular kind
    the effect does nothing, since no address exists.
    """

    kind: int
    pubkey: str
    d: str
    until: int


@dataclass(frozen=True, slots=True)
class CreateChannel:
    """Create a channel row (kind 9007, 41010; relay.md §4.5). Raises ChannelExists when the
    id is taken, even by a deleted channel, and the whole insert is rolled back."""

    channel: Channel


@dataclass(frozen=True, slots=True)
class PutMember:
    """Add, reactivate or re-role a member (kinds 9000, 9007, 9021, 41010; relay.md §4.5).

    `role` None keeps the current role (`member` for a new row). Reactivating a removed member
    clears `removed_at`/`removed_by` and sets `joined_at`/`invited_by` anew; an active
    member keeps them.
    """

    channel_id: str
    pubkey: str
    role: Role | None = None
    invited_by: str | None = None
    joined_at: int | None = None


@dataclass(frozen=True, slots=True)
class RemoveMember:
    """Soft-remove a member (kinds 9001, 9022). No-op for a non-member or a removed one."""

    channel_id: str
    pubkey: str
    removed_by: str | None = None
    removed_at: int | None = None


@dataclass(frozen=True, slots=True)
class DeleteChannel:
    """Mark a channel deleted (kind 9008, relay.md §4.5): it and its events stop being served."""

    channel_id: str
    deleted_at: int | None = None


# Channel columns kind 9002 may change (relay.md §4.5); `archived_at` carries archive/unarchive.
EDITABLE_CHANNEL_FIELDS = frozenset(
    {"name", "about", "visibility", "topic", "purpose", "ttl_seconds", "archived_at"}
)


@dataclass(frozen=True, slots=True)
class UpdateChannel:
    """Set channel fields (kind 9002, relay.md §4.5): `(column, value)` pairs, each column in
    EDITABLE_CHANNEL_FIELDS (None clears `ttl_seconds` / `archived_at`). No-op for a deleted channel."""

    channel_id: str
    changes: tuple[tuple[str, object], ...]


@dataclass(frozen=True, slots=True)
class RecordThread:
    """The thread position of a reply (relay.md §9 item 1): root id, parent id, depth 1–100."""

    event_id: str
    root_id: str
    parent_id: str
    depth: int


@dataclass(frozen=True, slots=True)
class PutReaction:
    """Enter a kind 7 in the active-reaction index (relay.md §9 item 3). Raises ReactionExists
    when (author, target, content) already has an active reaction; the insert is rolled back.
    Soft-deleting the reaction (SoftDelete) removes it from the index."""

    event_id: str
    author: str
    target_id: str
    content: str


@dataclass(frozen=True, slots=True)
class RegisterDm:
    """Bind a DM channel to its participant set (relay.md §4.8 item 2). Raises DmExists when
    the set already has a DM; the insert is rolled back."""

    channel_id: str
    participants: frozenset[str]


@dataclass(frozen=True, slots=True)
class SetDmHidden:
    """Record (or clear) "hidden" for one participant of a DM (kinds 41012 / 41010, §4.8 item 4)."""

    channel_id: str
    pubkey: str
    hidden: bool


@dataclass(frozen=True, slots=True)
class PutMediaRefs:
    """Record that the event references these blobs (media.md §9.3 item 1). Each blob's row is
    locked (PostgreSQL `FOR SHARE`) so a collection cannot remove it before the commit; a blob
    gone by then raises MediaBlobMissing and the whole insert is rolled back."""

    event_id: str
    hashes: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class OpenJob:
    """A 43001 opens its job row in `requested` (jobs spec §5.3 item 6; `buzz.store.jobs`)."""

    job_id: str
    channel_id: str
    requester: str
    assignee: str
    parent: str | None
    created_at: int


@dataclass(frozen=True, slots=True)
class AdvanceJob:
    """A lifecycle event moves its job row to `state`, checked under the row's lock: the row's
    current state must not be one of `refusals` (state, reason), and `seq`, when set, must be
    greater than the row's last one (else `seq_refusal`). A failed check raises JobConflict and
    the insert is rolled back. `at` is the event's created_at."""

    job_id: str
    state: str
    refusals: tuple[tuple[str, str], ...]
    at: int
    seq: int | None = None
    seq_refusal: str = ""
    disposition: str | None = None
    lenient: bool = False  # a refused state leaves the row as it is instead of raising


@dataclass(frozen=True, slots=True)
class JobRow:
    """One job as the store holds it (jobs spec §5.3 item 6)."""

    id: str
    channel_id: str
    requester: str
    assignee: str
    state: str
    last_seq: int
    disposition: str | None
    parent: str | None
    created_at: int
    updated_at: int


Effect = (
    SoftDelete
    | DeleteAddress
    | CreateChannel
    | PutMember
    | RemoveMember
    | DeleteChannel
    | UpdateChannel
    | RecordThread
    | PutReaction
    | RegisterDm
    | SetDmHidden
    | PutMediaRefs
    | OpenJob
    | AdvanceJob
    | WorkflowWrite
    | DeleteWorkflow
    | RunLease
)

Accept = Callable[[StoredEvent], bool]


@dataclass(frozen=True, slots=True)
class Gates:
    """The per-event gates of a read's `accept`, by kind, as far as SQL can apply them, so that
    rows the reader may not see are not read at all (issue 24 item 12: 20,000 such rows were
    parsed for each REQ). SQL keeps a superset of what `accept` keeps; `accept` decides. A kind
    in none of the sets passes every reader.

    `author`: only their author reads them; `p_tagged`: only a pubkey a `p` tag names;
    `author_or_p`: either; `author_or_shared`: their author, or anyone when a `shared` tag says
    `true` (not indexed: SQL keeps every such row, `accept` decides)."""

    author: frozenset[int] = frozenset()
    p_tagged: frozenset[int] = frozenset()
    author_or_p: frozenset[int] = frozenset()
    author_or_shared: frozenset[int] = frozenset()

    @property
    def kinds(self) -> frozenset[int]:
        return self.author | self.p_tagged | self.author_or_p | self.author_or_shared


@dataclass(frozen=True, slots=True)
class History:
    """`EventStore.history`: stored versions of one address, newest first (`created_at`
    descending, then id ascending), and `next`, the `(created_at, id)` of the last one when
    more accepted versions follow (pass it back as `before`), else None. `texts` holds each
    event's JSON in the same order: what the byte budget counted, for a caller to send as is."""

    events: list[StoredEvent]
    next: tuple[int, str] | None
    texts: list[str]


class EventStore(Protocol):
    """Async storage of events and channels. Every method may raise StoreError on a backend
    failure; callers must treat that as a failure, never as an empty result (fail closed)."""

    async def open(self) -> None:
        """Connect and create the schema if missing."""

    async def close(self) -> None: ...

    async def insert(self, stored: StoredEvent, effects: Sequence[Effect] = ()) -> InsertOutcome:
        """Store a verified event and apply `effects`, atomically; durable and queryable on return.

        Ephemeral kinds are never stored (refuse them with ValueError: a relay bug). A losing
        replaceable/addressable version (§3.1 items 4–5) or a known id → DUPLICATE, and then
        no effect is applied. Raises UnverifiedEnvelope for `stored.verified == False`,
        ChannelExists from a CreateChannel effect whose id is taken.
        """

    def insert_soon(
        self, stored: StoredEvent, effects: Sequence[Effect] = ()
    ) -> asyncio.Future[InsertOutcome]:
        """`insert` started at once, as a future: writes queued by successive calls commit in
        call order (a pipelining connection queues each write without awaiting the one
        before). Raises at once what `insert` raises before writing. Call on the event loop."""
        ...

    async def insert_many(self, items: Sequence[tuple[StoredEvent, Sequence[Effect]]]) -> list[InsertOutcome]:
        """`insert` of each (event, effects) in order, as one transaction: the outcomes in item
        order, exactly those of the single inserts, and the same rows (tags, threads,
        reactions, search), written in bulk where that changes nothing (bulk loads; decision 101).

        All or nothing: an error any single insert would raise (ReactionExists, ChannelExists,
        StoreError) rolls back the whole batch; UnverifiedEnvelope and the ephemeral-kind
        ValueError are raised before anything is written. Other writers wait while it runs
        (PostgreSQL locks `events` against writes; SQLite has one writer), so batches of
        10^4–10^5 events suit a bulk load, not a live relay.
        """

    async def query(
        self,
        filters: Sequence[Filter],
        reader: Reader,
        accept: Accept | None = None,
        gates: Gates | None = None,
    ) -> list[StoredEvent]:
        """Stored results of a REQ (relay.md §6.3 item 2, §6.4, §6.5; §11 when `search` is set).

        Filter by filter in the given order; within a filter `created_at DESC, id ASC` (search:
        rank first); at most `effective_limit` accepted events per filter; events already
        returned for an earlier filter are skipped. A filter without `#h` covers global events
        and channels readable by `reader`; with `#h` it covers the events whose h tags name V. Deleted and
        superseded rows are never returned. `accept` filters candidates before the limit counts;
        `gates` (what `accept` refuses, in SQL) keep the rows it would refuse from being read.

        Bounded (issue 24 items 9–12): at most READ_MAX_BYTES of events in all (the first event
        past it ends the answer, as `limit` would), at most READ_MAX_REFUSED candidates refused
        by `accept` per filter, and READ_TIMEOUT_S (ReadTimeout).
        """

    async def count(
        self,
        filters: Sequence[Filter],
        reader: Reader,
        accept: Accept | None = None,
        gates: Gates | None = None,
    ) -> int:
        """Distinct events matching any filter and accepted (relay.md §7.7); `limit` ignored.
        With `gates`, `accept` is asked only about events of gated kinds. Raises CountTooBroad
        when more than COUNT_EXACT_BUDGET candidates would be read one by one; ReadTimeout."""

    async def get(self, event_id: str, include_deleted: bool = False) -> StoredEvent | None:
        """One event by exact id (deleted/superseded rows only with include_deleted)."""

    async def history(
        self,
        kind: int,
        pubkey: str,
        d: str,
        *,
        limit: int,
        max_bytes: int,
        before: tuple[int, str] | None = None,
        accept: Accept | None = None,
        readable_by: str | None = None,
    ) -> History:
        """The versions kept at the address `(kind, pubkey, d)` of an addressable kind: the head
        and the superseded ones (soft-deleted by replacement, §3.1 item 4), newest first.

        Deleted versions never come back: a version at or before a kind 5 `a` deletion of the
        address (§10.1 item 4) or named by a stored kind 5 / 9005 `e` tag is left out, even when
        the deletion was deleted in turn (§10.1 item 5). `accept` filters candidates before
        `limit` counts them; at most `limit` versions and at most `max_bytes` of event JSON
        (the first version that would pass the budget ends the page). `before` resumes after
        the version with that `(created_at, id)`. Regular and replaceable kinds have no such
        address: the answer is empty. `readable_by`: only versions signed by that pubkey or
        naming it in a `p` tag are read at all (the history gate, in SQL).
        """

    async def get_channel(self, channel_id: str, include_deleted: bool = False) -> Channel | None:
        """The channel row, or None; a deleted channel only with include_deleted (§4.1 item 2)."""

    async def get_member(self, channel_id: str, pubkey: str) -> Member | None:
        """The member row, active or removed (check `Member.active`), or None (§4.1 item 3)."""

    async def readable_channels(self, channel_ids: Iterable[str], reader: Reader) -> frozenset[str]:
        """The subset of `channel_ids` that `reader` may read: relay.md §4.3 item 1."""

    async def get_agent_owner(self, agent: str) -> str | None:
        """The registered owner (64 hex) recorded for `agent` at AUTH, or None (relay.md §7.3 item 4)."""

    async def set_agent_owner_if_absent(self, agent: str, owner: str) -> None:
        """Record agent → owner when the agent has no mapping yet; first write wins (§7.3 item 4)."""

    async def active_members(self, channel_id: str) -> list[Member]:
        """The active members of a channel, oldest first (relay.md §4.1 item 3, §4.6)."""

    async def claim_auth_event(self, event_id: str, ttl_s: int, now: int | None = None) -> bool:
        """True the first time a NIP-98 event id is presented within `ttl_s` s, else False."""

    async def live_channels(self) -> list[tuple[Channel, list[Member]]]:
        """Every channel not deleted, by id, with its active members oldest first."""

    async def find_dm(self, participants: frozenset[str]) -> str | None:
        """The live DM channel whose participant set equals `participants`, or None (§4.8 item 2)."""

    async def get_thread(self, event_id: str) -> tuple[str, int] | None:
        """(root id, depth) recorded for a reply, or None for a top-level event (§9 item 1)."""

    async def has_reaction(self, author: str, target_id: str, content: str) -> bool:
        """True when (author, target, content) has an active reaction (§9 item 3)."""

    async def latest_created_at(self, kind: int, pubkey: str, d: str) -> int | None:
        """Newest `created_at` ever stored at an address, superseded rows included (§4.6 item 2)."""

    async def is_dm_hidden(self, channel_id: str, pubkey: str) -> bool:
        """True when `pubkey` hid the DM with kind 41012 and has not reopened it (§4.8 item 4)."""

    async def is_healthy(self) -> bool:
        """True when the database answers a trivial query."""

    async def get_job(self, job_id: str) -> JobRow | None:
        """The job row opened by the 43001 `job_id`, or None (jobs spec §5.3 item 6)."""

    async def job_chain_depth(self, job_id: str, most: int) -> int:
        """Jobs in the parent chain from `job_id` (itself included), counted up to `most` + 1."""

    # -- media (media.md §9.3, §10–§12; `buzz.store.media`) ------------------------------------
    async def media_blob(self, sha256: str) -> BlobRow | None:
        """The blob's metadata row, or None."""

    async def media_put(
        self,
        row: BlobRow,
        pubkey: str,
        now: int,
        chunk_files: Iterable[tuple[str, str]] = (),
        chunk_bytes: int = 1 << 20,
    ) -> tuple[BlobRow, int]:
        """Commit a verified upload: the metadata row when new (with the `db` chunks read from
        `chunk_files`, (key, path) pairs), else `last_upload_at` = now; the uploader row.
        Returns the stored row and this uploader's `uploaded_at`."""
        ...

    async def media_uploaded_at(self, sha256: str, pubkey: str) -> int | None:
        """When `pubkey` became an uploader of the blob, None when it is not one."""

    async def media_usage(self, pubkey: str | None) -> int:
        """Bytes of the blobs `pubkey` holds, or of every blob when None."""
        ...

    async def media_readable_refs(self, sha256: str, reader: Reader, limit: int) -> list[StoredEvent]:
        """At most `limit` live events referencing the blob, global or in channels `reader`
        may read (§4.3 item 1); the per-event sets are the caller's."""
        ...

    async def media_chunks(self, key: str, first: int, last: int) -> list[bytes]:
        """The `db` chunks `first`..`last` of `key` (`<sha256>` or `<sha256>.thumb.jpg`)."""
        ...

    async def media_collectable(self, cutoff: int, limit: int = 1000) -> list[str]:
        """Blobs with no live reference, last uploaded before `cutoff`."""
        ...

    async def media_collect(self, sha256: str, cutoff: int) -> BlobRow | None:
        """Delete one blob if it is still collectable, in one transaction; its row, else None."""

    async def media_known(self, hashes: Iterable[str]) -> frozenset[str]:
        """Which of `hashes` have a metadata row."""
        ...


class StoreError(Exception):
    """A backend failure (connection lost, constraint surprise). Maps to `error: database error`."""


class ReadTimeout(StoreError, ServerError):
    """A read ran past its time budget and was stopped in the database (issue 24 item 9): its
    `str` is the wire text, `error: query took longer than <n> s; narrow it`."""

    def __init__(self, seconds: float) -> None:
        ServerError.__init__(self, f"query took longer than {seconds:g} s; narrow it")


class CountTooBroad(Restricted):
    """COUNT would examine more than COUNT_EXACT_BUDGET candidates one by one (relay.md §7.7
    item 3): `restricted: count filter requires narrower constraints`."""

    def __init__(self) -> None:
        super().__init__("count filter requires narrower constraints")


class StoreUnreachable(StoreError):
    """The database server could not be reached at all (refused, unresolvable, timed out)."""


class ChannelExists(StoreError, Duplicate):
    """CreateChannel named an id already taken (even by a deleted channel); relay.md §4.5
    answers it `duplicate: channel already exists` (its `str` is that wire text)."""

    def __init__(self, channel_id: str) -> None:
        Duplicate.__init__(self, "channel already exists")
        self.channel_id = channel_id


class ReactionExists(StoreError, Duplicate):
    """PutReaction found an active reaction with the same (author, target, content); relay.md
    §9 item 3 answers `duplicate: reaction already exists` (its `str`)."""

    def __init__(self) -> None:
        Duplicate.__init__(self, "reaction already exists")


class MediaBlobMissing(StoreError, Invalid):
    """PutMediaRefs named a blob that is not stored (collected in between): the event is
    refused `invalid: imeta blob not found: <x>` (media.md §9.2 item 3; its `str`)."""

    def __init__(self, sha256: str) -> None:
        Invalid.__init__(self, f"imeta blob not found: {sha256}")
        self.sha256 = sha256


class JobConflict(StoreError, Invalid):
    """An AdvanceJob found its job in a state its event is refused in (a concurrent lifecycle
    event committed first): the refusal is `invalid: <reason>` (its `str`)."""

    def __init__(self, reason: str) -> None:
        Invalid.__init__(self, reason)


class DmExists(StoreError):
    """RegisterDm lost a race: another DM for the same participant set committed first."""

    def __init__(self) -> None:
        super().__init__("a DM for this participant set already exists")
