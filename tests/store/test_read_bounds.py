"""What one read may cost the store (issue 24 items 9–12, docs/limits.md "Reads"), on SQLite
and PostgreSQL: searches stopped at their time budget, AUTH's lookups on a lane of their own,
COUNT's candidates read one by one at most COUNT_EXACT_BUDGET, one read's bytes, rows the
reader may not see never read (REQ and history)."""

from __future__ import annotations

import asyncio
import gc
import statistics
import threading
import time
import tracemalloc
from typing import Any

import pytest

from buzz.core.kinds import BUILTIN, ENGRAM_KIND
from buzz.core.limits import COUNT_EXACT_BUDGET, READ_MAX_BYTES
from buzz.core.stored import StoredEvent
from buzz.core.visibility import history_visible, visible_by_sets
from buzz.relay.delivery.reads import gates_of
from buzz.store.base import SYSTEM, CountTooBroad, ReadTimeout
from buzz.store.dialect import Conn
from buzz.store.postgres import PostgresStore
from buzz.store.reads import READ_MAX_REFUSED, row_bytes
from buzz.store.sqlbase import SqlStore
from tests.store.helpers import ALICE, BOB, CAROL, T0, Who, flt, ids, make
from tests.support.deadline import scaled

GATES = gates_of(BUILTIN)


def accept_for(reader: str):
    return lambda stored: visible_by_sets(stored.event, reader, BUILTIN)


async def test_a_search_past_its_time_budget_is_stopped(store: SqlStore) -> None:
    await store.insert_many([(make(content=f"common word {i}", created_at=T0 + i), ()) for i in range(2000)])
    # The yardstick: the same search within the default budget answers.
    assert len(await store.query([flt(search="common", limit=1000)], ALICE.pubkey)) == 1000
    store.read_timeout_s = 0.001
    with pytest.raises(ReadTimeout) as refused:
        await store.query([flt(search="common word", limit=1000)], ALICE.pubkey)
    assert str(refused.value) == "error: query took longer than 0.001 s; narrow it"
    store.read_timeout_s = 5.0
    # The connection that was stopped serves the next read.
    for _ in range(6):
        assert len(await store.query([flt(search="common", limit=5)], ALICE.pubkey)) == 5


class Hold:
    """Reads that hold their connection until released (a long search's stand-in): a SQLite
    reader thread blocks, a PostgreSQL read awaits."""

    def __init__(self) -> None:
        self.gate, self.loop_gate = threading.Event(), asyncio.Event()
        self.entered = threading.Semaphore(0)

    async def txn(self, conn: Conn) -> None:
        self.entered.release()
        if conn.dialect.name == "sqlite":
            self.gate.wait(30)
        else:
            await asyncio.wait_for(self.loop_gate.wait(), scaled(30))

    def release(self) -> None:
        self.gate.set()
        self.loop_gate.set()


async def test_auth_lookups_answer_while_every_read_connection_is_held(store: SqlStore) -> None:
    await store.ban(CAROL.pubkey)
    n = store._max_size if isinstance(store, PostgresStore) else store._reader_count
    hold = Hold()
    holds = [asyncio.ensure_future(store._read(hold.txn)) for _ in range(n)]
    try:
        for _ in range(n):
            assert await asyncio.to_thread(hold.entered.acquire, True, 30)
        # Before the admission lane these waited for a held connection (AUTH timed out).
        banned = await asyncio.wait_for(store.banned_among({ALICE.pubkey, CAROL.pubkey}), scaled(10))
        assert banned == frozenset({CAROL.pubkey})
        assert await asyncio.wait_for(store.get_setting("workspace"), scaled(10)) is None
        assert await asyncio.wait_for(store.is_relay_member(ALICE.pubkey), scaled(10)) is False
        assert not any(h.done() for h in holds)
    finally:
        hold.release()
        await asyncio.gather(*holds)


async def _wraps(store: SqlStore, n: int, to: Who) -> None:
    """`n` gift wraps (p-gated) addressed to `to`."""
    await store.insert_many(
        [(make(1059, f"w{i}", [["p", to.pubkey]], created_at=T0 + i, who=ALICE), ()) for i in range(n)]
    )


