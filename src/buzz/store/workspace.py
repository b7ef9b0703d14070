"""Workspace tables beside the events: thread positions, the active-reaction index, DM
participant sets and hidden DMs (relay.md §4.5, §4.8, §9 items 1 and 3, §10.1 item 4, §13.2
item 4). Shared by both backends; every function runs inside one transaction (`_txn`).

Write functions apply one effect of the insert transaction (`buzz.store.writes` dispatches
to them); read functions answer the lookups the relay's rules make before a write.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import fields
from functools import cache

from buzz.store.base import (
    EDITABLE_CHANNEL_FIELDS,
    Channel,
    DmExists,
    Member,
    PutReaction,
    ReactionExists,
    RecordThread,
    RegisterDm,
    SetDmHidden,
    UpdateChannel,
)
from buzz.store.dialect import Conn, Dialect, Params

_MEMBER_FIELDS = tuple(f.name for f in fields(Member))
_CHANNEL_FIELDS = tuple(f.name for f in fields(Channel))


def participants_key(participants: Iterable[str]) -> str:
    """The DM set as one key: the sorted pubkeys joined by `,` (relay.md §4.8 item 2)."""
    return ",".join(sorted(set(participants)))


# -- writes (effects) -----------------------------------------------------------------------------
async def update_channel_txn(conn: Conn, effect: UpdateChannel) -> None:
    """Set the named channel columns (kind 9002). Raises ValueError for a column that is not
    editable (a relay bug, never client input)."""
    if not effect.changes:
        return
    p = Params(conn.dialect)
    sets = []
    for column, value in effect.changes:
        if column not in EDITABLE_CHANNEL_FIELDS:
            raise ValueError(f"channel column {column!r} is not editable")
        sets.append(f"{column} = {p.add(value)}")
    sql = (
        f"UPDATE channels SET {', '.join(sets)} WHERE id = {p.add(effect.channel_id)} AND deleted_at IS NULL"
    )
    await conn.execute(sql, p.values)


@cache
def _thread_sql(dialect: Dialect) -> str:
    return (
        f"INSERT INTO event_threads (event_id, root_id, parent_id, depth) VALUES ({dialect.marks(4)})"
        " ON CONFLICT (event_id) DO NOTHING"
    )


async def record_thread_txn(conn: Conn, effect: RecordThread) -> None:
    values = [effect.event_id, effect.root_id, effect.parent_id, effect.depth]
    await conn.execute(_thread_sql(conn.dialect), values)


@cache
def _reaction_sql(dialect: Dialect) -> str:
    return (
        f"INSERT INTO reactions (author, target_id, content, event_id) VALUES ({dialect.marks(4)})"
        " ON CONFLICT (author, target_id, content) DO NOTHING RETURNING event_id"
    )


async def put_reaction_txn(conn: Conn, effect: PutReaction) -> None:
    """Index an active reaction; ReactionExists when (author, target, content) has one."""
    d = conn.dialect
    values = [effect.author, effect.target_id, d.encode(effect.content, "utf8"), effect.event_id]
    if not await conn.fetch(_reaction_sql(d), values):
        raise ReactionExists()


async def forget_reaction_txn(conn: Conn, event_id: str) -> None:
    """A deleted kind 7 leaves the active-reaction index (relay.md §10.1 item 4)."""
    p = Params(conn.dialect)
    await conn.execute(f"DELETE FROM reactions WHERE event_id = {p.add(event_id)}", p.values)


async def register_dm_txn(conn: Conn, effect: RegisterDm) -> None:
    """Bind a participant set to its DM channel; DmExists when the set already has one."""
    p = Params(conn.dialect)
    sql = (
        "INSERT INTO dm_channels (participants, channel_id) VALUES"
        f" ({p.add(participants_key(effect.participants))}, {p.add(effect.channel_id)})"
        " ON CONFLICT (participants) DO NOTHING RETURNING channel_id"
    )
    if not await conn.fetch(sql, p.values):
        raise DmExists()


async def set_dm_hidden_txn(conn: Conn, effect: SetDmHidden) -> None:
    p = Params(conn.dialect)
    if effect.hidden:
        sql = (
            f"INSERT INTO dm_hidden (channel_id, pubkey) VALUES ({p.add(effect.channel_id)}, {p.add(effect.pubkey)})"
            " ON CONFLICT (channel_id, pubkey) DO NOTHING"
        )
    else:
        sql = f"DELETE FROM dm_hidden WHERE channel_id = {p.add(effect.channel_id)} AND pubkey = {p.add(effect.pubkey)}"
    await conn.execute(sql, p.values)


# -- reads ------------------------------------------------------------------------------------------
async def active_members_txn(conn: Conn, channel_id: str) -> list[Member]:
    p = Params(conn.dialect)
    sql = (
        f"SELECT {', '.join(_MEMBER_FIELDS)} FROM channel_members"
        f" WHERE channel_id = {p.add(channel_id)} AND removed_at IS NULL ORDER BY joined_at, pubkey"
    )
    return [Member(**dict(zip(_MEMBER_FIELDS, row, strict=True))) for row in await conn.fetch(sql, p.values)]


async def live_channels_txn(conn: Conn) -> list[tuple[Channel, list[Member]]]:
    """Every channel not deleted, by id, with its active members oldest first (two queries)."""
    rows = await conn.fetch(
        f"SELECT {', '.join(_CHANNEL_FIELDS)} FROM channels WHERE deleted_at IS NULL ORDER BY id"
    )
    out = {row[0]: (Channel(**dict(zip(_CHANNEL_FIELDS, row, strict=True))), []) for row in rows}
    members = await conn.fetch(
        f"SELECT {', '.join('m.' + f for f in _MEMBER_FIELDS)} FROM channel_members m"
        " JOIN channels c ON c.id = m.channel_id"
        " WHERE m.removed_at IS NULL AND c.deleted_at IS NULL ORDER BY m.channel_id, m.joined_at, m.pubkey"
    )
    for row in members:
        member = Member(**dict(zip(_MEMBER_FIELDS, row, strict=True)))
        entry = out.get(member.channel_id)
        if entry is not None:
            entry[1].append(member)
    return list(out.values())


async def find_dm_txn(conn: Conn, participants: frozenset[str]) -> str | None:
    p = Params(conn.dialect)
    sql = (
        "SELECT d.channel_id FROM dm_channels d JOIN channels c ON c.id = d.channel_id"
        f" WHERE d.participants = {p.add(participants_key(participants))} AND c.deleted_at IS NULL"
    )
    rows = await conn.fetch(sql, p.values)
    return rows[0][0] if rows else None


async def thread_txn(conn: Conn, event_id: str) -> tuple[str, int] | None:
    p = Params(conn.dialect)
    rows = await conn.fetch(
        f"SELECT root_id, depth FROM event_threads WHERE event_id = {p.add(event_id)}", p.values
    )
    return (rows[0][0], int(rows[0][1])) if rows else None


async def has_reaction_txn(conn: Conn, author: str, target_id: str, content: str) -> bool:
    p = Params(conn.dialect)
    sql = (
        f"SELECT 1 FROM reactions WHERE author = {p.add(author)} AND target_id = {p.add(target_id)}"
        f" AND content = {p.add(content, 'utf8')}"
    )
    return bool(await conn.fetch(sql, p.values))


async def latest_created_at_txn(conn: Conn, kind: int, pubkey: str, d: str) -> int | None:
    """Newest `created_at` ever stored at the address, superseded and deleted rows included."""
    p = Params(conn.dialect)
    sql = (
        f"SELECT MAX(created_at) FROM events WHERE kind = {p.add(kind)} AND pubkey = {p.add(pubkey)}"
        f" AND d_tag = {p.add(d, 'utf8')}"
    )
    rows = await conn.fetch(sql, p.values)
    return int(rows[0][0]) if rows and rows[0][0] is not None else None


async def dm_hidden_txn(conn: Conn, channel_id: str, pubkey: str) -> bool:
    p = Params(conn.dialect)
    sql = f"SELECT 1 FROM dm_hidden WHERE channel_id = {p.add(channel_id)} AND pubkey = {p.add(pubkey)}"
    return bool(await conn.fetch(sql, p.values))
