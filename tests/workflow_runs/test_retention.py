"""Run retention (workflows.md §11.5, issue 28 item 6's durable run log kept bounded): terminal
runs older than the retention are deleted with their lifecycle and approval events; a run still
waiting is kept, and so are the messages runs posted. Both backends."""

from __future__ import annotations

from pathlib import Path

import pytest

from buzz.workflows.host import Settings
from tests.support.relay import Identity
from tests.workflow_runs.support import relay_with, run_end, run_tag, save, trigger, wait_for
from tests.workspace.helpers import create_channel

SAY = "name: Say\ntrigger: {on: webhook}\nsteps:\n  - {id: s, action: send_message, text: kept}\n"
ASK = ("name: Ask\ntrigger: {on: webhook}\nsteps:\n"
       "  - {id: ok, action: request_approval, from: any, message: 'go?', timeout: 1h}\n")  # fmt: skip


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
async def test_terminal_runs_past_the_retention_are_deleted_with_their_events(
    backend: str, tmp_path: Path
) -> None:
    owner = Identity.new()
    async with relay_with(backend, tmp_path, Settings(retention_s=1, prune_s=0.2)) as running, \
            running.client(owner) as client:  # fmt: skip
        channel = await create_channel(client, owner)
        say, _ = await save(client, owner, channel, SAY)
        ask, _ = await save(client, owner, channel, ASK)
        waiting = await trigger(client, owner, ask)
        await wait_for(client, [{"kinds": [46010], "#h": [channel]}], lambda evs: len(evs) == 1)
        done = await trigger(client, owner, say)
        await run_end(client, channel, done)
        lifecycle = [{"kinds": list(range(46001, 46013)), "#h": [channel]}]
        await wait_for(client, lifecycle, lambda evs: all(run_tag(e) != done for e in evs), timeout=30)
        left = await client.query(lifecycle)
        assert {run_tag(e) for e in left} == {waiting}  # the waiting run and its 46010 stay
        assert {e.kind for e in left} >= {46001, 46010}
        assert [e.content for e in await client.query([{"kinds": [9], "#h": [channel]}])] == ["kept"]
        engine = running.relay.workflows
        assert await engine.store.workflow_run(done) is None
        assert await engine.store.workflow_run(waiting) is not None