async def test_count_reads_at_most_the_budget_of_gated_candidates(store: SqlStore) -> None:
    n = COUNT_EXACT_BUDGET + 1
    await store.insert_many(
        [(make(30300, "x", [["d", f"a{i}"]], created_at=T0 + i, who=BOB), ()) for i in range(n)]
    )
    await store.insert_many([(make(1, f"n{i}", created_at=T0 + i), ()) for i in range(3)])
    # BOB may see each of his author-only rows: counting them one by one reads one past the budget.
    with pytest.raises(CountTooBroad) as refused:
        await store.count([flt(kinds=[1, 30300])], BOB.pubkey, accept_for(BOB.pubkey), GATES)
    assert str(refused.value) == "restricted: count filter requires narrower constraints"
    # Without gates every row is a candidate: refused too (before the budget: 5,004 rows parsed).
    with pytest.raises(CountTooBroad):
        await store.count([flt(kinds=[1, 30300])], CAROL.pubkey, accept_for(CAROL.pubkey))
    # A filter that passes the gate itself (authors=[self]) is counted in SQL, exactly.
    mine = flt(kinds=[30300], authors=[BOB.pubkey])
    assert await store.count([mine], BOB.pubkey, accept_for(BOB.pubkey), GATES) == n
    # CAROL's gated candidates are none (the SQL gate), the notes are counted in SQL: exact.
    assert await store.count([flt(kinds=[1, 1059])], CAROL.pubkey, accept_for(CAROL.pubkey), GATES) == 3
    assert await store.count([flt()], CAROL.pubkey, accept_for(CAROL.pubkey), GATES) == 3
    assert (
        await store.count(
            [flt(kinds=[1]), flt(authors=[ALICE.pubkey])], CAROL.pubkey, accept_for(CAROL.pubkey), GATES
        )
        == 3
    )


async def test_counts_with_gates_equal_the_per_event_count(store: SqlStore) -> None:
    shared = make(30175, "p", [["d", "a"], ["shared", "true"]], who=ALICE)
    odd = make(30175, "p", [["d", "b"], ["shared", "true", "x"]], who=ALICE)  # inexact: not shared
    private = make(30175, "p", [["d", "c"]], who=ALICE)
    own = make(30300, "x", [["d", "z"]], who=BOB)
    engram = make(ENGRAM_KIND, "m", [["d", "m"], ["p", BOB.pubkey]], who=ALICE)
    wrap = make(1059, "w", [["p", BOB.pubkey]], who=CAROL)
    notes = [make(1, f"n{i}", created_at=T0 + i) for i in range(4)]
    stored = (shared, odd, private, own, engram, wrap, *notes)
    await store.insert_many([(s, ()) for s in stored])
    everything = [flt()]
    for reader in (ALICE, BOB, CAROL):
        accept = accept_for(reader.pubkey)
        slow = await store.count(everything, reader.pubkey, accept)
        assert await store.count(everything, reader.pubkey, accept, GATES) == slow
        by_gates = await store.query(everything, reader.pubkey, accept, GATES)
        assert sorted(ids(by_gates)) == sorted(ids(await store.query(everything, reader.pubkey, accept)))
        assert slow == sum(visible_by_sets(s.event, reader.pubkey, BUILTIN) for s in stored)


async def test_one_read_holds_at_most_its_byte_budget(store: SqlStore) -> None:
    big = [make(1, "b" * 200_000, created_at=T0 + i) for i in range(30)]  # 6 MB in all
    await store.insert_many([(s, ()) for s in big])
    got = await store.query([flt(kinds=[1], limit=100)], ALICE.pubkey)
    held = sum(len(s.event.content) + len(s.event.to_json()) - len(s.event.content) for s in got)
    assert 0 < len(got) < len(big)
    assert ids(got) == ids(sorted(big, key=lambda s: -s.event.created_at))[: len(got)]
    assert sum(len(s.event.content) for s in got) <= READ_MAX_BYTES < held + 200_000
    # Over several filters the budget is the read's, not each filter's.
    two = await store.query([flt(kinds=[1], limit=15), flt(authors=[ALICE.pubkey], limit=100)], ALICE.pubkey)
    assert len(two) == len(got)
    # The relay's own reads (SYSTEM) get every row they ask for.
    assert len(await store.query([flt(kinds=[1], limit=100)], SYSTEM)) == len(big)
    # A single event larger than the budget is still served, alone.
    huge = make(1, "h" * 100, [["t", "x" * 100]] * 50_000, created_at=T0 + 100)
    await store.insert(huge)
    assert ids(await store.query([flt(kinds=[1], limit=100)], ALICE.pubkey)) == [huge.event.id]


def test_row_bytes_counts_tags_and_content() -> None:
    assert row_bytes(("id", "pk", 0, 1, '[["t","x"]]', "hello", "sig", 0, None)) == 11 + 5


def _median_s(times: list[float]) -> float:
    return statistics.median(times)


async def _timed(coro_fn, runs: int = 5) -> float:
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        await coro_fn()
        times.append(time.perf_counter() - started)
    return _median_s(times)


