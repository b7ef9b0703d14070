"""Read functions shared by both backends (relay.md §6.3–§6.5, §7.7, §11).

Each `_txn` function runs on one connection handed out by the backend. Matching, scope and
order are SQL (`buzz.store.clauses`); the only Python-side step is the caller's `accept`
predicate, served by paging: candidates are fetched page by page (keyset on
`(created_at, id)`, offset for search) until `limit` of them are accepted, so rejected rows
never shrink a result below its limit (relay.md §6.5 item 3).

What one member's read may cost is bounded (issue 24 items 10–12, docs/limits.md "Reads"):
the read's `gates` keep most rows `accept` would refuse from being read at all; a page of rows
is read a few at a time up to PAGE_MAX_BYTES; a read's answer holds at most READ_MAX_BYTES; a
filter ends after READ_MAX_REFUSED refusals; COUNT reads at most COUNT_EXACT_BUDGET rows one by
one (CountTooBroad beyond).
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Iterable, Sequence
from contextlib import aclosing
from dataclasses import dataclass, field, fields, replace
from typing import Any

import orjson

from buzz.core.event import Event
from buzz.core.filters import Filter
from buzz.core.kinds import DELETION_KIND, is_addressable
from buzz.core.limits import COUNT_EXACT_BUDGET, READ_MAX_BYTES
from buzz.core.stored import StoredEvent, from_storage
from buzz.store.base import Accept, Channel, CountTooBroad, Gates, History, Member, Reader
from buzz.store.clauses import (
    EVENT_COLUMNS,
    ORDER,
    Page,
    count_union,
    gated_kinds,
    matches_nothing,
    readable_channel,
    select_page,
)
from buzz.store.dialect import Conn, Dialect, Params

MAX_PAGE = 1000
_MIN_ACCEPT_PAGE = 20
# Candidates of one filter `accept` may refuse before its answer ends (issue 24 item 12):
# `gates` keep the rows a reader may not see out in SQL, so only inexact shapes (a `shared`
# tag of another form, a p-gated event of the reader's own without its `p`) get this far.
READ_MAX_REFUSED = COUNT_EXACT_BUDGET
# Bytes of rows (`row_bytes`) one page fetch holds before it is parsed: a page ends early at the
# row that passes it, and the next page starts after that row (issue 24 item 11).
PAGE_MAX_BYTES = READ_MAX_BYTES
UNBOUNDED = 1 << 62  # `query_txn`'s max_bytes for the relay's own (SYSTEM) reads

# Channel and member columns carry the names of the record fields (relay.md §4.1).
_CHANNEL_FIELDS = tuple(f.name for f in fields(Channel))
_MEMBER_FIELDS = tuple(f.name for f in fields(Member))


def event_from_row(row: Sequence[Any], dialect: Dialect) -> StoredEvent:
    """A row of EVENT_COLUMNS as a verified envelope (relay.md §2.4 item 2)."""
    tags = tuple(tuple(t) for t in orjson.loads(row[4]))
    event = Event(row[0], row[1], row[2], row[3], tags, dialect.decode_utf8(row[5]), row[6])
    return from_storage(event, row[7], row[8])


async def get_txn(conn: Conn, event_id: str, include_deleted: bool) -> StoredEvent | None:
    p = Params(conn.dialect)
    sql = f"SELECT {EVENT_COLUMNS} FROM events e WHERE e.id = {p.add(event_id)}"
    if not include_deleted:
        sql += " AND e.deleted_at IS NULL"
    rows = await conn.fetch(sql, p.values)
    return event_from_row(rows[0], conn.dialect) if rows else None


# relay.md §10.1 item 2, §10.2: the kinds that delete one event named by their `e` tag.
_E_DELETION_KINDS = (DELETION_KIND, 9005)


async def history_txn(
    conn: Conn,
    kind: int,
    pubkey: str,
    d: str,
    limit: int,
    max_bytes: int,
    before: tuple[int, str] | None,
    accept: Accept | None,
    readable_by: str | None = None,
) -> History:
    """`EventStore.history`. Superseded versions and the head both sit in `events` (a
    replacement soft-deletes, relay.md §13.3), so `deleted_at` cannot tell a replaced version
    from a deleted one: deletions are found from what records them instead, the address
    deletion's `deleted_until` (in SQL) and the kind 5 / 9005 events naming a version by `e`
    (one lookup per page)."""
    if not is_addressable(kind):
        return History([], None, [])
    until = await _address_deleted_until_txn(conn, kind, pubkey, d)
    got: list[StoredEvent] = []
    texts: list[str] = []
    used = 0
    cursor = before
    size = min(limit + 1, MAX_PAGE)
    while True:
        p = Params(conn.dialect)
        sql = (
            f"SELECT {EVENT_COLUMNS} FROM events e WHERE e.kind = {p.add(kind)}"
            f" AND e.pubkey = {p.add(pubkey)} AND e.d_tag = {p.add(d, 'utf8')}"
        )
        if until is not None:
            sql += f" AND e.created_at > {p.add(until)}"
        if readable_by is not None and readable_by != pubkey:
            # The history gate in SQL (issue 24 item 12): a reader other than the author reads
            # only the versions that name it, so a refused reader reads no row at all.
            sql += (
                " AND e.id IN (SELECT t.event_id FROM event_tags t"
                f" WHERE t.name = 'p' AND t.value = {p.add(readable_by, 'utf8')})"
            )
        if cursor is not None:
            c = p.add(cursor[0])
            sql += f" AND (e.created_at < {c} OR (e.created_at = {c} AND e.id > {p.add(cursor[1])}))"
        rows, cut = await conn.fetch_bounded(
            f"{sql} ORDER BY {ORDER} LIMIT {size}", p.values, PAGE_MAX_BYTES, row_bytes
        )
        page = [event_from_row(r, conn.dialect) for r in rows]
        deleted = await _deleted_by_e_txn(conn, [s.event.id for s in page])
        for stored in page:
            if stored.event.id in deleted or (accept is not None and not accept(stored)):
                continue
            if len(got) < limit:
                text = stored.event.to_json()
                n = len(text.encode())
                # A version larger than the whole budget is served alone, so paging always moves.
                if not got or used + n <= max_bytes:
                    got.append(stored)
                    texts.append(text)
                    used += n
                    continue
            last = got[-1].event
            return History(got, (last.created_at, last.id), texts)
        if len(page) < size and not cut:
            return History(got, None, texts)
        last = page[-1].event
        cursor = (last.created_at, last.id)
        size = min(size * 2, MAX_PAGE)


async def _address_deleted_until_txn(conn: Conn, kind: int, pubkey: str, d: str) -> int | None:
    """The greatest `created_at` a kind 5 `a` deletion covers at this address (§10.1 item 4)."""
    p = Params(conn.dialect)
    rows = await conn.fetch(
        f"SELECT deleted_until FROM deleted_addresses WHERE kind = {p.add(kind)}"
        f" AND pubkey = {p.add(pubkey)} AND d = {p.add(d, 'utf8')}",
        p.values,
    )
    return int(rows[0][0]) if rows else None


async def _deleted_by_e_txn(conn: Conn, event_ids: Sequence[str]) -> frozenset[str]:
    """Those of `event_ids` that a stored deletion names by `e`. A deletion counts even when
    it was itself deleted (§10.1 item 5: deleting a deletion restores nothing); ingest let
    only the author or its owner store it, and any other such row hides the version too
    (fail closed)."""
    if not event_ids:
        return frozenset()
    p = Params(conn.dialect)
    kinds = ", ".join(p.add(k) for k in _E_DELETION_KINDS)
    sql = (
        "SELECT t.value FROM event_tags t JOIN events x ON x.id = t.event_id"
        f" WHERE t.name = 'e' AND x.kind IN ({kinds}) AND {p.in_list('t.value', event_ids, 'utf8')}"
    )
    return frozenset(conn.dialect.decode_utf8(row[0]) for row in await conn.fetch(sql, p.values))


Row = Sequence[Any]


def row_bytes(row: Row) -> int:
    """What a row of EVENT_COLUMNS costs to hold and parse: its tags and content as stored."""
    return len(row[4]) + len(row[5])


async def _pages(
    conn: Conn, f: Filter, reader: Reader, size: int, gates: Gates | None = None
) -> AsyncGenerator[Sequence[Row], None]:
    """`f`'s candidate rows in result order, one page per step; the page size doubles up to
    MAX_PAGE. Rows are parsed by the caller, so that a budget can stop before parsing."""
    page = Page(size)
    while True:
        p = Params(conn.dialect)
        sql = select_page(f, reader, page, p, gates)
        rows, cut = await conn.fetch_bounded(sql, p.values, PAGE_MAX_BYTES, row_bytes)
        more = len(rows) == page.size or cut
        if more:
            size = min(page.size * 2, MAX_PAGE)
            if f.search is not None:
                page = Page(size, offset=page.offset + len(rows))
            else:
                last = rows[-1]
                page = Page(size, after=(int(last[2]), str(last[0])))
        yield rows
        # The caller is done with this page when it asks for the next: emptied here, so that
        # its rows are not held (by the caller's loop variable) while the next page is read.
        if isinstance(rows, list):
            rows.clear()
        if not more:
            return


@dataclass
class _Budget:
    """The bytes of events one read may still hold (READ_MAX_BYTES, `row_bytes`)."""

    bytes_left: int
    served: bool = False  # an event was served: every later one must fit
    spent: bool = False  # one did not: the read ends there
    held: set[str] = field(default_factory=set)  # ids already charged (an earlier filter's)


async def _accepted(
    conn: Conn,
    f: Filter,
    reader: Reader,
    accept: Accept | None,
    limit: int,
    gates: Gates | None,
    budget: _Budget,
) -> list[StoredEvent]:
    """The first `limit` candidates of `f` that `accept` keeps (one query when accept is None),
    ending early at the read's byte budget or after READ_MAX_REFUSED refused candidates."""
    # Twice the limit: the predicate rarely refuses (gift wraps, DMs of others), and every
    # fetched row is parsed; more pages follow when it does.
    first = limit if accept is None else min(max(2 * limit, _MIN_ACCEPT_PAGE), MAX_PAGE)
    got: list[StoredEvent] = []
    refused = 0
    async with aclosing(_pages(conn, f, reader, first, gates)) as pages:
        async for rows in pages:
            for row in rows:
                n = 0 if str(row[0]) in budget.held else row_bytes(row)
                # The first event of a read is served whatever its size, so paging always moves.
                if budget.served and n > budget.bytes_left:
                    budget.spent = True
                    return got
                stored = event_from_row(row, conn.dialect)
                if accept is not None and not accept(stored):
                    refused += 1
                    if refused > READ_MAX_REFUSED:
                        return got
                    continue
                budget.bytes_left -= n
                budget.served = True
                budget.held.add(stored.event.id)
                got.append(stored)
                if len(got) == limit:
                    return got
    return got


