"""Many inserts in one transaction, with set-based writes where they change nothing (decision 101).

`insert_many_txn` gives exactly the answers of `insert_txn` called once per item in order,
inside one transaction. Items are taken in consecutive *runs* of plain events — a regular
kind whose only effects are its own thread position and reaction entry, or a replaceable /
addressable kind without effects — and each run is written with one statement (or COPY) per
table instead of one per row. Everything else, and every event a run's checks cannot settle
(a replacement key that already has a version, an address deletion, or two versions in the
run), goes through `insert_txn` in order, so the shared rules stay in one place.

Why the order is kept: a run's members never read or write each other's rows (distinct new
ids; distinct, previously unused replacement keys; reactions checked for clashes first), and
the checks of a run read the store as the items before it left it, so writing a run at once
is indistinguishable from writing its members one by one.
"""

from __future__ import annotations

from collections.abc import Sequence

from buzz.core.kinds import is_searchable
from buzz.core.stored import StoredEvent
from buzz.store.base import Effect, InsertOutcome, PutReaction, ReactionExists, RecordThread
from buzz.store.dialect import Conn, Params
from buzz.store.writes import (
    TAG_COLUMNS,
    ReplacementKey,
    event_row,
    insert_txn,
    known_outcome_txn,
    tag_table_rows,
)

Item = tuple[StoredEvent, tuple[Effect, ...]]
_PLAIN_EFFECTS = (RecordThread, PutReaction)


def _plain(stored: StoredEvent, effects: tuple[Effect, ...]) -> bool:
    """May this item be written inside a run (see the module docstring)?"""
    event = stored.event
    if ReplacementKey.of_event(event) is not None:
        return not effects
    return all(isinstance(e, _PLAIN_EFFECTS) and e.event_id == event.id for e in effects)


async def insert_many_txn(conn: Conn, items: Sequence[Item], now: int) -> list[InsertOutcome]:
    """`insert_txn` for each item in order, one transaction; the outcomes in item order.

    Raises what `insert_txn` raises (ReactionExists also for two reactions of one run with
    the same (author, target, content)); the caller's transaction then rolls back all of it.
    """
    for sql in conn.dialect.bulk_sql:  # PostgreSQL: other writers wait (the checks hold)
        await conn.execute(sql)
    return await insert_items_txn(conn, items, now)


async def insert_items_txn(conn: Conn, items: Sequence[Item], now: int) -> list[InsertOutcome]:
    """`insert_many_txn` without its `bulk_sql`: for a caller whose transaction already ran it
    (PostgreSQL's group commit, `pg_group`)."""
    outcomes: list[InsertOutcome | None] = [None] * len(items)
    run: list[int] = []
    for i, (stored, effects) in enumerate(items):
        if _plain(stored, effects):
            run.append(i)
            continue
        await _run_txn(conn, items, run, outcomes, now)
        run = []
        outcomes[i] = await insert_txn(conn, stored, effects, now)
    await _run_txn(conn, items, run, outcomes, now)
    return [o for o in outcomes if o is not None]


async def _run_txn(
    conn: Conn, items: Sequence[Item], run: list[int], outcomes: list[InsertOutcome | None], now: int
) -> None:
    if not run:
        return
    known = await _known_ids_txn(conn, [items[i][0].event.id for i in run])
    fresh: list[int] = []
    for i in run:
        event_id = items[i][0].event.id
        if event_id in known:
            outcomes[i] = await known_outcome_txn(conn, event_id)
        else:
            known.add(event_id)
            fresh.append(i)
    # Replacement keys: written in the run only when unused so far and alone in the run.
    keyed: dict[ReplacementKey, list[int]] = {}
    for i in fresh:
        key = ReplacementKey.of_event(items[i][0].event)
        if key is not None:
            keyed.setdefault(key, []).append(i)
    used = await _used_keys_txn(conn, [k for k, at in keyed.items() if len(at) == 1])
    later = sorted(i for k, at in keyed.items() if len(at) > 1 or k in used for i in at)
    later_set = set(later)
    now_rows = [i for i in fresh if i not in later_set]
    await _check_reactions_txn(conn, [e for i in now_rows for e in items[i][1] if isinstance(e, PutReaction)])
    await _write_rows_txn(conn, [items[i] for i in now_rows])
    for i in now_rows:
        outcomes[i] = InsertOutcome.STORED
    for i in later:  # they touch only their own key's rows: after the run is the same as inside it
        outcomes[i] = await insert_txn(conn, items[i][0], items[i][1], now)


