"""The README's three workflow examples, as written (issue 28 item 11): each is a valid
definition; the stand-up reminder mentions the agent; the deploy approval waits for an admin and
then calls its hook (here the documented host does not resolve, so the call fails as
`webhook_failed`); the triage flow's `ask_agent` step needs the jobs protocol (issue 27)."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import aiohttp

from buzz.core.event import Event
from buzz.workflows.validate import validate
from tests.support.relay import Identity, relay_on
from tests.workflow_runs.support import run_end, save, trigger, wait_for
from tests.workspace.helpers import accepted, create_channel, put_user

README = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")


def example(name: str) -> str:
    match = re.search(rf"<!-- workflow-example: {name} -->\n```yaml\n(.*?)```", README, re.S)
    assert match is not None, name
    return match.group(1)


def test_the_three_examples_are_valid() -> None:
    for name in ("standup", "deploy", "triage"):
        report = validate(example(name), now=int(time.time()))
        assert report.errors == [], (name, report.errors)


async def test_the_standup_reminder_mentions_the_agent_and_the_deploy_waits_for_an_admin(
    tmp_path: Path,
) -> None:
    owner, helper = Identity.new(), Identity.new()
    async with relay_on(tmp_path) as running, running.client(owner) as client, running.client(helper) as hc:
        channel = await create_channel(client, owner)
        await put_user(client, owner, channel, helper.pubkey)
        await accepted(hc, Event.create(helper.secret, 0, json.dumps({"name": "Rulesbot"})))
        standup, _ = await save(client, owner, channel, example("standup"))
        assert (await run_end(client, channel, await trigger(client, owner, standup))).kind == 46005
        msgs = await client.query([{"kinds": [9], "#h": [channel]}])
        assert msgs[0].content.startswith("Stand-up time! @Rulesbot")
        assert ["p", helper.pubkey] in [list(t) for t in msgs[0].tags]
        deploy, body = await save(client, owner, channel, example("deploy"))
        async with aiohttp.ClientSession() as http, http.post(
            f"{running.http_url}/hooks/{deploy}", json={"version": "1.4.2"},
            headers={"X-Webhook-Secret": body["webhook_secret"]}) as r:  # fmt: skip
            run_id = (await r.json())["run_id"]
        requests = await wait_for(client, [{"kinds": [46010], "#h": [channel]}], lambda evs: len(evs) == 1)
        assert json.loads(requests[0].content)["message"] == "Deploy 1.4.2 to production?"
        assert (
            await client.publish(Event.create(owner.secret, 46030, "go", [["e", requests[0].id]]))
        ).accepted
        end = json.loads((await run_end(client, channel, run_id, timeout=60)).content)
        assert end["error_code"] == "webhook_failed" and end["failed_step"] == "deploy"
