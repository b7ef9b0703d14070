"""The insert transaction and its effects, shared by both backends (relay.md §3.1, §10, §13.3).

Every function here runs inside one write transaction (`_txn`); `insert_txn` composes them.
The backend owns the transaction and the serialization: SQLite runs every write on its one
writer connection, PostgreSQL takes `pg_advisory_xact_lock` on the replacement key.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, fields
from functools import cache
from typing import assert_never

import orjson

from buzz.core.event import Event
from buzz.core.filters import tag_index
from buzz.core.kinds import is_addressable, is_replaceable, is_searchable
from buzz.core.stored import StoredEvent
from buzz.store.base import (
    AdvanceJob,
    Channel,
    ChannelExists,
    CreateChannel,
    DeleteAddress,
    DeleteChannel,
    DeleteWorkflow,
    Effect,
    InsertOutcome,
    OpenJob,
    PutMediaRefs,
    PutMember,
    PutReaction,
    RecordThread,
    RegisterDm,
    RemoveMember,
    RunLease,
    SetDmHidden,
    SoftDelete,
    UpdateChannel,
    WorkflowWrite,
)
from buzz.store.dialect import Conn, Dialect, Params
from buzz.store.jobs import advance_job_txn, open_job_txn
from buzz.store.media import put_refs_txn
from buzz.store.workflows import suspend_workflows_txn
from buzz.store.workspace import (
    forget_reaction_txn,
    put_reaction_txn,
    record_thread_txn,
    register_dm_txn,
    set_dm_hidden_txn,
    update_channel_txn,
)


@dataclass(frozen=True, slots=True)
class ReplacementKey:
    """relay.md §3.1: (pubkey, kind) for replaceable kinds (`d` None), (pubkey, kind, d) for
    addressable ones."""

    kind: int
    pubkey: str
    d: str | None

    @classmethod
    def of(cls, kind: int, pubkey: str, d: str) -> ReplacementKey | None:
        if is_replaceable(kind):
            return cls(kind, pubkey, None)
        if is_addressable(kind):
            return cls(kind, pubkey, d)
        return None

    @classmethod
    def of_event(cls, event: Event) -> ReplacementKey | None:
        """`of` for an event; its `d` tag is looked up only for an addressable kind."""
        if is_replaceable(event.kind):
            return cls(event.kind, event.pubkey, None)
        if is_addressable(event.kind):
            return cls(event.kind, event.pubkey, event.d_tag)
        return None

    @property
    def address_d(self) -> str:
        """The `d` recorded for an address deletion ('' for replaceable kinds)."""
        return self.d or ""

    @property
    def lock_id(self) -> int:
        """A signed 64-bit hash of the key, the same on every replica (advisory lock id)."""
        digest = hashlib.sha256(f"{self.kind}:{self.pubkey}:{self.address_d}".encode()).digest()
        return int.from_bytes(digest[:8], "big", signed=True)

    def where(self, p: Params) -> str:
        clause = f"kind = {p.add(self.kind)} AND pubkey = {p.add(self.pubkey)}"
        return clause if self.d is None else f"{clause} AND d_tag = {p.add(self.d, 'utf8')}"


async def insert_txn(conn: Conn, stored: StoredEvent, effects: tuple[Effect, ...], now: int) -> InsertOutcome:
    """Insert `stored` and apply `effects`; when it is not stored (nothing applied), why: a
    known id (DUPLICATE when served, DELETED when deleted), a version that loses under its
    replacement key (SUPERSEDED) or a deleted address (DELETED) (relay.md §3.1 items 4–5,
    §13.3 items 1–2)."""
    event = stored.event
    key = ReplacementKey.of_event(event)
    if key is not None:
        await _lock_key_txn(conn, key)
        if await _address_deleted_txn(conn, key, event.created_at):
            return InsertOutcome.DELETED
        best = await _best_txn(conn, key)
        # Newest created_at wins; on a tie the lowest id (lowercase hex: bytewise) wins.
        if best is not None and not (-event.created_at, event.id) < (-best[0], best[1]):
            return (
                InsertOutcome.SUPERSEDED if best[1] != event.id else await known_outcome_txn(conn, event.id)
            )
    row_key = await _insert_row_txn(conn, stored, key)
    if row_key is None:
        return await known_outcome_txn(conn, event.id)
    if key is not None:
        await _supersede_txn(conn, event, key, now)
    await _insert_tags_txn(conn, stored)
    if is_searchable(event.kind):
        # relay.md §11 item 1: non-searchable kinds are never indexed.
        await conn.index_search(row_key, event.content.replace("\0", " "))
    for effect in effects:
        await _apply_txn(conn, effect, now)
    return InsertOutcome.STORED


async def known_outcome_txn(conn: Conn, event_id: str) -> InsertOutcome:
    """The outcome of inserting the stored id `event_id` again: DUPLICATE while it is served,
    SUPERSEDED when a newer version replaced it, DELETED when it was deleted."""
    p = Params(conn.dialect)
    rows = await conn.fetch(
        f"SELECT kind, pubkey, d_tag, created_at, deleted_at FROM events WHERE id = {p.add(event_id)}",
        p.values,
    )
    if not rows or rows[0][4] is None:
        return InsertOutcome.DUPLICATE
    kind, pubkey, d_tag, created_at = rows[0][0], rows[0][1], rows[0][2], rows[0][3]
    key = ReplacementKey.of(kind, pubkey, "" if d_tag is None else conn.dialect.decode_utf8(d_tag))
    if key is not None and not await _address_deleted_txn(conn, key, created_at):
        best = await _best_txn(conn, key)
        if best is not None and best[1] != event_id:
            return InsertOutcome.SUPERSEDED
    return InsertOutcome.DELETED


async def _lock_key_txn(conn: Conn, key: ReplacementKey) -> None:
    if conn.dialect.key_lock_sql is not None:
        await conn.fetch(conn.dialect.key_lock_sql, [key.lock_id])


async def _best_txn(conn: Conn, key: ReplacementKey) -> tuple[int, str] | None:
    """(created_at, id) of the winner under the tie rule (relay.md §3.1 item 4) among every
    version ever stored at `key`, deleted included; None when there is none."""
    p = Params(conn.dialect)
    rows = await conn.fetch(
        f"SELECT created_at, id FROM events WHERE {key.where(p)} ORDER BY created_at DESC, id ASC LIMIT 1",
        p.values,
    )
    return (rows[0][0], rows[0][1]) if rows else None


async def _address_deleted_txn(conn: Conn, key: ReplacementKey, created_at: int) -> bool:
    """relay.md §3.1 item 5: an `a` deletion at or after `created_at` makes the version lose."""
    p = Params(conn.dialect)
    sql = (
        f"SELECT 1 FROM deleted_addresses WHERE kind = {p.add(key.kind)} AND pubkey = {p.add(key.pubkey)}"
        f" AND d = {p.add(key.address_d, 'utf8')} AND deleted_until >= {p.add(created_at)}"
    )
    return bool(await conn.fetch(sql, p.values))


ROW_COLUMNS = "id, pubkey, created_at, kind, tags, content, sig, received_at, channel_id, d_tag"


@cache
def _insert_row_sql(dialect: Dialect) -> str:
    """The row insert, its text built once per dialect (the statement cache keys on it)."""
    return f"INSERT INTO events ({ROW_COLUMNS}) VALUES ({dialect.marks(10)}) ON CONFLICT (id) DO NOTHING"


def event_row(stored: StoredEvent, key: ReplacementKey | None, d: Dialect) -> list[object]:
    """The `events` row of `stored`, in `_insert_row_sql`'s column order (bulk writes use it too)."""
    event = stored.event
    return [
        event.id,
        event.pubkey,
        event.created_at,
        event.kind,
        orjson.dumps(event.tags).decode(),
        d.encode(event.content, "utf8"),
        event.sig,
        stored.received_at,
        stored.channel_id,
        d.encode(key.d, "utf8") if key is not None else None,
    ]


