"""The workflow tables (workflows.md §11.1) on both backends: rows, one-transaction writes,
claims, leases, approval compare-and-set, keyset paging; on PostgreSQL two stores (two
replicas) racing for the same runs and instants."""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path

import pytest

from buzz.core.event import Event
from buzz.core.filters import Filter
from buzz.core.keys import generate_secret_key
from buzz.core.stored import relay_signed
from buzz.store.base import SYSTEM
from buzz.store.postgres import PostgresStore
from buzz.store.sqlbase import SqlStore
from buzz.store.workflow_rows import (
    ApprovalRaced,
    ApprovalRow,
    ApprovalSwap,
    Claim,
    LeaseLost,
    RunRow,
    StepRow,
    WorkflowRow,
    WorkflowWrite,
)
from tests.support.pg import temp_database

T0 = 1_700_000_000
CHANNEL = "6f1c3d4e-0a1b-4c2d-8e3f-5a6b7c8d9e0f"
WF = "0d9e8f7a-6b5c-4d3e-8f2a-1b0c9d8e7f6a"


def workflow(wid: str = WF, trigger: str = "schedule", channel: str = CHANNEL) -> WorkflowRow:
    return WorkflowRow(wid, channel, "1" * 64, "Test", "c" * 64, "{}", "d" * 64, trigger, False, True, "active",
                       T0, T0, T0)  # fmt: skip


def run(rid: str, status: str = "pending", created: int = T0, wake_at: int | None = None) -> RunRow:
    return RunRow(rid, WF, status, created, 0, 1, '{"x":1}', wake_at)


def rid(n: int) -> str:
    return f"00000000-0000-4000-8000-{n:012d}"


async def test_workflow_rows_round_trip_and_list(store: SqlStore) -> None:
    other = "1d9e8f7a-6b5c-4d3e-8f2a-1b0c9d8e7f6a"
    assert await store.workflow_write(WorkflowWrite(workflow=workflow()), T0)
    assert await store.workflow_write(WorkflowWrite(workflow=workflow(other, "webhook")), T0)
    got = await store.workflow(WF)
    assert got == workflow()
    assert [w.id for w in await store.workflows(channel_id=CHANNEL)] == [WF, other]
    assert [w.id for w in await store.workflows(trigger_on="webhook")] == [other]
    assert [w.id for w in await store.workflows(after_id=WF, limit=5)] == [other]
    deleted = dataclasses.replace(workflow(), status="deleted")
    await store.workflow_write(WorkflowWrite(workflow=deleted), T0)
    assert [w.id for w in await store.workflows(channel_id=CHANNEL)] == [other]


async def test_a_write_stores_runs_steps_and_events_together(store: SqlStore) -> None:
    key = generate_secret_key()
    event = Event.create(key, 46001, "{}", [["h", CHANNEL]], T0)
    write = WorkflowWrite(runs=(run(rid(1)),), steps=(StepRow(rid(1), 0, '{"s":1}'),),
                          events=(relay_signed(event, None),))  # fmt: skip
    assert await store.workflow_write(write, T0)
    got = await store.workflow_run(rid(1))
    assert got is not None and got[0] == run(rid(1)) and got[1] == [StepRow(rid(1), 0, '{"s":1}')]
    stored = await store.query([Filter(kinds=frozenset({46001}))], SYSTEM)
    assert [s.event.id for s in stored] == [event.id]


async def test_a_claim_is_taken_once_and_a_lost_claim_writes_nothing(store: SqlStore) -> None:
    first = WorkflowWrite(runs=(run(rid(1)),), claim=Claim("schedule", WF, str(T0), rid(1)))
    second = WorkflowWrite(runs=(run(rid(2)),), claim=Claim("schedule", WF, str(T0), rid(2)))
    assert await store.workflow_write(first, T0)
    assert not await store.workflow_write(second, T0)
    assert await store.workflow_run(rid(2)) is None
    assert await store.workflow_last_claim(WF) == T0
    hook = WorkflowWrite(runs=(run(rid(3)),), claim=Claim("webhook", WF, "key-1", rid(3)))
    assert await store.workflow_write(hook, T0)
    assert await store.workflow_claimed_run("webhook", WF, "key-1") == rid(3)


