"""Cheaper runs and fires that do not wait for them (issue 28's benchmark targets, decisions
326–327): a run commits one transaction per step (a step's completion rides with the next
step's start, the last one with the run's end) and starts without a separate lease-taking
write; while the scheduler commits an instant's fires, runs already executing wait before
their next commit. On the real relay and store; the store's methods are wrapped to count and
record calls, never replaced."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest

from buzz.workflows.host import Settings
from tests.support.deadline import scaled
from tests.support.relay import Identity
from tests.workflow_runs.support import relay_with, run_end, run_tag, save, spy, trigger, wait_for
from tests.workspace.helpers import create_channel

THREE = "name: Three\ntrigger: {on: webhook}\nsteps:\n" + "".join(
    f"  - {{id: s{i}, action: send_message, text: 'step {i}'}}\n" for i in range(1, 4)
)

NAP = ("name: Nap\ntrigger: {on: webhook}\nsteps:\n  - {id: a, action: send_message, text: before}\n"
       "  - {id: nap, action: delay, duration: 1}\n  - {id: b, action: send_message, text: after}\n")  # fmt: skip


async def _until(predicate: Any, timeout: float) -> None:
    end = asyncio.get_running_loop().time() + timeout
    while not predicate():
        assert asyncio.get_running_loop().time() < end, "timed out"
        await asyncio.sleep(0.02)


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
async def test_a_run_commits_once_per_step_and_starts_without_a_take(backend: str, tmp_path: Path) -> None:
    owner = Identity.new()
    async with relay_with(backend, tmp_path, Settings()) as running, running.client(owner) as client:
        store = running.relay.store
        writes: list[Any] = []
        takes: list[Any] = []
        spy(store, "workflow_write", writes)
        spy(store, "workflow_take_runs", takes)
        channel = await create_channel(client, owner)
        wid, _ = await save(client, owner, channel, THREE)
        run_id = await trigger(client, owner, wid)
        assert (await run_end(client, channel, run_id, timeout=scaled(30))).kind == 46005
        mine = [w for w, _ in writes if any(r.id == run_id for r in w.runs)]
        # the first step's start; s1 done + s2 started; s2 done + s3 started, done + the end
        # (each with its step's message; the last step's outcome is known at its start, 383)
        assert len(mine) == 3
        assert [sorted(s.idx for s in w.steps) for w in mine] == [[0], [0, 1], [1, 2]]
        assert [w.release for w in mine] == [False, False, True]
        assert not [t for t in takes if run_id in t]  # leased in the trigger's own transaction
        kinds = [[e.event.kind for e in w.events] for w in mine]
        assert kinds == [[46002], [46003, 46002], [46003, 46002, 46003, 46005]]
        assert [[s.event.content for s, _ in w.published] for w in mine] == [
            ["step 1"],
            ["step 2"],
            ["step 3"],
        ]
        msgs = await wait_for(client, [{"kinds": [9], "#h": [channel]}], lambda evs: len(evs) >= 3)
        assert sorted(m.content for m in msgs) == ["step 1", "step 2", "step 3"]
        lifecycle = await client.query([{"kinds": [46002, 46003], "#h": [channel]}])
        assert sorted(e.kind for e in lifecycle if run_tag(e) == run_id) == [46002] * 3 + [46003] * 3
        # a short delay is slept through under the lease: no release, no second take
        wid, _ = await save(client, owner, channel, NAP)
        run_id = await trigger(client, owner, wid)
        assert (await run_end(client, channel, run_id, timeout=scaled(30))).kind == 46005
        mine = [w for w, _ in writes if any(r.id == run_id for r in w.runs)]
        assert [(sorted(s.idx for s in w.steps), w.release) for w in mine] == [
            ([0], False), ([0, 1], False), ([1, 2], True)]  # fmt: skip
        assert mine[1].runs[0].status == "waiting" and mine[2].runs[0].status == "completed"
        assert not [t for t in takes if run_id in t]


async def test_runs_wait_at_the_gate_while_fires_are_committed(tmp_path: Path) -> None:
    owner = Identity.new()
    async with (
        relay_with("sqlite", tmp_path, Settings(tick_s=3600)) as running,
        running.client(owner) as client,
    ):
        engine, store = running.relay.workflows, running.relay.store
        channel = await create_channel(client, owner)
        wid, _ = await save(client, owner, channel, THREE)
        # a run triggered while the gate is closed is created (its 46001), but it commits no
        # step until the gate opens
        with engine.gate.closed():
            held = await trigger(client, owner, wid)
            await _until(lambda: engine.gate.parked >= 1, scaled(20))
            started = await client.query([{"kinds": [46002, 46003, 9], "#h": [channel]}])
            assert [e for e in started if e.kind != 9 and run_tag(e) == held] == []
            assert [e for e in started if e.kind == 9] == []
            assert len([e for e in await client.query([{"kinds": [46001], "#h": [channel]}])]) == 1
        assert (await run_end(client, channel, held, timeout=scaled(30))).kind == 46005
        # the real scheduler closes the gate around its claim batches
        batches: list[bool] = []
        spy(store, "workflow_write_many", batches, lambda _: engine.gate.is_open)
        second = (int(time.time()) + 6) % 60
        tick = (f"name: Tick\ntrigger: {{on: schedule, cron: '{second} * * * * *'}}\nsteps:\n"
                "  - {id: s, action: send_message, text: tick}\n")  # fmt: skip
        await save(client, owner, channel, tick)
        await wait_for(client, [{"kinds": [46001], "#h": [channel]}], lambda evs: len(evs) >= 2,
                       timeout=scaled(70))  # fmt: skip
        assert batches == [False]  # one batch, committed with the gate closed
        assert engine.gate.is_open