_CHUNK = 20_000  # values per lookup statement


async def _known_ids_txn(conn: Conn, event_ids: list[str]) -> set[str]:
    """Which of `event_ids` are stored (live, deleted or superseded: all count as known)."""
    out: set[str] = set()
    for k in range(0, len(event_ids), _CHUNK):
        p = Params(conn.dialect)
        sql = f"SELECT id FROM events WHERE {p.in_list('id', event_ids[k : k + _CHUNK], 'text')}"
        out.update(row[0] for row in await conn.fetch(sql, p.values))
    return out


async def _used_keys_txn(conn: Conn, keys: list[ReplacementKey]) -> set[ReplacementKey]:
    """Keys with a version stored (deleted ones too, as the tie rule reads them) or an
    address deletion recorded: their events need `insert_txn`'s rules."""
    if not keys:
        return set()
    wanted = set(keys)
    d = conn.dialect
    out: set[ReplacementKey] = set()
    kinds = sorted({k.kind for k in keys})
    pubkeys = sorted({k.pubkey for k in keys})
    # Replaceable keys have no `d`: NULL in events, '' in deleted_addresses.
    d_values = sorted({k.address_d for k in keys})
    for table, d_match in (("events", "(d_tag IS NULL OR {})"), ("deleted_addresses", "{}")):
        d_column = "d_tag" if table == "events" else "d"
        for k in range(0, len(pubkeys), _CHUNK):
            p = Params(d)
            sql = (
                f"SELECT DISTINCT kind, pubkey, {d_column} FROM {table}"
                f" WHERE {p.in_list('kind', kinds, 'int')} AND {p.in_list('pubkey', pubkeys[k : k + _CHUNK], 'text')}"
                f" AND {d_match.format(p.in_list(d_column, d_values, 'utf8'))}"
            )
            for kind, pubkey, raw in await conn.fetch(sql, p.values):
                # deleted_addresses holds '' for a replaceable kind, events NULL; `of` maps both.
                key = ReplacementKey.of(kind, pubkey, "" if raw is None else d.decode_utf8(raw))
                if key in wanted:
                    out.add(key)
    return out


async def _check_reactions_txn(conn: Conn, reactions: list[PutReaction]) -> None:
    """ReactionExists when a reaction of the run is already active or repeats one of the run."""
    d = conn.dialect
    triples = {(r.author, r.target_id, r.content) for r in reactions}
    if len(triples) < len(reactions):
        raise ReactionExists()
    targets = sorted({r.target_id for r in reactions})
    for k in range(0, len(targets), _CHUNK):
        p = Params(d)
        sql = (
            "SELECT author, target_id, content FROM reactions"
            f" WHERE {p.in_list('target_id', targets[k : k + _CHUNK], 'text')}"
        )
        for author, target, content in await conn.fetch(sql, p.values):
            if (author, target, d.decode_utf8(content)) in triples:
                raise ReactionExists()


async def _write_rows_txn(conn: Conn, items: list[Item]) -> None:
    """The rows `insert_txn` would write for these new, unkeyed-or-unused events: one bulk
    statement per table."""
    if not items:
        return
    d = conn.dialect
    rows = [tuple(event_row(stored, ReplacementKey.of_event(stored.event), d)) for stored, _ in items]
    keys = await conn.insert_new_events(rows)
    await conn.copy_rows(
        "event_tags", TAG_COLUMNS, [r for stored, _ in items for r in tag_table_rows(stored, d)]
    )
    await conn.index_search_many(
        [
            (key, stored.event.content.replace("\0", " "))
            for key, (stored, _) in zip(keys, items, strict=True)
            if is_searchable(stored.event.kind)  # relay.md §11 item 1
        ]
    )
    effects = [e for _, eff in items for e in eff]
    await conn.copy_rows(
        "event_threads",
        ("event_id", "root_id", "parent_id", "depth"),
        [(e.event_id, e.root_id, e.parent_id, e.depth) for e in effects if isinstance(e, RecordThread)],
    )
    await conn.copy_rows(
        "reactions",
        ("author", "target_id", "content", "event_id"),
        [
            (e.author, e.target_id, d.encode(e.content, "utf8"), e.event_id)
            for e in effects
            if isinstance(e, PutReaction)
        ],
    )
