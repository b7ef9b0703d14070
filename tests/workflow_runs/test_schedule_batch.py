"""A scheduled instant's batch (decision 378): the owners' authority read for the whole batch at
once, the fires refused by a full queue recorded in the batch's own transaction, and the runs
kicked after an instant's fires taking no more drives than `max_concurrent` (the rest wait in
the queue and start as drives free). Both backends."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest

from buzz.core.event import Event
from buzz.workflows.host import Settings
from tests.support.deadline import scaled
from tests.support.relay import Identity
from tests.workflow_runs.support import relay_with, save, wait_for
from tests.workspace.helpers import accepted, create_channel, put_user


def tick(second: int, text: str = "tick") -> str:
    return (f"name: Tick\ntrigger: {{on: schedule, cron: '{second} * * * * *'}}\nsteps:\n"
            f"  - {{id: s, action: send_message, text: '{text}'}}\n")  # fmt: skip


async def runs_of(store: Any, workflow_ids: list[str], want: int) -> dict[str, list[Any]]:
    """Each workflow's runs, once `want` of them have one (polled, bounded)."""
    deadline = time.monotonic() + scaled(90)
    while True:
        runs = {w: await store.workflow_runs(w, None, 10) for w in workflow_ids}
        if sum(1 for r in runs.values() if r) >= want or time.monotonic() > deadline:
            return runs
        await asyncio.sleep(0.1)


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
async def test_a_full_queue_records_each_fire_once_and_a_removed_owner_fires_nothing(
    backend: str, tmp_path: Path
) -> None:
    admin, owner = Identity.new(), Identity.new()
    second = (int(time.time()) + 8) % 60
    async with (
        relay_with(backend, tmp_path, Settings(tick_s=3600, queue_max=0)) as running,
        running.client(admin) as ac,
        running.client(owner) as oc,
    ):
        channels = [await create_channel(ac, admin, name=f"c{i}") for i in range(2)]
        for channel in channels:
            await put_user(ac, admin, channel, owner.pubkey)
        removed = (await save(oc, owner, channels[0], tick(second)))[0]
        await accepted(ac, Event.create(admin.secret, 9001, "", [["h", channels[0]], ["p", owner.pubkey]]))
        kept = [(await save(ac, admin, c, tick(second)))[0] for c in channels for _ in range(2)]
        store = running.relay.store
        runs = await runs_of(store, [*kept, removed], len(kept))
        # one batch: when the kept workflows' refusals are committed, the removed owner's fire
        # was decided in the same pass
        assert {w: [(r.status, r.error_code) for r in runs[w]] for w in kept} == {
            w: [("failed", "capacity_exceeded")] for w in kept
        }
        assert runs[removed] == []
        assert await ac.query([{"kinds": [46001], "#h": channels}]) == []


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
async def test_an_instants_runs_take_at_most_max_concurrent_drives(backend: str, tmp_path: Path) -> None:
    owner = Identity.new()
    second = (int(time.time()) + 8) % 60
    n = 6
    async with (
        relay_with(backend, tmp_path, Settings(tick_s=3600, max_concurrent=2)) as running,
        running.client(owner) as client,
    ):
        engine = running.relay.workflows
        busiest: list[int] = []
        real_start = engine._start

        def start(run_id: str, first: Any = None) -> None:
            real_start(run_id, first)
            busiest.append(len(engine._running) - engine.napping)

        engine._start = start
        store = running.relay.store
        real_write, held, go = store.workflow_write, [0], asyncio.Event()

        async def workflow_write(write: Any, *args: Any, **kwargs: Any) -> Any:
            # the message rides in its step's start (decision 383): a drive stays busy until `go`
            if any(s.event.content.startswith("tick ") for s, _ in write.published):
                held[0] += 1
                await go.wait()
            return await real_write(write, *args, **kwargs)

        store.workflow_write = workflow_write
        channel = await create_channel(client, owner)
        for i in range(n):
            await save(client, owner, channel, tick(second, f"tick {i}"))
        # every run of the instant either holds a drive (its message waiting) or waits for one
        deadline = time.monotonic() + scaled(90)
        while held[0] + engine._queued < n and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        go.set()
        ends = await wait_for(
            client,
            [{"kinds": [46005, 46006], "#h": [channel]}],
            lambda evs: len(evs) >= n,
            timeout=scaled(90),
        )
        assert {e.kind for e in ends} == {46005}
        assert len(busiest) == n and max(busiest) <= 2, busiest
