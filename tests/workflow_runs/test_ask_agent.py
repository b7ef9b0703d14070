"""`ask_agent` (issue 28 item 3) as far as this branch's relay goes: the step posts a
relay-signed job request 43001 to an agent member (`@Name` resolved), waits durably, and a
deadline that passes publishes the engine's 43005 and fails the run with `job_timeout`; a human
member is refused. The agent's answer (43004 / 43006) needs the jobs relay rules of issue 27:
the end-to-end test of the answer belongs to whichever of the two branches lands second."""

from __future__ import annotations

import json
from pathlib import Path

from buzz.core.event import Event
from buzz.core.nip_oa import build_auth_tag
from buzz.workflows.host import Settings
from tests.support.relay import Identity, relay_on
from tests.workflow_runs.support import run_end, save, trigger, wait_for
from tests.workspace.helpers import accepted, create_channel, put_user


def ask(agent: str, timeout: str = "1h") -> str:
    return (f"name: Ask\ntrigger: {{on: webhook}}\nsteps:\n  - {{id: q, action: ask_agent, agent: '{agent}', "
            f"prompt: 'Summarise {{{{trigger.topic}}}}', timeout: {timeout}}}\n")  # fmt: skip


async def test_ask_agent_posts_a_job_and_times_out(tmp_path: Path) -> None:
    owner, agent, human = Identity.new(), Identity.new(), Identity.new()
    tag = build_auth_tag(owner.secret, agent.pubkey)
    async with (
        relay_on(tmp_path, workflows=Settings(tick_s=0.5)) as running,
        running.client(owner) as client,
        running.client(agent, auth_tags=[tag]) as ac,
        running.client(human) as hc,
    ):
        channel = await create_channel(client, owner)
        await put_user(client, owner, channel, agent.pubkey, "bot")
        await put_user(client, owner, channel, human.pubkey)
        await accepted(ac, Event.create(agent.secret, 0, json.dumps({"name": "Helper"})))
        await accepted(hc, Event.create(human.secret, 0, json.dumps({"name": "Person"})))
        wid, _ = await save(client, owner, channel, ask("@Helper", "2s"))
        run_id = await trigger(client, owner, wid, {"topic": "the outage"})
        jobs = await wait_for(ac, [{"kinds": [43001], "#p": [agent.pubkey]}], lambda evs: len(evs) == 1)
        body = json.loads(jobs[0].content)
        assert jobs[0].pubkey == running.relay.pubkey and body["prompt"] == "Summarise the outage"
        assert body["source"] == {"type": "workflow", "workflow_id": wid, "run_id": run_id, "step_id": "q"}
        end = await run_end(client, channel, run_id)
        assert json.loads(end.content)["error_code"] == "job_timeout"
        cancels = await client.query([{"kinds": [43005], "#e": [jobs[0].id]}])
        assert [json.loads(c.content)["reason"] for c in cancels] == ["timeout"]
        human_wid, _ = await save(client, owner, channel, ask("@Person"))
        end = await run_end(client, channel, await trigger(client, owner, human_wid, {"topic": "x"}))
        assert json.loads(end.content)["error_code"] == "action_failed"
