"""Operator tables: the workspace member list (relay.md §4.4), the ban list (§7.3 item 2.3),
relay settings, and the counts of `buzz admin stats`. Shared `_txn` functions of both backends.

Setting names and values are a table (`SETTINGS`), so a typo never writes a switch the relay
does not read.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from buzz.core.limits import text_too_long
from buzz.store.dialect import Conn, Params
from buzz.store.workflows import suspend_workflows_txn

RELAY_MEMBER_ROLES = ("owner", "admin", "member")  # relay.md §4.4 item 1
RELAY_ADMIN_ROLES = frozenset(RELAY_MEMBER_ROLES[:2])  # the workspace's owners and admins
SETTINGS: dict[str, tuple[str, ...]] = {"workspace": ("open", "closed")}


@dataclass(frozen=True, slots=True)
class RelayMember:
    pubkey: str
    role: str
    added_at: int


@dataclass(frozen=True, slots=True)
class Ban:
    pubkey: str
    reason: str
    banned_at: int


@dataclass(frozen=True, slots=True)
class StoreStats:
    """Counts for `buzz admin stats`; `size_bytes` is the database size as the backend reports it."""

    events_by_kind: dict[int, int]
    events_total: int
    deleted_events: int
    channels: int
    archived_channels: int
    relay_members: int
    channel_members: int
    bans: int
    size_bytes: int


# -- members ------------------------------------------------------------------------------------
async def list_relay_members_txn(conn: Conn) -> list[RelayMember]:
    rows = await conn.fetch("SELECT pubkey, role, added_at FROM relay_members ORDER BY added_at, pubkey")
    return [RelayMember(r[0], r[1], int(r[2])) for r in rows]


async def remove_relay_member_txn(conn: Conn, pubkey: str) -> bool:
    """Remove `pubkey` from the member list; False when it was not on it."""
    p = Params(conn.dialect)
    rows = await conn.fetch(
        f"DELETE FROM relay_members WHERE pubkey = {p.add(pubkey)} RETURNING pubkey", p.values
    )
    return bool(rows)


# -- bans ---------------------------------------------------------------------------------------
def check_ban_reason(reason: str) -> None:
    """Raises ValueError for a reason over its cap (core.limits.TEXT_CAPS["ban reason"])."""
    too_long = text_too_long("ban reason", reason)
    if too_long is not None:
        raise ValueError(too_long)


async def ban_txn(conn: Conn, pubkey: str, reason: str, now: int) -> bool:
    """Add `pubkey` to the ban list; False when it was already banned (reason kept)."""
    p = Params(conn.dialect)
    sql = (
        f"INSERT INTO relay_bans (pubkey, reason, banned_at) VALUES ({p.add(pubkey)}, {p.add(reason)}, {p.add(now)})"
        " ON CONFLICT (pubkey) DO NOTHING RETURNING pubkey"
    )
    banned = bool(await conn.fetch(sql, p.values))
    if banned:
        await suspend_workflows_txn(conn, pubkey, None)
    return banned


async def unban_txn(conn: Conn, pubkey: str) -> bool:
    p = Params(conn.dialect)
    rows = await conn.fetch(
        f"DELETE FROM relay_bans WHERE pubkey = {p.add(pubkey)} RETURNING pubkey", p.values
    )
    return bool(rows)


async def banned_among_txn(conn: Conn, pubkeys: Sequence[str]) -> frozenset[str]:
    """The subset of `pubkeys` on the ban list (an empty input reads nothing)."""
    if not pubkeys:
        return frozenset()
    p = Params(conn.dialect)
    rows = await conn.fetch(
        f"SELECT pubkey FROM relay_bans WHERE {p.in_list('pubkey', pubkeys, 'text')}", p.values
    )
    return frozenset(r[0] for r in rows)


async def list_bans_txn(conn: Conn) -> list[Ban]:
    rows = await conn.fetch("SELECT pubkey, reason, banned_at FROM relay_bans ORDER BY banned_at, pubkey")
    return [Ban(r[0], r[1], int(r[2])) for r in rows]


# -- settings -----------------------------------------------------------------------------------
def check_setting(name: str, value: str | None = None) -> None:
    """Raises ValueError for a setting name or value that `SETTINGS` does not list."""
    if name not in SETTINGS:
        raise ValueError(f"unknown relay setting {name!r}")
    if value is not None and value not in SETTINGS[name]:
        raise ValueError(f"relay setting {name!r} must be one of {', '.join(SETTINGS[name])}, got {value!r}")


async def get_setting_txn(conn: Conn, name: str) -> str | None:
    p = Params(conn.dialect)
    rows = await conn.fetch(f"SELECT value FROM relay_settings WHERE name = {p.add(name)}", p.values)
    return rows[0][0] if rows else None


async def set_setting_txn(conn: Conn, name: str, value: str) -> None:
    p = Params(conn.dialect)
    sql = (
        f"INSERT INTO relay_settings (name, value) VALUES ({p.add(name)}, {p.add(value)})"
        f" ON CONFLICT (name) DO UPDATE SET value = {p.add(value)}"
    )
    await conn.execute(sql, p.values)


# -- stats --------------------------------------------------------------------------------------
async def _one(conn: Conn, sql: str) -> int:
    rows = await conn.fetch(sql)
    return int(rows[0][0] or 0) if rows else 0


async def stats_txn(conn: Conn) -> StoreStats:
    """One consistent read of the counts (a read transaction on both backends)."""
    by_kind = {
        int(r[0]): int(r[1])
        for r in await conn.fetch(
            "SELECT kind, COUNT(*) FROM events WHERE deleted_at IS NULL GROUP BY kind ORDER BY kind"
        )
    }
    if conn.dialect.name == "sqlite":
        size_sql = "SELECT page_count * page_size FROM pragma_page_count(), pragma_page_size()"
    else:
        size_sql = "SELECT pg_database_size(current_database())"
    return StoreStats(
        events_by_kind=by_kind,
        events_total=sum(by_kind.values()),
        deleted_events=await _one(conn, "SELECT COUNT(*) FROM events WHERE deleted_at IS NOT NULL"),
        channels=await _one(conn, "SELECT COUNT(*) FROM channels WHERE deleted_at IS NULL"),
        archived_channels=await _one(
            conn, "SELECT COUNT(*) FROM channels WHERE deleted_at IS NULL AND archived_at IS NOT NULL"
        ),
        relay_members=await _one(conn, "SELECT COUNT(*) FROM relay_members"),
        channel_members=await _one(conn, "SELECT COUNT(*) FROM channel_members WHERE removed_at IS NULL"),
        bans=await _one(conn, "SELECT COUNT(*) FROM relay_bans"),
        size_bytes=await _one(conn, size_sql),
    )
