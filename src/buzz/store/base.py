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

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Literal, Protocol

from buzz.core.filters import Filter
from buzz.core.stored import StoredEvent


class InsertOutcome(Enum):
    STORED = "stored"
    DUPLICATE = "duplicate"  # existing id (live or not), losing version, or deleted address


class System(Enum):
    """The relay's own unscoped reads (every channel, also deleted ones)."""

    SYSTEM = "system"


SYSTEM = System.SYSTEM

Reader = str | None | Literal[System.SYSTEM]
"""Who reads: a pubkey (64 hex); None for an anonymous reader (global events and open
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


Effect = SoftDelete | DeleteAddress | CreateChannel | PutMember | RemoveMember | DeleteChannel

Accept = Callable[[StoredEvent], bool]


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

    async def query(
        self, filters: Sequence[Filter], reader: Reader, accept: Accept | None = None
    ) -> list[StoredEvent]:
        """Stored results of a REQ (relay.md §6.3 item 2, §6.4, §6.5; §11 when `search` is set).

        Filter by filter in the given order; within a filter `created_at DESC, id ASC` (search:
        rank first); at most `effective_limit` accepted events per filter; events already
        returned for an earlier filter are skipped. A filter without `#h` covers global events
        and channels readable by `reader`; with `#h` it covers what §6.2 matches. Deleted and
        superseded rows are never returned. `accept` filters candidates before the limit counts.
        """

    async def count(self, filters: Sequence[Filter], reader: Reader, accept: Accept | None = None) -> int:
        """Distinct events matching any filter and accepted (relay.md §7.7); `limit` ignored."""

    async def get(self, event_id: str, include_deleted: bool = False) -> StoredEvent | None:
        """One event by exact id (deleted/superseded rows only with include_deleted)."""

    async def get_channel(self, channel_id: str, include_deleted: bool = False) -> Channel | None:
        """The channel row, or None; a deleted channel only with include_deleted (§4.1 item 2)."""

    async def get_member(self, channel_id: str, pubkey: str) -> Member | None:
        """The member row, active or removed (check `Member.active`), or None (§4.1 item 3)."""

    async def readable_channels(self, channel_ids: Iterable[str], reader: Reader) -> frozenset[str]:
        """The subset of `channel_ids` that `reader` may read: relay.md §4.3 item 1."""

    async def is_healthy(self) -> bool:
        """True when the database answers a trivial query."""


class StoreError(Exception):
    """A backend failure (connection lost, constraint surprise). Maps to `error: database error`."""


class ChannelExists(StoreError):
    """CreateChannel named an id already taken (even by a deleted channel); relay.md §4.5
    answers it `duplicate: channel already exists`."""

    def __init__(self, channel_id: str) -> None:
        super().__init__(f"channel {channel_id} already exists")
        self.channel_id = channel_id
