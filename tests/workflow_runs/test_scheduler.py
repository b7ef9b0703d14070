"""The scheduler fires at the instant, not at its next pass (issue 28's "every scheduled fire
within 5 s of its instant", workflows.md §12, decision 324). The pass period is set to an hour,
so a scheduler that only fires from its passes would not fire in this test at all; the one
here learns of the new workflow when it is saved and sleeps until its instant. On both
backends, with the claim batch committed in one transaction."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from buzz.workflows.host import Settings
from tests.support.deadline import scaled
from tests.support.relay import Identity
from tests.workflow_runs.support import relay_with, save, wait_for
from tests.workspace.helpers import create_channel


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
async def test_schedules_fire_at_their_instant_between_passes(backend: str, tmp_path: Path) -> None:
    owner = Identity.new()
    second = (int(time.time()) + 8) % 60
    yaml = (f"name: Tick\ntrigger: {{on: schedule, cron: '{second} * * * * *'}}\nsteps:\n"
            "  - {id: s, action: send_message, text: 'tick {{trigger.timestamp}}'}\n")  # fmt: skip
    async with (
        relay_with(backend, tmp_path, Settings(tick_s=3600)) as running,
        running.client(owner) as client,
    ):
        channels = [await create_channel(client, owner, name=f"c{i}") for i in range(3)]
        ids = {(await save(client, owner, c, yaml))[0] for c in channels for _ in range(2)}
        started = await wait_for(client, [{"kinds": [46001], "#h": channels}], lambda evs: len(evs) >= 6,
                                 timeout=scaled(70))  # fmt: skip
        assert {json.loads(e.content)["workflow_id"] for e in started} == ids
        msgs = await wait_for(client, [{"kinds": [9], "#h": channels}], lambda evs: len(evs) >= 6)
        assert {int(m.content.removeprefix("tick ")) % 60 for m in msgs} == {second}