async def _insert_row_txn(conn: Conn, stored: StoredEvent, key: ReplacementKey | None) -> object | None:
    """The new row's key (`Conn.insert`), None for a known id."""
    d = conn.dialect
    values = event_row(stored, key, d)
    return await conn.insert(_insert_row_sql(d), values)


async def _supersede_txn(conn: Conn, event: Event, key: ReplacementKey, now: int) -> None:
    """The new winner is newest under its key: every other live version stops being served."""
    p = Params(conn.dialect)
    sql = (
        f"UPDATE events SET deleted_at = {p.add(now)}"
        f" WHERE {key.where(p)} AND deleted_at IS NULL AND id <> {p.add(event.id)}"
    )
    await conn.execute(sql, p.values)


def tag_rows(event: Event) -> list[tuple[str, str, str]]:
    """relay.md §13.2 item 2: (event id, name, t[1]) per tag with a one-letter name (an ASCII
    letter, the only names a `#x` filter can ask for) and ≥ 2 elements, without repeats."""
    return [
        (event.id, name, value)
        for name, values in tag_index(event).items()
        if name.isascii() and name.isalpha()
        for value in sorted(values)
    ]


TAG_COLUMNS = ("event_id", "name", "value", "in_channel")


def tag_table_rows(stored: StoredEvent, dialect: Dialect) -> list[tuple[str, str, object, int]]:
    """The `event_tags` rows of `stored`: `tag_rows` with the value encoded, and `in_channel`
    1 for an `h` tag naming the event's own channel, else 0 (what PostgreSQL's `#h` window
    skips: those events it reads from the channel index, decision 101)."""
    channel = stored.channel_id
    return [
        (i, n, dialect.encode(v, "utf8"), int(n == "h" and v == channel))
        for i, n, v in tag_rows(stored.event)
    ]


