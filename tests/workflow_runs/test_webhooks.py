"""`POST /hooks/{id}` and `call_webhook` end to end (issue 28 items 2, 3, 8)."""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import web

from buzz.core.event import Event
from buzz.core.nip98 import build_auth_header
from buzz.workflows.host import Settings
from buzz.workflows.webhook_call import Allow
from tests.support.http_app import serve_app
from tests.support.relay import Identity, relay_on
from tests.workflow_runs.support import run_end, save, wait_for
from tests.workspace.helpers import create_channel, put_user

DEPLOY = """name: Deploy hook
trigger: {{on: webhook}}
steps:
  - id: call
    action: call_webhook
    url: "{url}"
    headers: {{X-Version: "{{{{trigger.version}}}}"}}
    body: '{{"v": "{{{{trigger.version}}}}"}}'
    retry: {{max: 2, backoff: 1s}}
  - {{id: say, action: send_message, text: "deployed {{{{steps.call.output.json.ok}}}} after {{{{steps.call.output.attempts}}}}"}}
"""


@contextlib.asynccontextmanager
async def receiver(statuses: list[int]) -> AsyncIterator[tuple[str, list[dict[str, Any]]]]:
    """A plain HTTP server on 127.0.0.1 answering `statuses` in turn (then 200)."""
    seen: list[dict[str, Any]] = []

    async def handle(request: web.Request) -> web.Response:
        seen.append({"headers": dict(request.headers), "body": await request.text()})
        status = statuses.pop(0) if statuses else 200
        if status == 302:
            return web.Response(status=302, headers={"Location": "http://127.0.0.1:1/"})
        return web.json_response({"ok": True}, status=status)

    app = web.Application()
    app.router.add_route("*", "/hook", handle)
    async with serve_app(app) as base:
        yield f"{base}/hook", seen


async def test_hook_starts_a_run_that_calls_a_webhook_with_retry(tmp_path: Path) -> None:
    owner = Identity.new()
    settings = Settings(allow=Allow.parse("127.0.0.1"))
    async with receiver([503]) as (url, seen), relay_on(tmp_path, workflows=settings) as running, \
            running.client(owner) as client, aiohttp.ClientSession() as http:  # fmt: skip
        channel = await create_channel(client, owner)
        wid, body = await save(client, owner, channel, DEPLOY.format(url=url))
        secret = body["webhook_secret"]
        hook = f"{running.http_url}/hooks/{wid}"
        async with http.post(hook, json={"version": "7"}, headers={"X-Webhook-Secret": secret,
                                                                   "Idempotency-Key": "k1"}) as r:  # fmt: skip
            assert r.status == 202
            run_id = (await r.json())["run_id"]
        async with http.post(hook, json={"version": "7"}, headers={"X-Webhook-Secret": secret,
                                                                   "Idempotency-Key": "k1"}) as r:  # fmt: skip
            assert r.status == 202 and (await r.json())["run_id"] == run_id
        assert (await run_end(client, channel, run_id)).kind == 46005
        assert len(seen) == 2
        assert {s["headers"]["Idempotency-Key"] for s in seen} == {f"{run_id}:call"}
        assert seen[0]["headers"]["X-Version"] == "7" and json.loads(seen[0]["body"]) == {"v": "7"}
        assert seen[0]["headers"]["Content-Type"] == "application/json"
        msgs = await wait_for(client, [{"kinds": [9], "#h": [channel]}], lambda evs: len(evs) == 1)
        assert msgs[0].content == "deployed true after 2"
        path = f"/workflows/{wid}/runs/{run_id}"
        auth = {"Authorization": build_auth_header(owner.secret, running.http_url + path, "GET")}
        async with http.get(running.http_url + path, headers=auth) as r:
            trace = (await r.json())["run"]["execution_trace"]
        assert [(s["step_id"], s["attempts"]) for s in trace if s["action"] == "call_webhook"] == [
            ("call", 2)
        ]
        answers = []
        for path, headers in ((f"/hooks/{wid}", {"X-Webhook-Secret": "wrong"}), (f"/hooks/{wid}", {}),
                              ("/hooks/00000000-0000-4000-8000-000000000000", {"X-Webhook-Secret": secret})):  # fmt: skip
            async with http.post(running.http_url + path, headers=headers) as r:
                answers.append((r.status, await r.read()))
        assert len(set(answers)) == 1 and answers[0][0] == 404
        async with http.post(f"{running.http_url}/hooks/not-a-uuid") as r:
            assert r.status == 400
        async with http.post(hook, data=b"[1]", headers={"X-Webhook-Secret": secret}) as r:
            assert r.status == 400


async def test_call_webhook_refuses_private_addresses_and_redirects(tmp_path: Path) -> None:
    owner = Identity.new()
    async with receiver([302]) as (url, seen):
        for settings, code_expected in ((Settings(), "call_webhook destination is not allowed"),
                                        (Settings(allow=Allow.parse("127.0.0.1")), "call_webhook returned HTTP 302")):  # fmt: skip
            data = tmp_path / str(len(code_expected))
            async with relay_on(data, workflows=settings) as running, running.client(owner) as client:
                channel = await create_channel(client, owner)
                wid, body = await save(
                    client,
                    owner,
                    channel,
                    DEPLOY.format(url=url).replace("retry: {max: 2, backoff: 1s}", "method: POST"),
                )
                async with aiohttp.ClientSession() as http, http.post(
                    f"{running.http_url}/hooks/{wid}", json={"version": "1"},
                    headers={"X-Webhook-Secret": body["webhook_secret"]}) as r:  # fmt: skip
                    run_id = (await r.json())["run_id"]
                end = await run_end(client, channel, run_id)
                content = json.loads(end.content)
                assert end.kind == 46006 and content["error_code"] == "webhook_failed"
                assert content["error_message"] == code_expected
        assert len(seen) == 1  # the redirect was not followed


async def test_call_webhook_needs_an_owner_or_admin(tmp_path: Path) -> None:
    owner, member = Identity.new(), Identity.new()
    async with relay_on(tmp_path) as running, running.client(owner) as client, running.client(member) as mc:
        channel = await create_channel(client, owner)
        await put_user(client, owner, channel, member.pubkey)
        yaml = DEPLOY.format(url="https://example.com/hook")
        result = await mc.publish(
            Event.create(
                member.secret, 30620, yaml, [["d", "0d9e8f7a-6b5c-4d3e-8f2a-1b0c9d8e7f6a"], ["h", channel]]
            )
        )
        assert (result.accepted, result.message) == (
            False, "restricted: workflows with call_webhook actions require the owner or admin role")  # fmt: skip
