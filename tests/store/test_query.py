"""Stored reads: matching, order, limits, the #h rule, accept paging, count (relay.md §6, §7.7)."""

from __future__ import annotations

import pytest

from buzz.core.filters import Filter
from buzz.core.stored import StoredEvent
from buzz.store.base import EventStore, SoftDelete
from buzz.store.dialect import Conn
from buzz.store.postgres import PostgresStore
from buzz.store.sqlbase import SqlStore
from buzz.store.sqlite import SqliteStore
from tests.store.helpers import (
    ALICE,
    BOB,
    CAROL,
    T0,
    by_id,
    create_channel,
    flt,
    ids,
    insert_all,
    make,
    query_ids,
)


async def test_order_is_newest_first_then_lowest_id_with_limit(store: EventStore) -> None:
    """relay.md §6.4 item 2."""
    old = [make(1, f"old{i}", created_at=T0) for i in range(3)]
    new = [make(1, f"new{i}", created_at=T0 + 1) for i in range(2)]
    await insert_all(store, *old, *new)
    expected = ids(by_id(*new)) + ids(by_id(*old))[:2]
    assert await query_ids(store, flt(limit=4)) == expected


async def test_predicates_apply_before_limit(store: EventStore) -> None:
    """relay.md §6.5 item 3: every predicate narrows in SQL, so an old match is still found."""
    target = make(7, "needle", [["t", "rare"], ["p", CAROL.pubkey]], created_at=T0 + 5, who=BOB)
    noise = [make(1, f"n{i}", [["t", "common"]], created_at=T0 + 100 + i) for i in range(20)]
    await insert_all(store, target, *noise)
    for f in (
        flt(kinds=[7], limit=1),
        flt(authors=[BOB.pubkey], limit=1),
        flt(tag_t=["rare"], limit=1),
        flt(tag_p=[CAROL.pubkey], limit=1),
        flt(until=T0 + 99, limit=1),
        flt(since=T0 + 5, until=T0 + 5, limit=1),
        flt(ids=[target.event.id[:8]], limit=1),
    ):
        assert await query_ids(store, f) == [target.event.id], f
    assert await query_ids(store, flt(ids=[target.event.id])) == [target.event.id]


async def test_since_equals_until_is_inclusive(store: EventStore) -> None:
    """relay.md §6.4 item 1."""
    events = [make(1, str(t), created_at=T0 + t) for t in (99, 100, 101)]
    await insert_all(store, *events)
    assert await query_ids(store, flt(since=T0 + 100, until=T0 + 100)) == [events[1].event.id]


async def test_ids_prefix_match(store: EventStore) -> None:
    """relay.md §6.4 item 1, §18 item 33."""
    events = [make(1, str(i)) for i in range(6)]
    await insert_all(store, *events)
    first = events[0].event.id
    assert await query_ids(store, flt(ids=[first[:8]])) == [first]
    assert await query_ids(store, flt(ids=[first[:1]])) == [
        e for e in ids(by_id(*events)) if e[0] == first[0]
    ]
    missing = next(p for p in ("0" * 12, "f" * 12) if not any(e.startswith(p) for e in ids(events)))
    assert await query_ids(store, flt(ids=[missing])) == []


async def test_limit_zero_returns_nothing(store: EventStore) -> None:
    """relay.md §6.5 item 2."""
    await store.insert(make(1))
    assert await query_ids(store, flt(limit=0)) == []
    assert await store.count([flt(limit=0)], None) == 1  # COUNT ignores limit


@pytest.mark.parametrize(
    "fields",
    [
        {"kinds": []},
        {"authors": []},
        {"ids": []},
        {"tag_t": []},
        {"kinds": [1], "tag_h": []},
        {"search": "  "},
    ],
    ids=lambda f: ",".join(f),
)
async def test_present_empty_list_matches_nothing(store: EventStore, fields: dict[str, list[str]]) -> None:
    """relay.md §6.1 item 2 (and §11 item 2 for an empty search)."""
    await store.insert(make(1, "x", [["t", "x"], ["h", "y"]]))
    assert await query_ids(store, flt(**fields)) == []
    assert await store.count([flt(**fields)], None) == 0


async def test_tag_match_is_exact_on_the_second_element(store: EventStore) -> None:
    """relay.md §6.1 `#x` row, §18 item 34."""
    exact = make(1, "a", [["t", "nostr", "extra"]])
    other_case = make(1, "b", [["t", "Nostr"]])
    longer = make(1, "c", [["t", "nostrich"]])
    bare = make(1, "d", [["t"]])
    await insert_all(store, exact, other_case, longer, bare)
    assert await query_ids(store, flt(tag_t=["nostr"])) == [exact.event.id]
    assert await query_ids(store, flt(tag_T=["nostr"])) == []
    assert set(await query_ids(store, flt(tag_t=["nostr", "Nostr"]))) == {exact.event.id, other_case.event.id}


