"""Two replicas on one PostgreSQL (issue 28 item 6): every scheduled instant runs exactly once.

Two real `buzz relay serve` processes share the database and the relay key; 200 schedule
workflows fire at the same second (the issue's 1,000 are a row of `bench/workflows.py`). Each
instant is a unique claim row committed with its run, so neither replica can run it twice.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from buzz.client import RelayClient
from buzz.core.keys import generate_secret_key
from tests.operator.support import served
from tests.support.pg import temp_database
from tests.support.relay import Identity
from tests.workflow_runs.support import definition_event, wait_for
from tests.workspace.helpers import create_channel

FIRES = 200


@pytest.mark.postgres
async def test_two_replicas_run_each_scheduled_instant_once(tmp_path: Path) -> None:
    owner = Identity.new()
    env = {"RELAY_OWNER_PUBKEY": owner.pubkey, "BUZZ_WORKFLOW_TICK_S": "0.5",
           "BUZZ_RELAY_PRIVATE_KEY": generate_secret_key()}  # fmt: skip
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
    async with temp_database() as dsn:
        async with (
            served(tmp_path / "a" / "data", "--db", dsn, env=env) as a,
            served(tmp_path / "b" / "data", "--db", dsn, env=env) as b,
            RelayClient(f"ws://127.0.0.1:{a.port}", owner.secret) as ca,
            RelayClient(f"ws://127.0.0.1:{b.port}", owner.secret) as cb,
        ):
            channel = await create_channel(ca, owner)
            second = (int(time.time()) + 25) % 60
            yaml = (f"name: Tick\ntrigger: {{on: schedule, cron: '{second} * * * * *'}}\n"
                    "steps:\n  - {id: s, action: send_message, text: 'tick {{trigger.timestamp}}'}\n")  # fmt: skip
            for i in range(FIRES):
                result = await (ca if i % 2 else cb).publish(definition_event(owner, channel, yaml))
                assert result.accepted, result.message
            started = await wait_for(ca, [{"kinds": [46001], "#h": [channel], "limit": 5000}],
                                     lambda evs: len(evs) >= FIRES, timeout=90)  # fmt: skip
            ends = await wait_for(cb, [{"kinds": [46005], "#h": [channel], "limit": 5000}],
                                  lambda evs: len(evs) >= FIRES, timeout=60)  # fmt: skip
            # a few more ticks of both replicas: no instant runs twice
            await wait_for(
                ca, [{"kinds": [9], "#h": [channel], "limit": 5000}], lambda evs: len(evs) >= FIRES
            )
            workflows = [json.loads(e.content)["workflow_id"] for e in started]
            assert len(workflows) == len(set(workflows)) == FIRES
            assert len(ends) == FIRES
            msgs = await cb.query([{"kinds": [9], "#h": [channel], "limit": 5000}])
            assert len(msgs) == FIRES
            assert len({m.content for m in msgs}) == 1
