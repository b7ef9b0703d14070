"""Writes queued at once (one loop pass, as the relay's ingest queues them) are committed
together — on PostgreSQL in one transaction (decision 260) — and answer exactly as the same
writes made one by one: outcomes (STORED / DUPLICATE / SUPERSEDED / DELETED), heads,
deletions and derived rows; a write that fails in the batch fails alone."""

from __future__ import annotations

import asyncio

import pytest

from buzz.store.base import ChannelExists, CreateChannel, PutReaction, ReactionExists
from buzz.store.postgres import PostgresStore
from buzz.store.sqlbase import SqlStore
from tests.store.helpers import ALICE, BOB, DELETED, STORED, SUPERSEDED, T0, make
from tests.store.test_insert_many import _answers, _channel, _workload, twin  # noqa: F401 - fixture


async def test_queued_writes_answer_as_one_by_one(store: SqlStore, twin: SqlStore) -> None:  # noqa: F811
    items = _workload()
    one_by_one = [await store.insert(s, e) for s, e in items]
    before = twin.group_commits if isinstance(twin, PostgresStore) else 0
    together = await asyncio.gather(*(twin.insert_soon(s, e) for s, e in items))
    assert together == one_by_one
    assert SUPERSEDED in together and DELETED in together
    assert await _answers(twin, items) == await _answers(store, items)
    if isinstance(twin, PostgresStore):  # every write of the pass in one transaction
        assert twin.group_commits - before == 1


async def test_a_failing_write_fails_alone(store: SqlStore) -> None:
    ch = "00000000-0000-4000-8000-000000000001"
    create = _channel(ch, ALICE, [["name", "a"]])
    target = make(9, "hi", [["h", ch]], T0 + 1, ALICE, ch)
    assert [await store.insert(s, e) for s, e in (create, (target, []))] == [STORED, STORED]
    first = make(7, "+", [["h", ch], ["e", target.event.id]], T0 + 2, BOB, ch)
    clash = make(7, "+", [["h", ch], ["e", target.event.id], ["x", "1"]], T0 + 3, BOB, ch)
    again = make(9007, tags=[["h", ch], ["name", "again"]], who=BOB, channel=ch)
    before = [make(1, f"before {i}", created_at=T0 + 10 + i) for i in range(5)]
    after = [make(1, f"after {i}", created_at=T0 + 20 + i) for i in range(5)]
    writes = [store.insert_soon(s) for s in before]
    writes.append(store.insert_soon(first, [PutReaction(first.event.id, BOB.pubkey, target.event.id, "+")]))
    writes.append(store.insert_soon(clash, [PutReaction(clash.event.id, BOB.pubkey, target.event.id, "+")]))
    writes.append(store.insert_soon(again, [CreateChannel(create[1][0].channel)]))
    writes += [store.insert_soon(s) for s in after]
    outcomes = await asyncio.gather(*writes, return_exceptions=True)
    assert outcomes[:6] == [STORED] * 6
    assert isinstance(outcomes[6], ReactionExists)
    assert isinstance(outcomes[7], ChannelExists)
    assert outcomes[8:] == [STORED] * 5
    assert await store.get(clash.event.id) is None and await store.get(again.event.id) is None
    for s in (*before, first, *after):
        assert await store.get(s.event.id) is not None


@pytest.mark.postgres
async def test_close_commits_what_is_queued(tmp_path: object) -> None:
    from tests.support.pg import temp_database

    items = [make(1, f"late {i}", created_at=T0 + i) for i in range(20)]
    async with temp_database() as dsn:
        pg = PostgresStore(dsn)
        await pg.open()
        writes = [pg.insert_soon(s) for s in items]
        await pg.close()
        assert [w.result() for w in writes] == [STORED] * 20
        again = PostgresStore(dsn)
        await again.open()
        try:
            assert all([await again.get(s.event.id) is not None for s in items])
        finally:
            await again.close()


async def test_point_reads_at_once_share_an_answer_and_never_miss_a_commit(store: SqlStore) -> None:
    """Decision 263: PostgreSQL answers point reads asked while the same read is on its way
    from that read, but never across a commit of this store: a read asked after an insert
    returned sees it, even when an earlier read of the same key is still on its way."""
    ch = "00000000-0000-4000-8000-000000000001"
    create = _channel(ch, ALICE, [["name", "a"]])
    assert await store.insert(*create) is STORED
    channels = await asyncio.gather(*(store.get_channel(ch) for _ in range(10)))
    assert all(c == channels[0] for c in channels) and channels[0] is not None
    later = make(9, "later", [["h", ch]], T0 + 5, ALICE, ch)
    for _ in range(5):
        early = asyncio.ensure_future(store.get(later.event.id))
        await asyncio.sleep(0)  # the early read is sent
        write = store.insert_soon(later)
        if await write is STORED:
            assert await store.get(later.event.id) is not None
        assert (await early) is None or (await early).event.id == later.event.id


async def test_a_cancelled_point_read_leaves_the_others_answered(store: SqlStore) -> None:
    target = make(1, "here")
    assert await store.insert(target) is STORED
    reads = [asyncio.ensure_future(store.get(target.event.id)) for _ in range(5)]
    await asyncio.sleep(0)
    reads[0].cancel()
    answers = await asyncio.gather(*reads[1:])
    assert [a.event.id for a in answers if a is not None] == [target.event.id] * 4