@cache
def _insert_tag_sql(dialect: Dialect) -> str:
    return f"INSERT INTO event_tags ({', '.join(TAG_COLUMNS)}) VALUES ({dialect.marks(len(TAG_COLUMNS))})"


async def _insert_tags_txn(conn: Conn, stored: StoredEvent) -> None:
    rows = tag_table_rows(stored, conn.dialect)
    if not rows:
        return
    if len(rows) == 1:  # most channel events: one `h`; `execute` costs less than `executemany`
        await conn.execute(_insert_tag_sql(conn.dialect), rows[0])
        return
    await conn.executemany(_insert_tag_sql(conn.dialect), rows)


# -- effects --------------------------------------------------------------------------------------
async def _apply_txn(conn: Conn, effect: Effect, now: int) -> None:
    match effect:
        case SoftDelete():
            await _soft_delete_txn(conn, effect, now)
        case DeleteAddress():
            await _delete_address_txn(conn, effect, now)
        case CreateChannel():
            await _create_channel_txn(conn, effect)
        case PutMember():
            await _put_member_txn(conn, effect, now)
        case RemoveMember():
            await _remove_member_txn(conn, effect, now)
        case DeleteChannel():
            await _delete_channel_txn(conn, effect, now)
        case UpdateChannel():
            await update_channel_txn(conn, effect)
        case RecordThread():
            await record_thread_txn(conn, effect)
        case PutReaction():
            await put_reaction_txn(conn, effect)
        case RegisterDm():
            await register_dm_txn(conn, effect)
        case SetDmHidden():
            await set_dm_hidden_txn(conn, effect)
        case PutMediaRefs():
            await put_refs_txn(conn, effect)
        case OpenJob():
            await open_job_txn(conn, effect)
        case AdvanceJob():
            await advance_job_txn(conn, effect, now)
        case WorkflowWrite():
            from buzz.store.workflows import workflow_write_txn  # it inserts events: imports this module

            await workflow_write_txn(conn, effect, now)
        case DeleteWorkflow():
            from buzz.store.workflows import delete_workflow_txn

            await delete_workflow_txn(conn, effect, now)
        case RunLease():
            from buzz.store.workflows import run_lease_txn

            await run_lease_txn(conn, effect)
        case _:
            assert_never(effect)


async def _soft_delete_txn(conn: Conn, effect: SoftDelete, now: int) -> None:
    p = Params(conn.dialect)
    sql = f"UPDATE events SET deleted_at = {p.add(now)} WHERE id = {p.add(effect.event_id)} AND deleted_at IS NULL"
    await conn.execute(sql, p.values)
    await forget_reaction_txn(conn, effect.event_id)  # relay.md §10.1 item 4


async def _delete_address_txn(conn: Conn, effect: DeleteAddress, now: int) -> None:
    """relay.md §10.1 item 4: hide the versions at the address up to `until`, and remember
    `until` (the greatest one when deleted twice) so older re-submissions lose."""
    key = ReplacementKey.of(effect.kind, effect.pubkey, effect.d)
    if key is None:
        return
    await _lock_key_txn(conn, key)
    p = Params(conn.dialect)
    greatest = conn.dialect.greatest
    await conn.execute(
        "INSERT INTO deleted_addresses (kind, pubkey, d, deleted_until)"
        f" VALUES ({p.add(key.kind)}, {p.add(key.pubkey)}, {p.add(key.address_d, 'utf8')}, {p.add(effect.until)})"
        " ON CONFLICT (kind, pubkey, d) DO UPDATE SET"
        f" deleted_until = {greatest}(deleted_addresses.deleted_until, excluded.deleted_until)",
        p.values,
    )
    p = Params(conn.dialect)
    sql = (
        f"UPDATE events SET deleted_at = {p.add(now)} WHERE {key.where(p)}"
        f" AND created_at <= {p.add(effect.until)} AND deleted_at IS NULL"
    )
    await conn.execute(sql, p.values)