async def test_tags_and_across_keys_or_within(store: EventStore) -> None:
    """relay.md §6.1 item 1."""
    both = make(1, "both", [["t", "x"], ["p", BOB.pubkey]])
    only_t = make(1, "t", [["t", "x"]])
    only_p = make(1, "p", [["p", BOB.pubkey]])
    other_t = make(1, "y", [["t", "y"], ["p", BOB.pubkey]])
    await insert_all(store, both, only_t, only_p, other_t)
    assert await query_ids(store, flt(tag_t=["x"], tag_p=[BOB.pubkey])) == [both.event.id]
    got = set(await query_ids(store, flt(tag_t=["x", "y"], tag_p=[BOB.pubkey])))
    assert got == {both.event.id, other_t.event.id}


async def test_filters_in_order_and_deduplicated(store: EventStore) -> None:
    """relay.md §6.4 item 2: filter by filter; an event already returned is skipped."""
    note_old, note_new = make(1, "old", created_at=T0), make(1, "new", created_at=T0 + 2)
    reaction = make(7, "+", created_at=T0 + 1)
    await insert_all(store, note_old, note_new, reaction)
    got = await query_ids(store, flt(kinds=[7]), flt(kinds=[1, 7]))
    assert got == [reaction.event.id, note_new.event.id, note_old.event.id]


async def test_deleted_rows_never_returned(store: EventStore) -> None:
    """relay.md §10.4, §13.3 item 3."""
    gone, kept = make(1, "gone"), make(1, "kept")
    await insert_all(store, gone, kept)
    await store.insert(make(5, tags=[["e", gone.event.id]]), [SoftDelete(gone.event.id)])
    assert gone.event.id not in await query_ids(store, flt())
    assert await query_ids(store, flt(ids=[gone.event.id])) == []
    assert await store.count([flt(kinds=[1])], None) == 1


async def test_h_filter_matches_h_tags_only(store: EventStore) -> None:
    """`#h` is a NIP-01 tag filter (issue 25 item 5, docs/decisions.md 174): an event of a
    channel without an h tag (stored before reactions carried one) no longer reaches it."""
    c, d = await create_channel(store), await create_channel(store)
    message = make(9, "hi", [["h", c]], channel=c)
    reaction = make(7, "+", [["e", message.event.id]], channel=c)  # no h: not a match
    tagged = make(7, "*", [["e", message.event.id], ["h", c]], channel=c)
    explicit = make(7, "-", [["e", message.event.id], ["h", d]], channel=c)  # its h names d
    global_with_h = make(0, "profile", [["h", c]])  # global, but its h tag names c
    global_reaction = make(7, "+", [["e", "ab" * 32]], who=BOB)
    await insert_all(store, message, reaction, tagged, explicit, global_with_h, global_reaction)
    got = set(await query_ids(store, flt(tag_h=[c], kinds=[0, 7, 9]), reader=ALICE.pubkey))
    assert got == {message.event.id, tagged.event.id, global_with_h.event.id}
    assert await store.count([flt(tag_h=[c], kinds=[0, 7, 9])], ALICE.pubkey) == 3
    assert await query_ids(store, flt(tag_h=[d], kinds=[7]), reader=ALICE.pubkey) == [explicit.event.id]
    assert reaction.event.id in await query_ids(store, flt(kinds=[7]), reader=ALICE.pubkey)  # still stored


def _every_third(stored: StoredEvent) -> bool:
    return int(stored.event.content) % 3 == 0


async def test_accept_over_fetches_until_limit(store: EventStore) -> None:
    """relay.md §6.5 item 3: `limit` counts accepted events only."""
    events = [make(1, str(i), created_at=T0 + i) for i in range(30)]
    await insert_all(store, *events)
    got = await store.query([flt(limit=5)], None, _every_third)
    assert [s.event.content for s in got] == ["27", "24", "21", "18", "15"]
    everything = await store.query([flt(limit=50)], None, _every_third)
    assert len(everything) == 10
    assert await store.count([flt()], None, _every_third) == 10


