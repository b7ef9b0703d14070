"""Durable runs with real processes and SIGKILL (issue 28 item 6): a relay killed right after a
step's message committed, during a delay, and while a run waits for an approval, continues
after a restart from the step after the last completed one, and posts nothing twice."""

from __future__ import annotations

import asyncio
import json
import os
import signal
from pathlib import Path

from buzz.client import RelayClient
from buzz.core.event import Event
from buzz.relay.operator import crash_hook
from tests.operator.support import free_port, served
from tests.support.deadline import scaled
from tests.support.relay import Identity
from tests.workflow_runs.support import run_end, run_tag, save, trigger, wait_for
from tests.workspace.helpers import create_channel

FIVE = "name: Five\ntrigger: {on: webhook}\nsteps:\n" + "".join(
    f"  - {{id: s{i}, action: send_message, text: 'step {i}'}}\n" for i in range(1, 6)
)


def _env(owner: Identity, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in (crash_hook.ENV, crash_hook.COUNT_ENV)}
    env.update(RELAY_OWNER_PUBKEY=owner.pubkey, BUZZ_WORKFLOW_TICK_S="0.5", **extra)
    return env


async def _engine_messages(client: RelayClient, channel: str) -> list[Event]:
    return [e for e in await client.query([{"kinds": [9], "#h": [channel]}])
            if any(t[0] == "buzz:workflow" for t in e.tags)]  # fmt: skip


async def test_killed_after_the_second_step_the_run_finishes_once(tmp_path: Path) -> None:
    owner, port, data = Identity.new(), free_port(), tmp_path / "data"
    crash = {crash_hook.ENV: "9", crash_hook.COUNT_ENV: "2"}
    async with served(data, env=_env(owner, **crash), port=port) as first:
        async with RelayClient(f"ws://127.0.0.1:{port}", owner.secret) as client:
            channel = await create_channel(client, owner)
            wid, _ = await save(client, owner, channel, FIVE)
            run_id = await trigger(client, owner, wid)
        assert await asyncio.wait_for(first.proc.wait(), scaled(20)) == -9
    async with (
        served(data, env=_env(owner), port=port),
        RelayClient(f"ws://127.0.0.1:{port}", owner.secret) as client,
    ):
        end = await run_end(client, channel, run_id, timeout=30)
        assert end.kind == 46005
        msgs = await _engine_messages(client, channel)
        assert sorted(m.content for m in msgs) == [f"step {i}" for i in range(1, 6)]
        assert len(await client.query([{"kinds": [46005], "#d": [wid]}])) == 1
        started = [json.loads(e.content) for e in await client.query([{"kinds": [46002], "#d": [wid]}])]
        assert sorted((s["step_id"], s["attempt"]) for s in started if s["step_id"] == "s2") == [
            ("s2", 1),
            ("s2", 2),
        ]


async def test_killed_during_a_delay_and_while_waiting_for_approval(tmp_path: Path) -> None:
    owner, port, data = Identity.new(), free_port(), tmp_path / "data"
    delay = "name: D\ntrigger: {on: webhook}\nsteps:\n  - {id: a, action: send_message, text: before}\n" \
            "  - {id: nap, action: delay, duration: 3}\n  - {id: b, action: send_message, text: after}\n"  # fmt: skip
    approve = "name: A\ntrigger: {on: webhook}\nsteps:\n  - {id: ok, action: request_approval, from: any}\n" \
              "  - {id: b, action: send_message, text: approved}\n"  # fmt: skip
    async with served(data, env=_env(owner), port=port) as first:
        async with RelayClient(f"ws://127.0.0.1:{port}", owner.secret) as client:
            channel = await create_channel(client, owner)
            wid_delay, _ = await save(client, owner, channel, delay)
            wid_approve, _ = await save(client, owner, channel, approve)
            run_delay = await trigger(client, owner, wid_delay)
            run_approve = await trigger(client, owner, wid_approve)
            await wait_for(
                client, [{"kinds": [9], "#h": [channel]}], lambda evs: any(e.content == "before" for e in evs)
            )
            requests = await wait_for(
                client, [{"kinds": [46010], "#h": [channel]}], lambda evs: len(evs) == 1
            )
            assert run_tag(requests[0]) == run_approve
        first.proc.send_signal(signal.SIGKILL)
        assert await asyncio.wait_for(first.proc.wait(), scaled(20)) == -9
    await asyncio.sleep(3)  # the delay's wake-up passes while the relay is down
    async with (
        served(data, env=_env(owner), port=port),
        RelayClient(f"ws://127.0.0.1:{port}", owner.secret) as client,
    ):
        assert (await run_end(client, channel, run_delay, timeout=30)).kind == 46005
        ref = next(t[1] for t in requests[0].tags if t[0] == "d")
        granted = await client.publish(Event.create(owner.secret, 46030, "", [["d", ref]]))
        assert granted.accepted, granted.message
        assert (await run_end(client, channel, run_approve, timeout=30)).kind == 46005
        msgs = sorted(m.content for m in await _engine_messages(client, channel))
        assert msgs == ["after", "approved", "before"]