async def query_txn(
    conn: Conn,
    filters: Sequence[Filter],
    reader: Reader,
    accept: Accept | None,
    gates: Gates | None = None,
    max_bytes: int = READ_MAX_BYTES,
) -> list[StoredEvent]:
    """relay.md §6.4 item 2: filter by filter; an event sent for an earlier filter is skipped
    (after it counted toward its own filter's limit). At most `max_bytes` of events in all
    (`row_bytes`; the first event always): the first one past it ends the answer."""
    out: list[StoredEvent] = []
    sent: set[str] = set()
    budget = _Budget(max_bytes)
    for f in filters:
        if f.effective_limit == 0 or matches_nothing(f):
            continue
        for stored in await _accepted(conn, f, reader, accept, f.effective_limit, gates, budget):
            if stored.event.id not in sent:
                sent.add(stored.event.id)
                out.append(stored)
        if budget.spent:
            break
    return out


def _gated_part(f: Filter, kinds: frozenset[int]) -> Filter | None:
    """`f` narrowed to the events of `kinds`, or None when it matches none of them."""
    narrowed = kinds if f.kinds is None else f.kinds & kinds
    return replace(f, kinds=narrowed) if narrowed else None


async def count_txn(
    conn: Conn,
    filters: Sequence[Filter],
    reader: Reader,
    accept: Accept | None,
    gates: Gates | None = None,
    budget: int = COUNT_EXACT_BUDGET,
) -> int:
    """relay.md §7.7 item 2: distinct accepted matches of any filter; `limit` ignored.

    With `gates`, only events of gated kinds need `accept`: the others are counted in SQL, and
    the gated candidates (after `gates` in SQL) are read one by one. Raises CountTooBroad when
    more than `budget` candidates would be read (§7.7 item 3): before issue 24 item 10 every
    candidate was parsed, 18.6 s for `{"kinds":[1,30300]}` over 100k notes."""
    live = [f for f in filters if not matches_nothing(f)]
    if not live:
        return 0
    if accept is None:
        p = Params(conn.dialect)
        rows = await conn.fetch(count_union(live, reader, p), p.values)
        return int(rows[0][0])
    n = 0
    examined = live
    if gates is not None:
        # Kinds no filter needs `accept` for are counted in SQL with the rest; the others, for
        # every filter (so the two parts never hold the same event), one by one.
        need = frozenset().union(*(gated_kinds(gates, f, reader) for f in live))
        p = Params(conn.dialect)
        rows = await conn.fetch(count_union(live, reader, p, need), p.values)
        n = int(rows[0][0])
        examined = [g for g in (_gated_part(f, need) for f in live) if g is not None]
    if gates is not None and examined:
        # Refused before any row is parsed when SQL already counts too many candidates.
        p = Params(conn.dialect)
        rows = await conn.fetch(count_union(examined, reader, p, gates=gates), p.values)
        if int(rows[0][0]) > budget:
            raise CountTooBroad()
    seen: set[str] = set()
    for f in examined:
        async with aclosing(_pages(conn, f, reader, min(budget + 1, MAX_PAGE), gates)) as pages:
            async for rows in pages:
                for row in rows:
                    if str(row[0]) in seen:
                        continue
                    seen.add(str(row[0]))
                    if len(seen) > budget:
                        raise CountTooBroad()
                    n += accept(event_from_row(row, conn.dialect))
    return n


