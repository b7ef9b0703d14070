"""Schedules (cron, once per instant) and the REST reads with NIP-98 and keyset paging
(issue 28 items 2, 9)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import aiohttp

from buzz.core.nip98 import build_auth_header
from buzz.workflows.host import Settings
from tests.support.relay import Identity, relay_on
from tests.workflow_runs.support import run_end, save, trigger, wait_for
from tests.workspace.helpers import create_channel


async def get(http: aiohttp.ClientSession, base: str, path: str, who: Identity | None) -> tuple[int, Any]:
    headers = {"Authorization": build_auth_header(who.secret, base + path, "GET")} if who else {}
    async with http.get(base + path, headers=headers) as r:
        return r.status, await r.json()


async def test_a_cron_schedule_fires_once_at_its_second(tmp_path: Path) -> None:
    owner = Identity.new()
    second = (int(time.time()) + 3) % 60
    yaml = f"name: Tick\ntrigger: {{on: schedule, cron: '{second} * * * * *'}}\nsteps:\n  - {{id: s, action: send_message, text: 'tick {{{{trigger.timestamp}}}}'}}\n"
    async with relay_on(tmp_path, workflows=Settings(tick_s=0.5)) as running, running.client(owner) as client:
        channel = await create_channel(client, owner)
        await save(client, owner, channel, yaml)
        msgs = await wait_for(
            client, [{"kinds": [9], "#h": [channel]}], lambda evs: len(evs) >= 1, timeout=30
        )
        instant = int(msgs[0].content.removeprefix("tick "))
        assert instant % 60 == second
        await wait_for(client, [{"kinds": [46001], "#h": [channel]}], lambda evs: len(evs) == 1)
        claims = await running.relay.store.workflow_last_claim(json.loads(
            (await client.query([{"kinds": [46001], "#h": [channel]}]))[0].content)["workflow_id"])  # fmt: skip
        assert claims == instant


async def test_runs_page_and_approvals_are_read_with_nip98(tmp_path: Path) -> None:
    owner, stranger = Identity.new(), Identity.new()
    yaml = "name: P\ntrigger: {on: webhook}\nsteps:\n  - {id: s, action: send_message, text: 'x'}\n"
    async with (
        relay_on(tmp_path) as running,
        running.client(owner) as client,
        aiohttp.ClientSession() as http,
    ):
        channel = await create_channel(client, owner, "private")
        wid, _ = await save(client, owner, channel, yaml)
        runs = [await trigger(client, owner, wid, {"n": n}) for n in range(7)]
        for run_id in runs:
            await run_end(client, channel, run_id)
        base = running.http_url
        assert (await get(http, base, f"/workflows/{wid}/runs", None))[0] == 401
        assert (await get(http, base, f"/workflows/{wid}/runs", stranger))[0] == 404
        seen: list[str] = []
        path = f"/workflows/{wid}/runs?limit=3"
        while True:
            status, body = await get(http, base, path, owner)
            assert status == 200, body
            seen += [r["id"] for r in body["runs"]]
            if body["next"] is None:
                break
            path = f"/workflows/{wid}/runs?limit=3&before={body['next']['before']}&before_id={body['next']['before_id']}"
        assert sorted(seen) == sorted(runs) and len(seen) == 7
        assert (await get(http, base, f"/workflows/{wid}/runs?before=1", owner))[0] == 400
        assert (await get(http, base, f"/workflows/{wid}/runs?limit=0", owner))[0] == 400
        status, body = await get(http, base, f"/workflows/{wid}/runs/{runs[0]}", owner)
        assert body["run"]["status"] == "completed"
        assert [s["status"] for s in body["run"]["execution_trace"]] == ["completed"]
        status, body = await get(http, base, f"/workflows?channel={channel}", owner)
        assert [w["id"] for w in body["workflows"]] == [wid]
        assert body["workflows"][0]["has_webhook_secret"] is True
        assert body["workflows"][0]["effectively_enabled"] is True
        assert body["workflows"][0]["last_run"]["status"] == "completed"