async def test_accept_pages_through_equal_timestamps(store: EventStore) -> None:
    """Keyset paging over many equal `created_at` values loses and repeats nothing."""
    events = [make(1, str(i), created_at=T0 + i // 10) for i in range(150)]
    await insert_all(store, *events)
    expected = ids(sorted(events, key=lambda s: (-s.event.created_at, s.event.id)))
    seen: list[str] = []

    def record(stored: StoredEvent) -> bool:
        seen.append(stored.event.id)
        return stored.event.content == "0"

    got = await store.query([flt(limit=3)], None, record)
    assert ids(got) == [events[0].event.id]
    assert seen == expected


async def test_count_distinct_across_filters(store: EventStore) -> None:
    """relay.md §7.7 item 2."""
    a = make(1, "a", [["t", "x"]])
    b = make(1, "b", [["t", "y"]], who=BOB)
    c = make(7, "c")
    await insert_all(store, a, b, c)
    filters = [flt(kinds=[1], limit=1), flt(tag_t=["x", "y"]), flt(authors=[BOB.pubkey])]
    assert await store.count(filters, None) == 2
    assert await store.count(filters, None, lambda s: s.event.pubkey == BOB.pubkey) == 1
    assert await store.count([Filter()], None) == 3


async def _forget_in_channel_txn(conn: Conn) -> None:
    await conn.execute("UPDATE event_tags SET in_channel = NULL")


@pytest.mark.parametrize("rows", ["new", "older"])
async def test_h_filter_pages_in_order_across_channels_and_foreign_h_tags(store: SqlStore, rows: str) -> None:
    """relay.md §6.4 item 2, §6.5 item 3: an `#h` read over several channels, events with an
    h tag naming another channel than their own, global events with an h tag and events with no
    h tag (which never match: decision 174), paged by the accept predicate through equal
    timestamps, is exactly the sorted match.
    `older`: tag rows written before `event_tags.in_channel` existed (NULL, decision 101)."""
    c, d = await create_channel(store), await create_channel(store)
    hidden = await create_channel(store, "private")  # BOB is no member: out of scope
    events = []
    for i in range(40):
        at = T0 + i // 4  # four per second: ties on created_at
        match i % 8:
            case 0:
                events.append(make(9, str(i), [["h", c]], at, channel=c))
            case 1:
                events.append(make(7, str(i), [["e", "ab" * 32]], at, channel=c))  # no h: no match
            case 2:
                events.append(make(7, str(i), [["e", "ab" * 32], ["h", d]], at, channel=c))  # h names d
            case 3:
                events.append(make(1, str(i), [["h", c]], at))  # global with an h tag
            case 4:
                events.append(make(9, str(i), [["h", c], ["h", d]], at, channel=d))  # both
            case 5:
                events.append(make(7, str(i), [["h", c]], at, channel=hidden))  # h names c, not readable
            case 6:
                events.append(make(9, str(i), [["h", d]], at, channel=d))
            case _:
                events.append(make(9, str(i), [["h", hidden]], at, channel=hidden))
    await insert_all(store, *events)
    if rows == "older":
        await store._write(_forget_in_channel_txn)

    def matches(stored: StoredEvent, channels: set[str]) -> bool:
        h = {t[1] for t in stored.event.tags if t[0] == "h" and len(t) > 1}
        in_scope = stored.channel_id is None or stored.channel_id in (c, d)
        return in_scope and bool(h & channels)

    for channels in ({c}, {d}, {c, d}):
        expected = ids(
            sorted(
                (s for s in events if matches(s, channels)), key=lambda s: (-s.event.created_at, s.event.id)
            )
        )
        assert (
            await query_ids(store, flt(tag_h=sorted(channels), kinds=[1, 7, 9]), reader=BOB.pubkey)
            == expected
        )
        odd = await store.query(
            [flt(tag_h=sorted(channels), kinds=[1, 7, 9], limit=7)],
            BOB.pubkey,
            lambda s: int(s.event.content) % 2 == 1,
        )
        assert (
            ids(odd)
            == [
                i for i in expected if int(next(s for s in events if s.event.id == i).event.content) % 2 == 1
            ][:7]
        )
        assert await store.count([flt(tag_h=sorted(channels), kinds=[1, 7, 9])], BOB.pubkey) == len(expected)
        # Across filters, COUNT's `#h` form (decision 102) and the generic one count an id once.
        notes = {s.event.id for s in events if s.event.kind == 1}  # global: in BOB's scope
        both = [flt(tag_h=sorted(channels), kinds=[1, 7, 9]), flt(kinds=[1])]
        assert await store.count(both, BOB.pubkey) == len(set(expected) | notes)


async def _drop_in_channel_txn(conn: Conn) -> None:
    await conn.execute("DROP INDEX IF EXISTS event_tags_h_elsewhere")
    await conn.execute("ALTER TABLE event_tags DROP COLUMN in_channel")


async def test_a_store_made_before_in_channel_gets_the_column(store: SqlStore) -> None:
    """Opening a database whose event_tags lacks `in_channel` adds it (decision 101); its old
    rows (NULL) and new ones answer `#h` alike."""
    c, d = await create_channel(store), await create_channel(store)
    old = make(9, "old", [["h", c], ["h", d]], T0, channel=d)
    await insert_all(store, old)
    await store._write(_drop_in_channel_txn)
    await store.close()
    again = SqliteStore(store.path) if isinstance(store, SqliteStore) else PostgresStore(store.dsn)
    await again.open()
    try:
        new = make(9, "new", [["h", c], ["h", d]], T0 + 1, channel=d)
        await insert_all(again, new)
        assert await query_ids(again, flt(tag_h=[c], kinds=[9]), reader=ALICE.pubkey) == [
            new.event.id,
            old.event.id,
        ]
        assert await query_ids(again, flt(tag_h=[d], kinds=[9]), reader=ALICE.pubkey) == [
            new.event.id,
            old.event.id,
        ]
    finally:
        await again.close()
