"""`EventStore.history`: the kept versions of one address, superseded ones included, deleted
ones never (issue 16 item 3, docs/decisions.md 81). Every test runs on SQLite and PostgreSQL."""

from __future__ import annotations

import pytest

from buzz.core.stored import StoredEvent
from buzz.store.base import DeleteAddress, EventStore, SoftDelete
from tests.store.helpers import (
    BOB,
    DELETED,
    STORED,
    SUPERSEDED,
    T0,
    by_id,
    flt,
    ids,
    insert_all,
    make,
    query_ids,
)

KIND = 30174
D = "ab" * 32


def version(n: int, d: str = D, **kw: object) -> StoredEvent:
    return make(KIND, f"version {n}", [["d", d], ["p", BOB.pubkey]], created_at=T0 + n, **kw)  # type: ignore[arg-type]


async def history_ids(store: EventStore, d: str = D, **kw: object) -> list[str]:
    pubkey = version(0).event.pubkey
    kw.setdefault("limit", 100)
    kw.setdefault("max_bytes", 1 << 20)
    return ids((await store.history(KIND, pubkey, d, **kw)).events)  # type: ignore[arg-type]


async def test_superseded_versions_are_kept_and_served_here_only(store: EventStore) -> None:
    v1, v2, v3 = version(1), version(2), version(3)
    assert await insert_all(store, v1, v2, v3) == [STORED] * 3
    # the ordinary read paths serve the head only ...
    assert await query_ids(store, flt(kinds=[KIND]), reader=None) == ids([v3])
    assert await store.count([flt(kinds=[KIND])], None) == 1
    assert await store.get(v1.event.id) is None
    # ... the rows are kept (soft-deleted), and the history serves them, newest first
    kept = await store.get(v1.event.id, include_deleted=True)
    assert kept is not None and kept.event == v1.event
    assert await history_ids(store) == ids([v3, v2, v1])
    history = await store.history(KIND, v1.event.pubkey, D, limit=10, max_bytes=1 << 20)
    assert [s.event for s in history.events] == [v3.event, v2.event, v1.event]
    assert history.next is None


async def test_only_the_one_address(store: EventStore) -> None:
    mine = [version(1), version(2)]
    other_d = version(3, d="cd" * 32)
    other_author = version(4, who=BOB)
    other_kind = make(30175, "x", [["d", D]], created_at=T0 + 5)
    await insert_all(store, *mine, other_d, other_author, other_kind)
    assert await history_ids(store) == ids(reversed(mine))
    assert await history_ids(store, d="ef" * 32) == []
    # regular and replaceable kinds have no address
    note = make(1, "n", [["d", D]])
    await insert_all(store, note)
    assert (await store.history(1, note.event.pubkey, D, limit=5, max_bytes=1 << 20)).events == []


async def test_tie_order_and_losing_versions(store: EventStore) -> None:
    low, high = by_id(
        make(KIND, "a", [["d", D]], created_at=T0 + 1), make(KIND, "b", [["d", D]], created_at=T0 + 1)
    )
    older = version(0)
    assert await insert_all(store, older, high, low) == [STORED, STORED, STORED]
    # a version that loses on arrival is never stored, so it has no history either
    assert await insert_all(store, make(KIND, "late", [["d", D]], created_at=T0)) == [SUPERSEDED]
    assert await history_ids(store) == ids([low, high, older])


async def test_address_deletion_hides_every_covered_version(store: EventStore) -> None:
    v1, v2, v3 = version(1), version(2), version(3)
    await insert_all(store, v1, v2, v3)
    deletion = make(5, "", [["a", f"{KIND}:{v1.event.pubkey}:{D}"]], created_at=T0 + 3)
    effect = DeleteAddress(KIND, v1.event.pubkey, D, T0 + 3)
    assert await store.insert(deletion, [effect]) == STORED
    assert await history_ids(store) == []
    assert await insert_all(store, version(2)) == [DELETED]  # still not revived
    v4 = version(4)
    assert await insert_all(store, v4) == [STORED]
    assert await history_ids(store) == ids([v4])
    # deleting the deletion restores nothing (relay.md §10.1 item 5)
    undo = make(5, "", [["e", deletion.event.id]], created_at=T0 + 5)
    await store.insert(undo, [SoftDelete(deletion.event.id)])
    assert await history_ids(store) == ids([v4])