async def get_channel_txn(conn: Conn, channel_id: str, include_deleted: bool) -> Channel | None:
    p = Params(conn.dialect)
    sql = f"SELECT {', '.join(_CHANNEL_FIELDS)} FROM channels WHERE id = {p.add(channel_id)}"
    if not include_deleted:
        sql += " AND deleted_at IS NULL"
    rows = await conn.fetch(sql, p.values)
    if not rows:
        return None
    return Channel(**dict(zip(_CHANNEL_FIELDS, rows[0], strict=True)))


async def get_member_txn(conn: Conn, channel_id: str, pubkey: str) -> Member | None:
    p = Params(conn.dialect)
    sql = (
        f"SELECT {', '.join(_MEMBER_FIELDS)} FROM channel_members"
        f" WHERE channel_id = {p.add(channel_id)} AND pubkey = {p.add(pubkey)}"
    )
    rows = await conn.fetch(sql, p.values)
    return Member(**dict(zip(_MEMBER_FIELDS, rows[0], strict=True))) if rows else None


async def readable_channels_txn(conn: Conn, channel_ids: Iterable[str], reader: Reader) -> frozenset[str]:
    """relay.md §4.3 item 1 for each id; unknown and deleted channels are not readable."""
    ids = set(channel_ids)
    if not ids:
        return frozenset()
    p = Params(conn.dialect)
    sql = f"SELECT c.id FROM channels c WHERE {p.in_list('c.id', ids, 'text')} AND {readable_channel(reader, p)}"
    return frozenset(row[0] for row in await conn.fetch(sql, p.values))


async def ping_txn(conn: Conn) -> bool:
    rows = await conn.fetch("SELECT 1")
    return bool(rows) and rows[0][0] == 1


async def get_agent_owner_txn(conn: Conn, agent: str) -> str | None:
    """The registered owner of `agent` (relay.md §7.3 item 4), or None."""
    p = Params(conn.dialect)
    rows = await conn.fetch(f"SELECT owner FROM agent_owners WHERE agent = {p.add(agent)}", p.values)
    return rows[0][0] if rows else None


RELAY_MEMBER_ROLES = ("owner", "admin", "member")  # relay.md §4.4 item 1


async def is_relay_member_txn(conn: Conn, pubkey: str) -> bool:
    """Is `pubkey` on the workspace member list with a role that may AUTH (relay.md §4.4)?"""
    p = Params(conn.dialect)
    roles = ", ".join(p.add(r) for r in RELAY_MEMBER_ROLES)
    rows = await conn.fetch(
        f"SELECT 1 FROM relay_members WHERE pubkey = {p.add(pubkey)} AND role IN ({roles})", p.values
    )
    return bool(rows)