async def test_leases_are_taken_once_checked_on_write_and_retaken_when_lapsed(store: SqlStore) -> None:
    await store.workflow_write(WorkflowWrite(runs=(run(rid(1)), run(rid(2), created=T0 + 1))), T0)
    await store.workflow_write(WorkflowWrite(runs=(run(rid(3), "waiting", wake_at=T0 + 100),)), T0)
    assert await store.workflow_take_runs("a", T0, 30, 10) == [rid(1), rid(2)]
    assert await store.workflow_take_runs("b", T0 + 10, 30, 10) == []
    with pytest.raises(LeaseLost):
        await store.workflow_write(WorkflowWrite(runs=(run(rid(1), "running"),), lease="b"), T0)
    got = await store.workflow_run(rid(1))
    assert got is not None and got[0].status == "pending"  # rolled back
    assert await store.workflow_write(WorkflowWrite(runs=(run(rid(1), "running"),), lease="a"), T0)
    await store.workflow_renew_leases("a", [rid(2)], T0 + 100)
    assert await store.workflow_take_runs("b", T0 + 31, 30, 10) == [rid(1)]  # rid(2) renewed; rid(3) asleep
    assert await store.workflow_take_runs("b", T0 + 101, 30, 10) == [rid(1), rid(3), rid(2)]
    await store.workflow_release("b", rid(3))
    assert await store.workflow_take_runs("c", T0 + 102, 30, 10, run_id=rid(3)) == [rid(3)]
    assert await store.workflow_count_runs("pending") == 1
    assert sorted(await store.workflow_active_runs(WF)) == [rid(1), rid(2), rid(3)]


async def test_approvals_move_out_of_pending_once(store: SqlStore) -> None:
    ref = "e" * 64
    row = ApprovalRow(ref, WF, rid(1), CHANNEL, "pending", T0 + 60, "{}", "f" * 64)
    await store.workflow_write(WorkflowWrite(approval=row), T0)
    assert await store.workflow_approval(request_event_id="f" * 64) == row
    assert await store.workflow_due_approvals(T0 + 59) == []
    assert await store.workflow_due_approvals(T0 + 60) == [row]
    granted = ApprovalRow(ref, WF, rid(1), CHANNEL, "granted", T0 + 60, '{"a":1}', "f" * 64)
    assert await store.workflow_write(WorkflowWrite(swap=ApprovalSwap(granted)), T0)
    with pytest.raises(ApprovalRaced):
        await store.workflow_write(WorkflowWrite(swap=ApprovalSwap(granted), runs=(run(rid(9)),)), T0)
    assert await store.workflow_run(rid(9)) is None
    assert await store.workflow_run_approvals(rid(1)) == [granted]


async def test_runs_page_newest_first_without_gaps(store: SqlStore) -> None:
    runs = tuple(run(rid(n), "completed", T0 + n // 3) for n in range(10))
    await store.workflow_write(WorkflowWrite(runs=runs), T0)
    seen: list[str] = []
    before = None
    while True:
        page = await store.workflow_runs(WF, before, 4)
        seen += [r.id for r in page]
        if len(page) < 4:
            break
        before = (page[-1].created_at, page[-1].id)
    expected = [r.id for r in sorted(runs, key=lambda r: (r.created_at, r.id), reverse=True)]
    assert seen == expected


@pytest.mark.postgres
async def test_two_replicas_never_take_one_run_or_one_instant(tmp_path: Path) -> None:
    async with temp_database() as dsn:
        a, b = PostgresStore(dsn), PostgresStore(dsn)
        await a.open()
        await b.open()
        try:
            await a.workflow_write(
                WorkflowWrite(runs=tuple(run(rid(n), created=T0 + n) for n in range(200))), T0
            )
            taken = await asyncio.gather(*(s.workflow_take_runs(name, T0, 30, 7) for _ in range(20)
                                           for s, name in ((a, "a"), (b, "b"))))  # fmt: skip
            flat = [i for ids in taken for i in ids]
            assert len(flat) == len(set(flat)) == 200
            claims = await asyncio.gather(*(
                s.workflow_write(WorkflowWrite(runs=(run(rid(1000 + 2 * t + i)),),
                                               claim=Claim("schedule", WF, str(T0 + 60 * t), rid(1000 + 2 * t + i))), T0)
                for t in range(50) for i, s in enumerate((a, b))))  # fmt: skip
            assert sum(claims) == 50
        finally:
            await a.close()
            await b.close()
