"""`buzz workflows` as a newcomer met it: a saved `@Name` that pings nobody is said (the JSON
`warnings`), `approve` names what it approved, and a relay refusal carries its NIP-01 prefix
as `refusal` beside the spec's category (docs/decisions.md 152)."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from tests.agent.support import add_member, create_channel, set_profile
from tests.cli.helpers import buzz
from tests.support.relay import Identity, relay_on
from tests.workflow_runs.support import run_end, wait_for

SAY = """name: Nudge
trigger: {on: webhook}
steps:
  - {id: say, action: send_message, text: "@Bob and @Helper: mail me at a@b.example, not @{{trigger.who}}"}
"""
GATE = """name: Gate
trigger: {on: webhook}
steps:
  - {id: ok, action: request_approval, from: any, message: "go?"}
"""


async def _next_second() -> None:
    started = int(time.time())
    while int(time.time()) == started:
        await asyncio.sleep(0.05)


async def test_a_mention_of_no_member_is_a_warning(tmp_path: Path) -> None:
    owner, bob, outsider = Identity.new(), Identity.new(), Identity.new()
    async with relay_on(tmp_path) as running, running.client(owner) as client:
        await set_profile(client, owner, "Olivia")
        async with running.client(bob) as b:
            await set_profile(b, bob, "Bob")
        async with running.client(outsider) as o:
            await set_profile(o, outsider, "Helper")  # a profile, but not in the channel
        channel = await create_channel(client, owner, "general")
        await add_member(client, owner, channel, bob.pubkey)
        created = (await buzz(running.url, owner, "workflows", "create", "--channel", channel, "--yaml", "-",
                              stdin=SAY.encode())).json  # fmt: skip
        assert created["workflow_id"] and created["warnings"] == [
            "steps[0].text: @Helper is not a member of the channel (or names two), so it will not be pinged"
        ]
        fixed = SAY.replace("@Helper", "@Olivia")
        await _next_second()  # a new version of a definition needs a later created_at
        updated = (await buzz(running.url, owner, "workflows", "update", "--workflow", created["workflow_id"],
                              "--yaml", "-", stdin=fixed.encode())).json  # fmt: skip
        assert updated["warnings"] == []
        await add_member(client, owner, channel, outsider.pubkey)
        again = (await buzz(running.url, owner, "workflows", "create", "--channel", channel, "--yaml", "-",
                            stdin=SAY.encode())).json  # fmt: skip
        assert again["warnings"] == []  # Helper is a member now


async def test_approve_names_the_run_step_and_workflow(tmp_path: Path) -> None:
    owner = Identity.new()
    async with relay_on(tmp_path) as running, running.client(owner) as client:
        url = running.url
        channel = await create_channel(client, owner, "ops")
        wid = (await buzz(url, owner, "workflows", "create", "--channel", channel, "--yaml", "-",
                          stdin=GATE.encode())).json["workflow_id"]  # fmt: skip
        run_id = (await buzz(url, owner, "workflows", "trigger", "--workflow", wid)).json["run_id"]
        (request,) = await wait_for(client, [{"kinds": [46010], "#h": [channel]}], lambda evs: len(evs) == 1)
        approved = (await buzz(url, owner, "workflows", "approve", "--approval", request.id)).json
        reference = next(t[1] for t in request.tags if t[0] == "d")
        assert {
            k: approved[k] for k in ("decision", "workflow_id", "workflow_name", "run_id", "step_id")
        } == {
            "decision": "granted",
            "workflow_id": wid,
            "workflow_name": "Gate",
            "run_id": run_id,
            "step_id": "ok",
        }
        assert (approved["approval_ref"], approved["request_event_id"]) == (reference, request.id)
        assert approved["summary"] == f"granted step ok of run {run_id} of workflow Gate"
        assert (await run_end(client, channel, run_id)).kind == 46005

        # a refusal names its NIP-01 prefix: deciding it again is `invalid:` (exit 4, `error`)
        twice = await buzz(url, owner, "workflows", "deny", "--approval", request.id)
        assert twice.code == 4
        assert twice.error["error"] == "error" and twice.error["refusal"] == "invalid", twice.error
        assert twice.error["relay_message"].startswith("invalid: ") and twice.error["hint"]

        # `restricted:` for a stranger's write into the channel
        stranger, private = Identity.new(), await create_channel(client, owner, "board", "private")
        refused = await buzz(url, stranger, "messages", "send", "--channel", private, "--content", "hi")
        assert refused.code == 4 and refused.error["refusal"] == "restricted", refused.error
