"""The one storage interface both backends implement with identical semantics.

Source rules: relay.md §3.1 (replacement keys and the tie rule), §6.3–§6.5 (stored read
scope, order, limits), §10 (deletion effects), §11 (search), §13 (schema and writes).

The relay decides *whether* an event may be written and *what* it does (its effects); the
store applies the insert and the effects in one transaction and answers whether the event
was new. Reads take the reader so channel readability is pushed into SQL, and an `accept`
predicate (the per-event `visible` of relay.md §5.3) so `limit` counts visible events only.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Protocol

from buzz.core.filters import Filter
from buzz.core.stored import StoredEvent


class InsertOutcome(Enum):
    STORED = "stored"
    DUPLICATE = "duplicate"  # existing id (live or not), losing version, or deleted address


# -- effects applied in the same transaction as the insert ------------------------------------
@dataclass(frozen=True, slots=True)
class SoftDelete:
    """Soft-delete one event by id (kind 5 `e`, kind 9005). No-op when already deleted."""

    event_id: str


@dataclass(frozen=True, slots=True)
class DeleteAddress:
    """Kind 5 `a` deletion: soft-delete the versions at (kind, pubkey, d) with
    created_at ≤ `until`, and make later versions with created_at ≤ `until` lose (§10.1 item 4)."""

    kind: int
    pubkey: str
    d: str
    until: int


Effect = SoftDelete | DeleteAddress

Accept = Callable[[StoredEvent], bool]


class EventStore(Protocol):
    """Async storage of events. Every method may raise StoreError on a backend failure;
    callers must treat that as a failure, never as an empty result (fail closed)."""

    async def open(self) -> None:
        """Connect and create the schema if missing."""

    async def close(self) -> None: ...

    async def insert(self, stored: StoredEvent, effects: Sequence[Effect] = ()) -> InsertOutcome:
        """Store a verified event and apply `effects`, atomically; durable and queryable on return.

        Ephemeral kinds are never stored (refuse them with ValueError: a relay bug). A losing
        replaceable/addressable version (§3.1 items 4–5) or a known id → DUPLICATE, and then
        no effect is applied. Raises UnverifiedEnvelope for `stored.verified == False`.
        """

    async def query(
        self, filters: Sequence[Filter], reader: str | None, accept: Accept | None = None
    ) -> list[StoredEvent]:
        """Stored results of a REQ (relay.md §6.3 item 2, §6.4, §6.5; §11 when `search` is set).

        Filter by filter in the given order; within a filter `created_at DESC, id ASC` (search:
        rank first); at most `effective_limit` accepted events per filter; events already
        returned for an earlier filter are skipped. A filter without `#h` covers global events
        and channels readable by `reader`; with `#h` it covers what §6.2 matches. Deleted and
        superseded rows are never returned. `accept` filters candidates before the limit counts.
        """

    async def count(self, filters: Sequence[Filter], reader: str | None, accept: Accept | None = None) -> int:
        """Distinct events matching any filter and accepted (relay.md §7.7); `limit` ignored."""

    async def get(self, event_id: str, include_deleted: bool = False) -> StoredEvent | None:
        """One event by exact id (deleted/superseded rows only with include_deleted)."""

    async def is_healthy(self) -> bool:
        """True when the database answers a trivial query."""


class StoreError(Exception):
    """A backend failure (connection lost, constraint surprise). Maps to `error: database error`."""
