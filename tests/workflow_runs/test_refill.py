"""A run refused a drive (every drive busy) starts as soon as one frees, not at the next scan
(decision 376). The scan's period here is an hour, so only the refill can start the runs that
waited; the store's `workflow_take_runs` is wrapped to record calls, never replaced."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from buzz.core.event import Event
from buzz.workflows.host import Settings
from tests.support.deadline import scaled
from tests.support.relay import Identity
from tests.workflow_runs.support import relay_with, run_tag, save, wait_for
from tests.workspace.helpers import create_channel

TWO_SENDS = """name: Echo
trigger: {on: message_posted, filter: 'str_contains(trigger_text, "go")'}
steps:
  - {id: a, action: send_message, text: "first"}
  - {id: b, action: send_message, text: "second"}
"""


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
async def test_a_queued_run_starts_when_a_drive_frees(backend: str, tmp_path: Path) -> None:
    owner = Identity.new()
    settings = Settings(max_concurrent=1, tick_s=3600)
    async with relay_with(backend, tmp_path, settings) as running, running.client(owner) as client:
        store = running.relay.store
        writes: list[Any] = []
        real_write = store.workflow_write
        held = asyncio.Event()  # the first run's second message waits: its drive stays busy

        async def recorded(write: Any, now: int) -> Any:
            writes.append(write)
            # a message rides in its step's write (decision 383): the drive holds there
            if any(s.event.content == "second" for s, _ in write.published):
                await held.wait()
            return await real_write(write, now)

        store.workflow_write = recorded
        channel = await create_channel(client, owner)
        await save(client, owner, channel, TWO_SENDS)
        n = 5
        assert (await client.publish(Event.create(owner.secret, 9, "go 0", [["h", channel]]))).accepted
        await wait_for(client, [{"kinds": [46001], "#h": [channel]}], lambda evs: len(evs) == 1)
        for i in range(1, n):  # the one drive is busy: these runs wait in the queue
            assert (await client.publish(Event.create(owner.secret, 9, f"go {i}", [["h", channel]]))).accepted
        await wait_for(client, [{"kinds": [46001], "#h": [channel]}], lambda evs: len(evs) == n)
        held.set()
        ends = await wait_for(
            client,
            [{"kinds": [46005, 46006], "#h": [channel]}],
            lambda evs: len(evs) == n,
            timeout=scaled(60),
        )
        assert {e.kind for e in ends} == {46005}
        created = [w for w in writes if w.runs and w.runs[0].status in ("pending", "running") and w.claim is None
                   and any(e.event.kind == 46001 for e in w.events)]  # fmt: skip
        queued = [w for w in created if w.take is None]
        # one drive: the runs that found it busy were created unleased and still ran at once
        assert len(created) == n and queued, "no run waited for a drive: nothing was tested"
        started = await wait_for(client, [{"kinds": [46001], "#h": [channel]}], lambda evs: len(evs) == n)
        assert len({run_tag(e) for e in started}) == n