async def test_rows_the_reader_may_not_see_are_not_read(store: SqlStore) -> None:
    hidden = 4000
    # ALICE's author-only rows (30300, one address each), newer than 20 notes everyone sees.
    await store.insert_many(
        [(make(30300, "x", [["d", f"a{i}"]], created_at=T0 + 100 + i, who=ALICE), ()) for i in range(hidden)]
    )
    notes = [make(1, f"n{i}", created_at=T0 + i, who=CAROL) for i in range(20)]
    await store.insert_many([(s, ()) for s in notes])
    mixed = [flt(kinds=[1, 30300], limit=20)]

    async def bob() -> list[StoredEvent]:
        return await store.query(mixed, BOB.pubkey, accept_for(BOB.pubkey), GATES)

    async def alice() -> list[StoredEvent]:  # the yardstick: 20 rows read, 20 served
        return await store.query(mixed, ALICE.pubkey, accept_for(ALICE.pubkey), GATES)

    assert sorted(ids(await bob())) == sorted(ids(notes))
    assert len(await alice()) == 20
    ratio = await _timed(bob) / await _timed(alice)
    # Before the SQL gates BOB's REQ parsed all 4,000 hidden rows: 40–80x the yardstick.
    assert ratio < 10, f"a REQ over hidden rows cost {ratio:.1f}x one over visible rows"


def _peak_bytes_during(coro) -> Any:
    async def run() -> tuple[Any, int]:
        gc.collect()
        tracemalloc.reset_peak()
        start = tracemalloc.get_traced_memory()[0]
        result = await coro
        return result, tracemalloc.get_traced_memory()[1] - start

    return run()


async def test_history_for_a_refused_reader_reads_no_version(store: SqlStore) -> None:
    versions = [
        make(ENGRAM_KIND, "v" * 50_000, [["d", "mem"], ["p", BOB.pubkey]], created_at=T0 + i, who=ALICE)
        for i in range(60)
    ]
    for v in versions:
        await store.insert(v)

    def history(reader: str, limit: int):
        def accept(stored: StoredEvent) -> bool:
            return history_visible(stored.event, reader)

        return store.history(
            ENGRAM_KIND,
            ALICE.pubkey,
            "mem",
            limit=limit,
            max_bytes=1 << 30,
            accept=accept,
            readable_by=reader,
        )

    tracemalloc.start()
    try:
        first, yardstick = await _peak_bytes_during(history(BOB.pubkey, 1))  # one version of 50 KB
        refused, peak = await _peak_bytes_during(history(CAROL.pubkey, 100))
    finally:
        tracemalloc.stop()
    assert ids(first.events) == [versions[-1].event.id]
    assert refused.events == [] and refused.next is None
    # Before the gate in SQL the refused reader parsed all 60 versions (3 MB) to answer nothing.
    assert peak < yardstick, f"a refused history read peaked at {peak} bytes, one version at {yardstick}"
    assert len((await history(BOB.pubkey, 100)).events) == 60


async def test_a_page_of_refused_rows_is_read_a_few_rows_at_a_time(store: SqlStore) -> None:
    # 40 unshared personas of 200 KB (8 MB): BOB may read none, so each is fetched and refused.
    rows = [make(30175, "p" * 200_000, [["d", f"p{i}"]], created_at=T0 + i, who=ALICE) for i in range(40)]
    await store.insert_many([(s, ()) for s in rows])
    tracemalloc.start()
    try:
        got, peak = await _peak_bytes_during(
            store.query([flt(kinds=[30175], limit=100)], BOB.pubkey, accept_for(BOB.pubkey), GATES)
        )
    finally:
        tracemalloc.stop()
    assert got == []
    # Before, the whole page of 40 rows (8 MB) was fetched at once; now a page stops at
    # READ_MAX_BYTES and the next starts after its last row.
    assert peak < READ_MAX_BYTES + 4 * 200_000 + (1 << 20), f"peak {peak} bytes"


async def test_a_filter_ends_after_its_budget_of_refused_candidates(store: SqlStore) -> None:
    # Unshared personas (shared-gated: the `shared` tag is not indexed, so SQL cannot gate
    # them) newer than three notes: BOB's REQ refuses them one by one, at most READ_MAX_REFUSED.
    await store.insert_many(
        [
            (make(30175, "p", [["d", f"p{i}"]], created_at=T0 + 10 + i, who=ALICE), ())
            for i in range(READ_MAX_REFUSED + 1)
        ]
    )
    notes = [make(1, f"n{i}", created_at=T0 + i, who=CAROL) for i in range(3)]
    await store.insert_many([(s, ()) for s in notes])
    mixed = [flt(kinds=[1, 30175], limit=10)]
    # Before the cap BOB's REQ read all 5,004 rows to find the notes; now it ends unanswered.
    assert await store.query(mixed, BOB.pubkey, accept_for(BOB.pubkey), GATES) == []
    # A filter past the cap does not end the read: the next filter is answered.
    got = await store.query([*mixed, flt(kinds=[1], limit=10)], BOB.pubkey, accept_for(BOB.pubkey), GATES)
    assert sorted(ids(got)) == sorted(ids(notes))
    # The author sees hers at once.
    assert len(await store.query(mixed, ALICE.pubkey, accept_for(ALICE.pubkey), GATES)) == 10
