"""Read functions shared by both backends (relay.md §6.3–§6.5, §7.7, §11).

Each `_txn` function runs on one connection handed out by the backend. Matching, scope and
order are SQL (`buzz.store.clauses`); the only Python-side step is the caller's `accept`
predicate, served by paging: candidates are fetched page by page (keyset on
`(created_at, id)`, offset for search) until `limit` of them are accepted, so rejected rows
never shrink a result below its limit (relay.md §6.5 item 3).
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Iterable, Sequence
from contextlib import aclosing
from dataclasses import fields
from typing import Any

import orjson

from buzz.core.event import Event
from buzz.core.filters import Filter
from buzz.core.kinds import DELETION_KIND, is_addressable
from buzz.core.stored import StoredEvent, from_storage
from buzz.store.base import Accept, Channel, History, Member, Reader
from buzz.store.clauses import (
    EVENT_COLUMNS,
    ORDER,
    Page,
    count_union,
    matches_nothing,
    readable_channel,
    select_page,
)
from buzz.store.dialect import Conn, Dialect, Params

MAX_PAGE = 1000
_MIN_ACCEPT_PAGE = 20

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
        if cursor is not None:
            c = p.add(cursor[0])
            sql += f" AND (e.created_at < {c} OR (e.created_at = {c} AND e.id > {p.add(cursor[1])}))"
        rows = await conn.fetch(f"{sql} ORDER BY {ORDER} LIMIT {size}", p.values)
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
        if len(page) < size:
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


async def _pages(conn: Conn, f: Filter, reader: Reader, size: int) -> AsyncGenerator[list[StoredEvent], None]:
    """`f`'s candidates in result order, one page per step; the page size doubles up to MAX_PAGE."""
    page = Page(size)
    while True:
        p = Params(conn.dialect)
        rows = await conn.fetch(select_page(f, reader, page, p), p.values)
        events = [event_from_row(r, conn.dialect) for r in rows]
        yield events
        if len(events) < page.size:
            return
        size = min(page.size * 2, MAX_PAGE)
        if f.search is not None:
            page = Page(size, offset=page.offset + page.size)
        else:
            last = events[-1].event
            page = Page(size, after=(last.created_at, last.id))


async def _accepted(
    conn: Conn, f: Filter, reader: Reader, accept: Accept | None, limit: int
) -> list[StoredEvent]:
    """The first `limit` candidates of `f` that `accept` keeps (one query when accept is None)."""
    # Twice the limit: the predicate rarely refuses (gift wraps, DMs of others), and every
    # fetched row is parsed; more pages follow when it does.
    first = limit if accept is None else min(max(2 * limit, _MIN_ACCEPT_PAGE), MAX_PAGE)
    got: list[StoredEvent] = []
    async with aclosing(_pages(conn, f, reader, first)) as pages:
        async for events in pages:
            for stored in events:
                if accept is None or accept(stored):
                    got.append(stored)
                    if len(got) == limit:
                        return got
    return got


async def query_txn(
    conn: Conn, filters: Sequence[Filter], reader: Reader, accept: Accept | None
) -> list[StoredEvent]:
    """relay.md §6.4 item 2: filter by filter; an event sent for an earlier filter is skipped
    (after it counted toward its own filter's limit)."""
    out: list[StoredEvent] = []
    sent: set[str] = set()
    for f in filters:
        if f.effective_limit == 0 or matches_nothing(f):
            continue
        for stored in await _accepted(conn, f, reader, accept, f.effective_limit):
            if stored.event.id not in sent:
                sent.add(stored.event.id)
                out.append(stored)
    return out


async def count_txn(conn: Conn, filters: Sequence[Filter], reader: Reader, accept: Accept | None) -> int:
    """relay.md §7.7 item 2: distinct accepted matches of any filter; `limit` ignored."""
    live = [f for f in filters if not matches_nothing(f)]
    if not live:
        return 0
    if accept is None:
        p = Params(conn.dialect)
        rows = await conn.fetch(count_union(live, reader, p), p.values)
        return int(rows[0][0])
    seen: set[str] = set()
    n = 0
    for f in live:
        async with aclosing(_pages(conn, f, reader, MAX_PAGE)) as pages:
            async for events in pages:
                for stored in events:
                    if stored.event.id not in seen:
                        seen.add(stored.event.id)
                        n += accept(stored)
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