async def test_e_deletion_hides_that_version_even_when_superseded(store: EventStore) -> None:
    v1, v2, v3 = version(1), version(2), version(3)
    await insert_all(store, v1, v2, v3)
    deletion = make(5, "", [["e", v2.event.id]], created_at=T0 + 4)
    await store.insert(deletion, [SoftDelete(v2.event.id)])
    assert await history_ids(store) == ids([v3, v1])
    undo = make(5, "", [["e", deletion.event.id]], created_at=T0 + 5)
    await store.insert(undo, [SoftDelete(deletion.event.id)])
    assert await history_ids(store) == ids([v3, v1])
    # deleting the head leaves no head, and it does not come back here either
    head_deletion = make(5, "", [["e", v3.event.id]], created_at=T0 + 6)
    await store.insert(head_deletion, [SoftDelete(v3.event.id)])
    assert await query_ids(store, flt(kinds=[KIND]), reader=None) == []
    assert await history_ids(store) == ids([v1])


async def test_limit_cursor_and_accept(store: EventStore) -> None:
    versions = [version(n) for n in range(1, 8)]
    await insert_all(store, *versions)
    newest_first = ids(reversed(versions))
    pubkey = versions[0].event.pubkey
    page = await store.history(KIND, pubkey, D, limit=3, max_bytes=1 << 20)
    assert ids(page.events) == newest_first[:3]
    last = page.events[-1].event
    assert page.next == (last.created_at, last.id)
    rest = await store.history(KIND, pubkey, D, limit=3, max_bytes=1 << 20, before=page.next)
    assert ids(rest.events) == newest_first[3:6]
    end = await store.history(KIND, pubkey, D, limit=3, max_bytes=1 << 20, before=rest.next)
    assert (ids(end.events), end.next) == (newest_first[6:], None)
    # exactly `limit` left: no next page
    exact = await store.history(KIND, pubkey, D, limit=1, max_bytes=1 << 20, before=rest.next)
    assert (ids(exact.events), exact.next) == (newest_first[6:], None)

    # `accept` runs before the limit counts: rejected versions never shrink a page
    odd = {s.event.id for s in versions[::2]}
    accepted = await store.history(
        KIND, pubkey, D, limit=2, max_bytes=1 << 20, accept=lambda s: s.event.id in odd
    )
    assert ids(accepted.events) == [i for i in newest_first if i in odd][:2]
    assert accepted.next is not None
    nothing = await store.history(KIND, pubkey, D, limit=5, max_bytes=1 << 20, accept=lambda s: False)
    assert (nothing.events, nothing.next) == ([], None)


async def test_byte_budget(store: EventStore) -> None:
    versions = [version(n) for n in range(1, 5)]
    await insert_all(store, *versions)
    pubkey = versions[0].event.pubkey
    size = len(versions[0].event.to_json().encode())
    assert all(len(v.event.to_json().encode()) == size for v in versions)
    page = await store.history(KIND, pubkey, D, limit=10, max_bytes=2 * size + size // 2)
    assert ids(page.events) == ids(reversed(versions))[:2]
    assert page.next is not None
    # a single version larger than the budget is served alone, so paging moves on
    tiny = await store.history(KIND, pubkey, D, limit=10, max_bytes=1)
    assert ids(tiny.events) == ids(versions[-1:])
    again = await store.history(KIND, pubkey, D, limit=10, max_bytes=1, before=tiny.next)
    assert ids(again.events) == ids(versions[-2:-1])


async def test_bad_bounds(store: EventStore) -> None:
    with pytest.raises(ValueError):
        await store.history(KIND, BOB.pubkey, D, limit=0, max_bytes=1)
    with pytest.raises(ValueError):
        await store.history(KIND, BOB.pubkey, D, limit=1, max_bytes=0)
