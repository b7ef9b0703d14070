"""`buzz workflows` against a real relay (issue 28 item 9): JSON out, the exit-code table."""

from __future__ import annotations

import json
from pathlib import Path

from tests.cli.helpers import buzz
from tests.support.relay import Identity, relay_on
from tests.workflow_runs.support import run_end, wait_for
from tests.workspace.helpers import create_channel

GATE = """name: Gate
trigger: {on: webhook}
steps:
  - {id: ok, action: request_approval, from: any, message: "go?"}
  - {id: say, action: send_message, text: "went: {{trigger.v}}"}
"""


async def test_the_cli_creates_triggers_approves_and_reads_runs(tmp_path: Path) -> None:
    owner = Identity.new()
    async with relay_on(tmp_path) as running, running.client(owner) as client:
        url = running.url
        channel = await create_channel(client, owner)
        empty = await buzz(url, owner, "workflows", "create", "--channel", channel, "--yaml", "-", stdin=b"")
        assert empty.code == 1 and empty.error["error"] == "user_error"
        bad = await buzz(
            url, owner, "workflows", "create", "--channel", channel, "--yaml", "name: x\nsteps: []\n"
        )
        assert bad.code == 1 and "line" in bad.error["message"]
        nil = await buzz(url, owner, "workflows", "create", "--channel", "00000000-0000-0000-0000-000000000000",
                         "--yaml", "-", stdin=GATE.encode())  # fmt: skip
        assert nil.code == 1 and "the nil UUID names no channel" in nil.error["message"]
        created = (await buzz(url, owner, "workflows", "create", "--channel", channel, "--yaml", "-",
                              stdin=GATE.encode())).json  # fmt: skip
        wid = created["workflow_id"]
        assert created["webhook_secret"]
        listed = (await buzz(url, owner, "workflows", "list", "--channel", channel)).json
        assert [w["id"] for w in listed["workflows"]] == [wid]
        assert (
            await buzz(url, owner, "workflows", "trigger", "--workflow", wid, "--inputs", "[1]")
        ).code == 1
        run_id = (
            await buzz(url, owner, "workflows", "trigger", "--workflow", wid, "--inputs", '{"v": "1.4"}')
        ).json["run_id"]
        requests = await wait_for(client, [{"kinds": [46010], "#h": [channel]}], lambda evs: len(evs) == 1)
        detail = (await buzz(url, owner, "workflows", "run", "--workflow", wid, "--run", run_id)).json
        assert detail["run"]["status"] == "waiting_approval"
        ref = detail["approvals"][0]["approval_ref"]
        assert ref == next(t[1] for t in requests[0].tags if t[0] == "d")
        approved = (
            await buzz(url, owner, "workflows", "approve", "--approval", requests[0].id, "--note", "ok")
        ).json
        assert approved["decision"] == "granted"
        assert (await run_end(client, channel, run_id)).kind == 46005
        runs = (await buzz(url, owner, "workflows", "runs", "--workflow", wid)).json
        assert [r["id"] for r in runs["runs"]] == [run_id] and runs["runs"][0]["status"] == "completed"
        disabled = (await buzz(url, owner, "workflows", "disable", "--workflow", wid)).json
        assert disabled["enabled"] is False
        got = (await buzz(url, owner, "workflows", "get", "--workflow", wid)).json
        assert got["workflow"]["enabled"] is False and got["yaml"].startswith(GATE)
        refused = await buzz(url, owner, "workflows", "trigger", "--workflow", wid)
        assert refused.code == 4 and refused.error["relay_message"] == "invalid: workflow is disabled"
        deleted = (await buzz(url, owner, "workflows", "delete", "--workflow", wid)).json
        assert deleted["workflow_id"] == wid
        gone = await buzz(url, owner, "workflows", "get", "--workflow", wid)
        assert gone.code == 1 and gone.error["error"] == "not_found"
        assert json.loads(requests[0].content)["message"] == "go?"


async def test_mcp_trigger_workflow_returns_what_the_cli_returns(tmp_path: Path) -> None:
    from tests.mcp.session import mcp_server

    owner = Identity.new()
    async with relay_on(tmp_path) as running, running.client(owner) as client:
        channel = await create_channel(client, owner)
        async with mcp_server(running.url, owner) as server:
            created = await server.ok("create_workflow", {"channel_id": channel, "yaml": GATE.replace(
                "request_approval, from: any, message: \"go?\"", "send_message, text: hi")})  # fmt: skip
            wid = created["workflow_id"]
            started = await server.ok("trigger_workflow", {"workflow_id": wid, "inputs": {"v": "2"}})
            assert set(started) == {"run_id", "workflow_id", "event_id"} and started["workflow_id"] == wid
            assert (await run_end(client, channel, started["run_id"])).kind == 46005
            runs = await server.ok("list_workflow_runs", {"workflow_id": wid})
            assert [r["id"] for r in runs["runs"]] == [started["run_id"]]
