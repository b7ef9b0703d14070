"""Capacity and security (issue 28 items 1, 5, 7, 8): the queue bound and `capacity_exceeded`,
a workflow's `max_concurrent`, the per-workflow run rate, owner authority re-checked at every
step, revisions, lifecycle reads gated by the channel, send_dm, the engine switched off."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import aiohttp
import pytest

from buzz.client import RelayError
from buzz.core.event import Event
from buzz.workflows.host import Settings
from tests.support.relay import Identity, relay_on
from tests.workflow_runs.support import definition_event, run_end, save, trigger, wait_for
from tests.workspace.helpers import accepted, create_channel, message, put_user

SAY = "name: Say\ntrigger: {on: message_posted}\nsteps:\n  - {id: s, action: send_message, text: 'seen'}\n"


async def test_a_full_queue_records_capacity_exceeded_and_refuses_doors(tmp_path: Path) -> None:
    owner = Identity.new()
    async with (
        relay_on(tmp_path, workflows=Settings(queue_max=0)) as running,
        running.client(owner) as client,
    ):
        channel = await create_channel(client, owner)
        wid, _ = await save(client, owner, channel, SAY.replace("message_posted", "webhook"))
        refused = await client.publish(Event.create(owner.secret, 46020, "", [["d", wid]]))
        assert (refused.accepted, refused.message) == (False, "rate-limited: workflow run queue is full")
        hooked, _ = await save(client, owner, channel, SAY)
        await message(client, owner, channel, "hello")
        store = running.relay.store
        runs = await wait_for_runs(store, hooked)
        assert [(r.status, r.error_code) for r in runs] == [("failed", "capacity_exceeded")]
        assert await client.query([{"kinds": [46001], "#h": [channel]}]) == []  # no lifecycle events


async def wait_for_runs(store, workflow_id: str):  # type: ignore[no-untyped-def]
    import asyncio

    for _ in range(100):
        runs = await store.workflow_runs(workflow_id, None, 10)
        if runs:
            return runs
        await asyncio.sleep(0.05)
    return []


async def test_max_concurrent_serialises_runs_and_the_rate_limit_refuses(tmp_path: Path) -> None:
    owner = Identity.new()
    yaml = ("name: One at a time\nmax_concurrent: 1\ntrigger: {on: webhook}\nsteps:\n"
            "  - {id: nap, action: delay, duration: 1}\n  - {id: s, action: send_message, text: 'run {{trigger.n}}'}\n")  # fmt: skip
    async with relay_on(tmp_path, workflows=Settings(run_rate=3)) as running, running.client(owner) as client:
        channel = await create_channel(client, owner)
        wid, _ = await save(client, owner, channel, yaml)
        runs = [await trigger(client, owner, wid, {"n": n}) for n in range(3)]
        limited = await client.publish(Event.create(owner.secret, 46020, '{"n": 9}', [["d", wid]]))
        assert (limited.accepted, limited.message) == (False, "rate-limited: workflow run rate exceeded")
        ends = [json.loads((await run_end(client, channel, r, timeout=30)).content) for r in runs]
        starts = {json.loads(e.content)["run_id"]: e.created_at
                  for e in await client.query([{"kinds": [46002], "#d": [wid]}]) if json.loads(e.content)["step_id"] == "nap"}  # fmt: skip
        spans = sorted((starts[r], end["completed_at"]) for r, end in zip(runs, ends, strict=True))
        assert all(later[0] >= earlier[1] for earlier, later in itertools.pairwise(spans))


async def test_owner_authority_is_checked_at_every_step(tmp_path: Path) -> None:
    admin, owner = Identity.new(), Identity.new()
    yaml = ("name: Slow\ntrigger: {on: webhook}\nsteps:\n  - {id: nap, action: delay, duration: 1}\n"
            "  - {id: s, action: send_message, text: late}\n")  # fmt: skip
    async with relay_on(tmp_path) as running, running.client(admin) as ac, running.client(owner) as oc:
        channel = await create_channel(ac, admin)
        await put_user(ac, admin, channel, owner.pubkey)
        wid, _ = await save(oc, owner, channel, yaml)
        run_id = await trigger(oc, owner, wid)
        await accepted(ac, Event.create(admin.secret, 9001, "", [["h", channel], ["p", owner.pubkey]]))
        end = await run_end(ac, channel, run_id)
        assert end.kind == 46006 and json.loads(end.content)["error_code"] == "owner_unauthorized"
        assert [m for m in await ac.query([{"kinds": [9], "#h": [channel]}]) if m.content == "late"] == []


async def test_revisions_lifecycle_reads_and_relay_only_kinds(tmp_path: Path) -> None:
    owner, stranger = Identity.new(), Identity.new()
    async with relay_on(tmp_path) as running, running.client(owner) as client, running.client(stranger) as sc:
        channel = await create_channel(client, owner, "private")
        first = definition_event(owner, channel, SAY.replace("message_posted", "webhook"))
        wid = next(t[1] for t in first.tags if t[0] == "d")
        assert (await client.publish(first)).accepted
        webhook = SAY.replace("message_posted", "webhook")
        second = Event.create(owner.secret, 30620, webhook + "# v2\n",
                              [["d", wid], ["h", channel], ["expected-revision", first.id]], first.created_at + 1)  # fmt: skip
        assert (await client.publish(second)).accepted
        stale = Event.create(owner.secret, 30620, webhook + "# v3\n",
                             [["d", wid], ["h", channel], ["expected-revision", first.id]], first.created_at + 2)  # fmt: skip
        result = await client.publish(stale)
        assert (result.accepted, result.message) == (False, "conflict: workflow changed since it was loaded")
        bad = await client.publish(
            definition_event(owner, channel, "name: x\ntrigger: {on: nope}\nsteps: []\n")
        )
        assert (
            not bad.accepted
            and bad.message.startswith("invalid: workflow YAML parse error: ")
            and "line" in bad.message
        )
        run_id = await trigger(client, owner, wid)
        await run_end(client, channel, run_id)
        assert len(await client.query([{"kinds": [46001], "#h": [channel]}])) == 1
        with pytest.raises(RelayError, match="restricted: not a channel member"):
            await sc.query([{"kinds": [46001], "#h": [channel]}])
        forged = await client.publish(Event.create(owner.secret, 46001, "{}", [["h", channel]]))
        assert (forged.accepted, forged.message) == (False, "restricted: relay-only kind")


async def test_send_dm_opens_the_dm_and_names_the_member(tmp_path: Path) -> None:
    owner, bob = Identity.new(), Identity.new()
    yaml = (f"name: Dm\ntrigger: {{on: webhook}}\nsteps:\n  - {{id: dm, action: send_dm, to: '{bob.pubkey}', "
            "text: 'psst'}\n")  # fmt: skip
    async with relay_on(tmp_path) as running, running.client(owner) as client, running.client(bob) as bc:
        channel = await create_channel(client, owner)
        await put_user(client, owner, channel, bob.pubkey)
        wid, _ = await save(client, owner, channel, yaml)
        end = await run_end(client, channel, await trigger(client, owner, wid))
        assert end.kind == 46005, end.content
        dms = await wait_for(bc, [{"kinds": [9], "#p": [bob.pubkey]}], lambda evs: len(evs) == 1)
        assert dms[0].content == "psst" and ["actor", owner.pubkey] in [list(t) for t in dms[0].tags]


async def test_the_engine_switched_off_stores_definitions_only(tmp_path: Path) -> None:
    owner = Identity.new()
    async with (
        relay_on(tmp_path, workflows=Settings(enabled=False)) as running,
        running.client(owner) as client,
    ):
        channel = await create_channel(client, owner)
        event = definition_event(owner, channel, SAY.replace("message_posted", "webhook"))
        result = await client.publish(event)
        assert (result.accepted, result.message) == (True, "")
        wid = next(t[1] for t in event.tags if t[0] == "d")
        off = await client.publish(Event.create(owner.secret, 46020, "", [["d", wid], ["h", channel]]))
        assert (off.accepted, off.message) == (False, "restricted: workflows are disabled on this relay")
        async with aiohttp.ClientSession() as http, http.post(f"{running.http_url}/hooks/{wid}") as r:
            assert r.status == 404
