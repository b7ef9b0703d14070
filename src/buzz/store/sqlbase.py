"""`EventStore` over SQL: the async methods, shared by both backends (style.md §4).

Each public method checks its arguments, names the shared `_txn` function that does the work
and hands it to the backend: `_write` runs it in one serialized write transaction, `_read` on a
read connection. A backend only supplies connections, transactions and error mapping.
"""

from __future__ import annotations

import asyncio
import time
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import Concatenate, ParamSpec, TypeVar

from buzz.core.filters import Filter
from buzz.core.kinds import (
    GLOBAL_ONLY_KINDS,
    NON_SEARCHABLE_KINDS,
    SHARED_GATED_KINDS,
    is_addressable,
    is_ephemeral,
    is_replaceable,
)
from buzz.core.limits import READ_TIMEOUT_S
from buzz.core.stored import StoredEvent, require_verified
from buzz.store import jobs, operator, reads, workspace
from buzz.store.base import (
    SYSTEM,
    Accept,
    Channel,
    Effect,
    Gates,
    History,
    InsertOutcome,
    JobRow,
    Member,
    Reader,
    StoreError,
)
from buzz.store.bulk import insert_many_txn
from buzz.store.dialect import Conn
from buzz.store.media import MediaStoreMixin
from buzz.store.workflows import WorkflowStoreMixin
from buzz.store.writes import claim_auth_event_txn, insert_txn, put_relay_member_txn, set_agent_owner_txn

P = ParamSpec("P")
T = TypeVar("T")
TxnFn = Callable[Concatenate[Conn, P], Awaitable[T]]


def _check_storable(stored: StoredEvent) -> None:
    require_verified(stored)
    if is_ephemeral(stored.event.kind):
        raise ValueError(
            f"ephemeral kind {stored.event.kind} is never stored (ephemeral kinds are only fanned out)"
        )


