"""`insert_many` (decision 101): the answers and rows of one `insert` per item, in one transaction.

Each test builds a second store of the same backend, writes the same items into both — one
`insert` each into the first, `insert_many` into the second — and compares outcomes, the
queries the relay makes (including search, threads, reactions, history) and the derived rows.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from buzz.core.event import Event
from buzz.core.filters import Filter
from buzz.core.stored import StoredEvent
from buzz.store.base import (
    SYSTEM,
    Channel,
    CreateChannel,
    DeleteAddress,
    Effect,
    InsertOutcome,
    PutMember,
    PutReaction,
    ReactionExists,
    RecordThread,
    RegisterDm,
    SetDmHidden,
    SoftDelete,
)
from buzz.store.dialect import Conn
from buzz.store.sqlbase import SqlStore
from buzz.store.sqlite import SqliteStore
from tests.store.conftest import opened_store
from tests.store.helpers import ALICE, BOB, CAROL, DUPLICATE, STORED, T0, Who, flt, make

Item = tuple[StoredEvent, Sequence[Effect]]


@pytest.fixture
async def twin(store: SqlStore, tmp_path: Path) -> AsyncIterator[SqlStore]:
    """A second empty store on the same backend as `store`."""
    backend = "sqlite" if isinstance(store, SqliteStore) else "postgres"
    async with opened_store(backend, tmp_path / "twin.sqlite3") as other:
        yield other


def _channel(channel_id: str, who: Who, kind_tags: list[list[str]]) -> Item:
    create = make(9007, tags=[["h", channel_id], *kind_tags], who=who, channel=channel_id)
    channel = Channel(channel_id, "general", "open", who.pubkey, T0)
    return create, [CreateChannel(channel), PutMember(channel_id, who.pubkey, "owner")]


def _workload() -> list[Item]:
    """Channels, messages, replies, reactions, a DM, profiles and records with superseded and
    losing versions, duplicates, deletions by id and by address: what the relay writes."""
    ch, other, dm = (f"00000000-0000-4000-8000-00000000000{i}" for i in (1, 2, 3))
    items: list[Item] = [_channel(ch, ALICE, [["name", "a"]]), _channel(other, BOB, [["name", "b"]])]
    messages = []
    for i in range(40):
        who = (ALICE, BOB, CAROL)[i % 3]
        words = "apple pie" if i % 7 == 0 else f"note {i}"
        tags = [["h", ch if i % 2 else other]]
        if i % 10 == 3:
            tags.append(["h", other])  # an h tag naming another channel too
        m = make(9, words, tags, created_at=T0 + i, who=who, channel=ch if i % 2 else other)
        messages.append(m)
        items.append((m, []))
    root = messages[1]
    for i in range(5):
        reply = make(9, f"reply {i}", [["h", ch], ["e", root.event.id, "", "root"]], T0 + 50 + i, BOB, ch)
        items.append((reply, [RecordThread(reply.event.id, root.event.id, root.event.id, 1)]))
    reactions = []
    for i, who in enumerate((ALICE, BOB, CAROL)):
        r = make(7, "+", [["h", ch], ["e", messages[3].event.id]], T0 + 60 + i, who, ch)
        reactions.append(r)
        items.append((r, [PutReaction(r.event.id, who.pubkey, messages[3].event.id, "+")]))
    items.append((messages[5], []))  # a duplicate id inside the batch
    items.append(
        (
            make(41010, "", [["p", BOB.pubkey]], T0 + 70, ALICE, dm),
            [
                CreateChannel(Channel(dm, "", "private", ALICE.pubkey, T0 + 70, "dm")),
                PutMember(dm, ALICE.pubkey, "member"),
                PutMember(dm, BOB.pubkey, "member", invited_by=ALICE.pubkey),
                RegisterDm(dm, frozenset({ALICE.pubkey, BOB.pubkey})),
                SetDmHidden(dm, ALICE.pubkey, hidden=False),
            ],
        )
    )
    items += [(make(9, f"dm {i}", [["h", dm]], T0 + 71 + i, (ALICE, BOB)[i % 2], dm), []) for i in range(4)]
    # Replaceable: one version each, two versions for Alice (the newer wins), then an older loser.
    items += [(make(0, f'{{"name":"{w.pubkey[:4]}"}}', [], T0 + 80, w), []) for w in (ALICE, BOB, CAROL)]
    items.append((make(0, '{"name":"newer"}', [], T0 + 81, ALICE), []))
    items.append((make(0, '{"name":"older"}', [], T0 + 79, BOB), []))
    # Addressable: distinct d values, two versions of one d in the batch, one deleted by address.
    for i in range(6):
        items.append((make(30078, f"record {i}", [["d", f"r{i}"]], T0 + 90 + i, CAROL), []))
    items.append((make(30078, "record 2 v2", [["d", "r2"]], T0 + 100, CAROL), []))
    gone = make(5, "", [["a", f"30078:{CAROL.pubkey}:r4"]], T0 + 101, CAROL)
    items.append((gone, [DeleteAddress(30078, CAROL.pubkey, "r4", T0 + 101)]))
    items.append((make(30078, "record 4 late", [["d", "r4"]], T0 + 99, CAROL), []))  # loses: deleted
    # Deletion by id of a message, then of a reaction (which leaves the reaction index).
    for target in (messages[6], reactions[0]):
        deletion = make(5, "", [["e", target.event.id]], T0 + 110, ALICE)
        items.append((deletion, [SoftDelete(target.event.id)]))
    items.append((make(30078, "after", [["d", "r9"]], T0 + 120, ALICE), []))
    items += [(make(1, f"apple {i}", [["t", "fruit"]], T0 + 130 + i, BOB), []) for i in range(3)]
    return items


FILTERS: list[dict[str, Any]] = [
    {},
    {"kinds": [9], "limit": 500},
    {"kinds": [0]},
    {"kinds": [30078]},
    {"kinds": [5, 7, 1]},
    {"authors": [CAROL.pubkey], "kinds": [30078, 9]},
    {"#e": ["placeholder"]},
    {"search": "apple"},
    {"search": "pie", "kinds": [9]},
    {"#t": ["fruit"]},
]


async def _answers(store: SqlStore, items: list[Item]) -> dict[str, Any]:
    ch, other, dm = (f"00000000-0000-4000-8000-00000000000{i}" for i in (1, 2, 3))
    root = items[3][0].event.id
    out: dict[str, Any] = {}
    filters = [*FILTERS, {"#h": [ch], "kinds": [9]}, {"#h": [other]}, {"#h": [dm]}, {"#e": [root]}]
    for obj in filters:
        f = Filter.parse(obj)
        for reader in (SYSTEM, None, ALICE.pubkey, CAROL.pubkey):
            key = f"{obj} {reader}"
            out[key] = [s.event.id for s in await store.query([f], reader)]
            out["count " + key] = await store.count([f], reader)
    for stored, effects in items:
        event_id = stored.event.id
        out["get " + event_id] = await store.get(event_id) is not None
        out["get all " + event_id] = await store.get(event_id, include_deleted=True) is not None
        out["thread " + event_id] = await store.get_thread(event_id)
        for effect in effects:
            if isinstance(effect, PutReaction):
                out["reaction " + event_id] = await store.has_reaction(effect.author, effect.target_id, "+")
    for d in ("r0", "r2", "r4", "r9"):
        h = await store.history(30078, CAROL.pubkey, d, limit=10, max_bytes=1 << 20)
        out["history " + d] = [s.event.id for s in h.events]
        out["latest " + d] = await store.latest_created_at(30078, CAROL.pubkey, d)
    out["dm"] = await store.find_dm(frozenset({ALICE.pubkey, BOB.pubkey}))
    out["dm hidden"] = await store.is_dm_hidden(dm, ALICE.pubkey)
    out["members"] = [(m.pubkey, m.role) for m in await store.active_members(dm)]
    out["channels"] = [(c.id, len(ms)) for c, ms in await store.live_channels()]
    out["rows"] = await store._read(_rows_txn)
    return out


async def _rows_txn(conn: Conn) -> dict[str, list[Any]]:
    """The derived rows, keyed by event ids (SQLite's `seq` and the clock are left out)."""
    d = conn.dialect
    queries = {
        "events": "SELECT id, channel_id, d_tag, deleted_at IS NULL FROM events ORDER BY id",
        "tags": "SELECT event_id, name, value FROM event_tags ORDER BY event_id, name, value",
        "threads": "SELECT event_id, root_id, parent_id, depth FROM event_threads ORDER BY event_id",
        "reactions": "SELECT author, target_id, content, event_id FROM reactions ORDER BY event_id",
        "deleted_addresses": "SELECT kind, pubkey, d, deleted_until FROM deleted_addresses ORDER BY d",
    }
    out = {}
    for name, sql in queries.items():
        out[name] = [
            tuple(d.decode_utf8(v) if isinstance(v, bytes | memoryview) else v for v in row)
            for row in await conn.fetch(sql)
        ]
    return out


async def test_same_answers_as_one_insert_per_item(store: SqlStore, twin: SqlStore) -> None:
    items = _workload()
    one_by_one = [await store.insert(s, e) for s, e in items]
    # Two batches: the second one's checks read what the first one wrote.
    cut = len(items) // 2
    bulk = await twin.insert_many(items[:cut]) + await twin.insert_many(items[cut:])
    assert bulk == one_by_one
    assert DUPLICATE in bulk and STORED in bulk
    assert await _answers(twin, items) == await _answers(store, items)


async def test_items_already_stored_are_duplicates(store: SqlStore, twin: SqlStore) -> None:
    items = _workload()
    for target in (store, twin):
        for s, e in items[:20]:
            await target.insert(s, e)
    assert await twin.insert_many(items) == [await store.insert(s, e) for s, e in items]
    assert await _answers(twin, items) == await _answers(store, items)


async def test_a_clashing_reaction_rolls_back_the_whole_batch(store: SqlStore) -> None:
    ch = "00000000-0000-4000-8000-000000000001"
    create = _channel(ch, ALICE, [["name", "a"]])
    target = make(9, "hi", [["h", ch]], T0 + 1, ALICE, ch)
    assert await store.insert_many([create, (target, [])]) == [STORED, STORED]
    first = make(7, "+", [["h", ch], ["e", target.event.id]], T0 + 2, BOB, ch)
    assert (
        await store.insert(first, [PutReaction(first.event.id, BOB.pubkey, target.event.id, "+")]) is STORED
    )
    again = make(7, "+", [["h", ch], ["e", target.event.id], ["x", "1"]], T0 + 3, BOB, ch)
    other = make(9, "kept?", [["h", ch]], T0 + 4, ALICE, ch)
    with pytest.raises(ReactionExists):
        await store.insert_many(
            [(other, []), (again, [PutReaction(again.event.id, BOB.pubkey, target.event.id, "+")])]
        )
    assert await store.get(other.event.id) is None
    # Two reactions with one (author, target, content) in one batch clash in the same way.
    twice = [
        make(7, "-", [["h", ch], ["e", target.event.id], ["n", str(i)]], T0 + 5 + i, CAROL, ch)
        for i in (0, 1)
    ]
    with pytest.raises(ReactionExists):
        await store.insert_many(
            [(r, [PutReaction(r.event.id, CAROL.pubkey, target.event.id, "-")]) for r in twice]
        )
    assert [await store.get(r.event.id) for r in twice] == [None, None]


async def test_refusals_before_any_write(store: SqlStore) -> None:
    fine = make(1, "fine")
    unverified = StoredEvent(Event.create(ALICE.secret, 1, "unverified"))
    with pytest.raises(Exception, match="not verified"):
        await store.insert_many([(fine, []), (unverified, [])])
    with pytest.raises(ValueError, match="ephemeral"):
        await store.insert_many([(fine, []), (make(20001, "typing"), [])])
    assert await store.get(fine.event.id) is None
    assert await store.insert_many([]) == []
    assert await store.query([flt()], SYSTEM) == []
    assert InsertOutcome.STORED is STORED
