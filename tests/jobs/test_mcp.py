"""The MCP job tools (jobs spec §8, checklist item 41): the requester asks, the agent hands off
through `submit_job_result`, which runs the same validator as the CLI."""

from __future__ import annotations

from buzz.core.nip_oa import build_auth_tag
from tests.mcp.session import mcp_server
from tests.support.relay import Identity, RunningRelay
from tests.workspace.helpers import create_channel, put_user


async def test_jobs_through_mcp(sqlite_relay: RunningRelay, alice: Identity) -> None:
    owner, agent = Identity.new(), Identity.new()
    tag = build_auth_tag(owner.secret, agent.pubkey)
    async with sqlite_relay.client(alice) as c, sqlite_relay.client(agent, auth_tags=[tag]) as a:
        await a.count([{"kinds": [1], "authors": [agent.pubkey]}])
        channel = await create_channel(c, alice)
        await put_user(c, alice, channel, agent.pubkey)
    async with (
        mcp_server(sqlite_relay.url, alice) as asker,
        mcp_server(sqlite_relay.url, agent, auth_tag=tag) as worker,
    ):
        asked = await asker.ok(
            "request_job", {"channel_id": channel, "agent": agent.pubkey, "prompt": "list the TODOs"}
        )
        job = asked["job_id"]
        manifest = {
            "schemaVersion": 1,
            "jobRequest": job,
            "requestedOutcome": "list the TODOs",
            "outcome": "three TODOs",
            "disposition": "completed",
            "artifacts": [{"kind": "file", "label": "list", "reference": "~/todo.txt"}],
        }
        refused = await worker.error(
            "submit_job_result", {"channel_id": channel, "job_id": job, "manifest": manifest}
        )
        assert (
            refused["error"] == "user_error" and "artifact 1 reference is a local path" in refused["message"]
        )
        manifest["artifacts"] = [{"kind": "file", "label": "list", "reference": "docs/todo.md"}]
        done = await worker.ok(
            "submit_job_result", {"channel_id": channel, "job_id": job, "manifest": manifest}
        )
        assert done == {"event_id": done["event_id"], "job_id": job, "disposition": "completed"}
        shown = await asker.ok("get_job", {"job_id": job})
        assert shown["job"]["state"] == "completed" and shown["result"]["outcome"] == "three TODOs"
        listed = await asker.ok("list_jobs", {"channel_id": channel, "state": "completed"})
        assert [j["id"] for j in listed["jobs"]] == [job]
        second = (
            await asker.ok("request_job", {"channel_id": channel, "agent": agent.pubkey, "prompt": "again"})
        )["job_id"]
        assert (await asker.ok("cancel_job", {"job_id": second, "reason": "never mind"}))["job_id"] == second
        late = await worker.error(
            "submit_job_result",
            {"channel_id": channel, "job_id": second, "manifest": {**manifest, "jobRequest": second}},
        )
        assert late["relay_message"] == "invalid: job is cancelled"