class SqlStore(MediaStoreMixin, WorkflowStoreMixin, ABC):
    """The EventStore methods; subclasses implement open/close, `_write` and `_read`."""

    # How long a REQ, COUNT or history read may run before the database stops it (ReadTimeout).
    read_timeout_s: float = READ_TIMEOUT_S

    @abstractmethod
    async def open(self) -> None:
        """Connect and create the schema if missing. Raises StoreError."""

    @abstractmethod
    async def close(self) -> None:
        """Release every connection; idempotent."""

    @abstractmethod
    async def _write(self, fn: TxnFn[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        """Run `fn(conn, …)` in one write transaction that commits, or rolls back on any error.

        Must complete even when the caller is cancelled, and map driver errors to StoreError.
        """

    @abstractmethod
    async def _read(self, fn: TxnFn[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        """Run `fn(conn, …)` on a read connection off the event loop; driver errors → StoreError."""

    @abstractmethod
    async def _timed_read(self, seconds: float, fn: TxnFn[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        """`_read`, stopped in the database once it has run `seconds` (issue 24 item 9): raises
        ReadTimeout then."""

    async def _admission_read(self, fn: TxnFn[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        """`_read` for the lookups an AUTH waits on (the ban list, the member list, the workspace
        switch), on a lane of their own: long reads holding every read connection must not
        time logins out (issue 24 item 9). Same errors."""
        return await self._read(fn, *args, **kwargs)

    async def _point_read(self, fn: TxnFn[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        """`_read` for a lookup bounded by one index probe (a row by key); a backend may run it
        without leaving the event loop when that is cheaper than the hop. Same errors."""
        return await self._read(fn, *args, **kwargs)

    async def _small_read(self, fn: TxnFn[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        """`_read` for a query `small_query` admits (a few rows of one index range); a backend
        may run it on the event loop like `_point_read`, without the memo. Same errors."""
        return await self._read(fn, *args, **kwargs)

    async def insert(self, stored: StoredEvent, effects: Sequence[Effect] = ()) -> InsertOutcome:
        """Store a verified event and apply `effects` in one transaction (relay.md §13.3).

        Returns DUPLICATE, applying nothing, for a known id (live, deleted or superseded) or a
        version that loses under its replacement key (§3.1 items 4–5). Raises
        UnverifiedEnvelope (§2.4 item 3), ValueError for an ephemeral kind (§3.1 item 6),
        ChannelExists, StoreError.
        """
        _check_storable(stored)
        return await self._write(insert_txn, stored, tuple(effects), int(time.time()))

    def insert_soon(
        self, stored: StoredEvent, effects: Sequence[Effect] = ()
    ) -> asyncio.Future[InsertOutcome]:
        """`insert`, started now: the write is queued behind every write queued before it, and
        the returned future is done when `insert` would have returned (or raised). Raises at
        once what `insert` raises before writing. Call on the event loop."""
        _check_storable(stored)
        return self._write_soon(insert_txn, stored, tuple(effects), int(time.time()))

    def _write_soon(self, fn: TxnFn[P, T], *args: P.args, **kwargs: P.kwargs) -> asyncio.Future[T]:
        """`_write` started now, as a future. By default a task around `_write`: tasks start in
        the order they were made, so writes still reach the backend in call order."""
        return asyncio.ensure_future(self._write(fn, *args, **kwargs))

    async def insert_many(self, items: Sequence[tuple[StoredEvent, Sequence[Effect]]]) -> list[InsertOutcome]:
        """`insert` of every (event, effects) in order, all in one transaction; see
        `EventStore.insert_many` (decision 101). Raises what `insert` raises, before anything
        is written for UnverifiedEnvelope and ephemeral kinds; any error rolls back the batch."""
        batch = []
        for stored, effects in items:
            _check_storable(stored)
            batch.append((stored, tuple(effects)))
        if not batch:
            return []
        return await self._write(insert_many_txn, batch, int(time.time()))

    async def query(
        self,
        filters: Sequence[Filter],
        reader: Reader,
        accept: Accept | None = None,
        gates: Gates | None = None,
    ) -> list[StoredEvent]:
        """Stored results of a REQ; see `EventStore.query` (relay.md §6.3–§6.5, §11)."""
        if small_query(filters):
            return await self._small_read(reads.query_txn, filters, reader, accept, gates)
        if reader is SYSTEM:
            # The relay's own lookups (state repair, rules) need every row they ask for: no
            # member chose their cost, so neither the time nor the byte budget applies.
            return await self._read(reads.query_txn, filters, reader, accept, gates, reads.UNBOUNDED)
        return await self._timed_read(self.read_timeout_s, reads.query_txn, filters, reader, accept, gates)

    async def count(
        self,
        filters: Sequence[Filter],
        reader: Reader,
        accept: Accept | None = None,
        gates: Gates | None = None,
    ) -> int:
        """Distinct events matching any filter and accepted (relay.md §7.7); `limit` ignored.
        Raises CountTooBroad past COUNT_EXACT_BUDGET candidates read one by one."""
        return await self._timed_read(self.read_timeout_s, reads.count_txn, filters, reader, accept, gates)

    async def get(self, event_id: str, include_deleted: bool = False) -> StoredEvent | None:
        """One event by exact id (deleted/superseded rows only with include_deleted)."""
        return await self._point_read(reads.get_txn, event_id, include_deleted)

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
        """Stored versions of one address, superseded ones included, deleted ones never; see
        `EventStore.history`. Raises ValueError for `limit` or `max_bytes` below 1."""
        if limit < 1 or max_bytes < 1:
            raise ValueError("history needs limit ≥ 1 and max_bytes ≥ 1")
        return await self._timed_read(
            self.read_timeout_s,
            reads.history_txn,
            kind,
            pubkey,
            d,
            limit,
            max_bytes,
            before,
            accept,
            readable_by,
        )

    async def get_channel(self, channel_id: str, include_deleted: bool = False) -> Channel | None:
        """The channel row; a deleted one only with include_deleted (relay.md §4.1 item 2)."""
        return await self._point_read(reads.get_channel_txn, channel_id, include_deleted)

    async def get_member(self, channel_id: str, pubkey: str) -> Member | None:
        """The member row, active or removed, or None (relay.md §4.1 item 3)."""
        return await self._point_read(reads.get_member_txn, channel_id, pubkey)

    async def readable_channels(self, channel_ids: Iterable[str], reader: Reader) -> frozenset[str]:
        """The subset of `channel_ids` readable by `reader` (relay.md §4.3 item 1)."""
        return await self._read(reads.readable_channels_txn, list(channel_ids), reader)

    async def get_agent_owner(self, agent: str) -> str | None:
        """The registered owner of `agent` (64 hex), or None (relay.md §7.3 item 4)."""
        return await self._point_read(reads.get_agent_owner_txn, agent)

    async def set_agent_owner_if_absent(self, agent: str, owner: str) -> None:
        """Record agent → owner unless a mapping exists: first write wins (relay.md §7.3 item 4)."""
        await self._write(set_agent_owner_txn, agent, owner, int(time.time()))

    async def claim_auth_event(self, event_id: str, ttl_s: int, now: int | None = None) -> bool:
        """True the first time a NIP-98 event id is presented within `ttl_s` seconds (unix time
        `now`, default the clock), on any replica sharing this database; False for a replay."""
        at = int(time.time()) if now is None else now
        return await self._write(claim_auth_event_txn, event_id, at, ttl_s)

    async def is_relay_member(self, pubkey: str) -> bool:
        """On the workspace member list as owner, admin or member (relay.md §4.4 item 1)."""
        return await self._admission_read(reads.is_relay_member_txn, pubkey)

    async def put_relay_member(self, pubkey: str, role: str) -> None:
        """Operator tooling: add a workspace member or change its role (relay.md §4.4)."""
        await self._write(put_relay_member_txn, pubkey, role, int(time.time()))

    # -- operator tables (buzz.store.operator; `buzz admin`) ---------------------------------
    async def list_relay_members(self) -> list[operator.RelayMember]:
        """The workspace member list, oldest first (relay.md §4.4)."""
        return await self._read(operator.list_relay_members_txn)

    async def remove_relay_member(self, pubkey: str) -> bool:
        """Take `pubkey` off the member list; False when it was not on it."""
        return await self._write(operator.remove_relay_member_txn, pubkey)

    async def ban(self, pubkey: str, reason: str = "") -> bool:
        """Put `pubkey` on the ban list (relay.md §7.3 item 2.3); False when already banned.
        Raises ValueError for a reason over its cap (`operator.check_ban_reason`)."""
        operator.check_ban_reason(reason)
        return await self._write(operator.ban_txn, pubkey, reason, int(time.time()))

    async def unban(self, pubkey: str) -> bool:
        """Take `pubkey` off the ban list; False when it was not on it."""
        return await self._write(operator.unban_txn, pubkey)

    async def banned_among(self, pubkeys: Iterable[str]) -> frozenset[str]:
        """Which of `pubkeys` are banned: read at every AUTH, so a running relay sees a new ban."""
        return await self._admission_read(operator.banned_among_txn, sorted(set(pubkeys)))

    async def list_bans(self) -> list[operator.Ban]:
        return await self._read(operator.list_bans_txn)

    async def get_setting(self, name: str) -> str | None:
        """An operator setting (`operator.SETTINGS`), None when never set. Raises ValueError for
        an unknown name."""
        operator.check_setting(name)
        return await self._admission_read(operator.get_setting_txn, name)

    async def set_setting(self, name: str, value: str) -> None:
        """Raises ValueError for a name or value `operator.SETTINGS` does not list."""
        operator.check_setting(name, value)
        await self._write(operator.set_setting_txn, name, value)

    async def stats(self) -> operator.StoreStats:
        """Counts by kind, channels, members, bans and the database size (`buzz admin stats`)."""
        return await self._read(operator.stats_txn)

    # -- workspace lookups (buzz.store.workspace) -------------------------------------------
    async def active_members(self, channel_id: str) -> list[Member]:
        """Active members of a channel, oldest first (relay.md §4.1 item 3, §4.6)."""
        return await self._read(workspace.active_members_txn, channel_id)

    async def live_channels(self) -> list[tuple[Channel, list[Member]]]:
        """Every channel not deleted, by id, with its active members oldest first (the
        start-up state repair compares them with the stored 39000–39003)."""
        return await self._read(workspace.live_channels_txn)

    async def find_dm(self, participants: frozenset[str]) -> str | None:
        """The live DM of exactly this participant set, or None (relay.md §4.8 item 2)."""
        return await self._read(workspace.find_dm_txn, participants)

    async def get_thread(self, event_id: str) -> tuple[str, int] | None:
        """(root id, depth) of a reply, or None for a top-level event (relay.md §9 item 1)."""
        return await self._point_read(workspace.thread_txn, event_id)

    async def has_reaction(self, author: str, target_id: str, content: str) -> bool:
        """True when (author, target, content) has an active reaction (relay.md §9 item 3)."""
        return await self._point_read(workspace.has_reaction_txn, author, target_id, content)

    async def latest_created_at(self, kind: int, pubkey: str, d: str) -> int | None:
        """Newest created_at ever stored at an address, superseded rows included (§4.6 item 2)."""
        return await self._read(workspace.latest_created_at_txn, kind, pubkey, d)

    async def is_dm_hidden(self, channel_id: str, pubkey: str) -> bool:
        """True when `pubkey` hid this DM (kind 41012) and has not reopened it (§4.8 item 4)."""
        return await self._point_read(workspace.dm_hidden_txn, channel_id, pubkey)

    async def get_job(self, job_id: str) -> JobRow | None:
        """The job row of the 43001 `job_id`, or None (jobs spec §5.3 item 6)."""
        return await self._point_read(jobs.job_txn, job_id)

    async def job_chain_depth(self, job_id: str, most: int) -> int:
        """Jobs in the parent chain from `job_id`, itself included, counted up to `most` + 1."""
        return await self._read(jobs.parent_depth_txn, job_id, most)

    async def is_healthy(self) -> bool:
        """True when the database answers `SELECT 1`."""
        try:
            return await self._read(reads.ping_txn)
        except StoreError:
            return False


SMALL_QUERY_LIMIT = 20  # rows a "small" REQ filter may ask for (`small_query`)
# Regular global kinds every reader sees every event of: each row the index walks is one
# returned (no superseded versions to step over, no gate to refuse a row).
_UNGATED_GLOBAL_KINDS = frozenset(
    k
    for k in GLOBAL_ONLY_KINDS - NON_SEARCHABLE_KINDS - SHARED_GATED_KINDS
    if not (is_replaceable(k) or is_addressable(k) or is_ephemeral(k))
)


def small_query(filters: Sequence[Filter]) -> bool:
    """True for a REQ whose every filter names one author and one regular global ungated kind with a
    limit of at most SMALL_QUERY_LIMIT and nothing else but a time range: one range of
    `events_by_author (pubkey, kind, created_at)` walked newest first, every row it reads
    returned, a few rows (a profile, an author's latest notes). Such a read costs less than
    the hop to a reader thread and back."""
    for f in filters:
        if (
            f.limit is None
            or f.limit > SMALL_QUERY_LIMIT
            or f.authors is None
            or len(f.authors) != 1
            or f.kinds is None
            or len(f.kinds) != 1
            or not f.kinds <= _UNGATED_GLOBAL_KINDS
            or f.ids is not None
            or f.tags
            or f.search is not None
        ):
            return False
    return bool(filters)