async def _create_channel_txn(conn: Conn, effect: CreateChannel) -> None:
    p = Params(conn.dialect)
    names = [f.name for f in fields(Channel)]  # columns carry the record's field names
    values = ", ".join(p.add(getattr(effect.channel, name)) for name in names)
    sql = (
        f"INSERT INTO channels ({', '.join(names)}) VALUES ({values})"
        " ON CONFLICT (id) DO NOTHING RETURNING id"
    )
    if not await conn.fetch(sql, p.values):
        raise ChannelExists(effect.channel.id)


async def _put_member_txn(conn: Conn, effect: PutMember, now: int) -> None:
    p = Params(conn.dialect)
    role = f"CAST({p.add(effect.role)} AS TEXT)"
    keep_if_active = (
        "CASE WHEN channel_members.removed_at IS NULL THEN channel_members.{0} ELSE excluded.{0} END"
    )
    sql = (
        "INSERT INTO channel_members (channel_id, pubkey, role, invited_by, joined_at)"
        f" VALUES ({p.add(effect.channel_id)}, {p.add(effect.pubkey)}, COALESCE({role}, 'member'),"
        f" {p.add(effect.invited_by)}, {p.add(now if effect.joined_at is None else effect.joined_at)})"
        " ON CONFLICT (channel_id, pubkey) DO UPDATE SET"
        f" role = COALESCE({role}, channel_members.role),"
        f" invited_by = {keep_if_active.format('invited_by')},"
        f" joined_at = {keep_if_active.format('joined_at')},"
        " removed_at = NULL, removed_by = NULL"
    )
    await conn.execute(sql, p.values)


async def _remove_member_txn(conn: Conn, effect: RemoveMember, now: int) -> None:
    p = Params(conn.dialect)
    at = now if effect.removed_at is None else effect.removed_at
    sql = (
        f"UPDATE channel_members SET removed_at = {p.add(at)}, removed_by = {p.add(effect.removed_by)}"
        f" WHERE channel_id = {p.add(effect.channel_id)} AND pubkey = {p.add(effect.pubkey)}"
        " AND removed_at IS NULL"
    )
    await conn.execute(sql, p.values)
    await suspend_workflows_txn(conn, effect.pubkey, effect.channel_id)


async def _delete_channel_txn(conn: Conn, effect: DeleteChannel, now: int) -> None:
    p = Params(conn.dialect)
    at = now if effect.deleted_at is None else effect.deleted_at
    sql = f"UPDATE channels SET deleted_at = {p.add(at)} WHERE id = {p.add(effect.channel_id)} AND deleted_at IS NULL"
    await conn.execute(sql, p.values)


async def set_agent_owner_txn(conn: Conn, agent: str, owner: str, now: int) -> None:
    """Record agent → owner unless the agent already has one (relay.md §7.3 item 4)."""
    p = Params(conn.dialect)
    sql = (
        f"INSERT INTO agent_owners (agent, owner, created_at) VALUES ({p.add(agent)}, {p.add(owner)}, {p.add(now)})"
        " ON CONFLICT (agent) DO NOTHING"
    )
    await conn.execute(sql, p.values)


async def put_relay_member_txn(conn: Conn, pubkey: str, role: str, now: int) -> None:
    """Add `pubkey` to the workspace member list, or change its role (relay.md §4.4)."""
    p = Params(conn.dialect)
    sql = (
        f"INSERT INTO relay_members (pubkey, role, added_at) VALUES ({p.add(pubkey)}, {p.add(role)}, {p.add(now)})"
        f" ON CONFLICT (pubkey) DO UPDATE SET role = {p.add(role)}"
    )
    await conn.execute(sql, p.values)


async def claim_auth_event_txn(conn: Conn, event_id: str, now: int, ttl_s: int) -> bool:
    """Record a NIP-98 event id until `now + ttl_s`; False when it is already recorded and not
    expired. The unique key decides between replicas racing on one id (relay.md §15 item 1)."""
    p = Params(conn.dialect)
    await conn.execute(f"DELETE FROM nip98_seen WHERE expires_at <= {p.add(now)}", p.values)
    p = Params(conn.dialect)
    sql = (
        f"INSERT INTO nip98_seen (event_id, expires_at) VALUES ({p.add(event_id)}, {p.add(now + ttl_s)})"
        " ON CONFLICT (event_id) DO NOTHING RETURNING event_id"
    )
    return bool(await conn.fetch(sql, p.values))
