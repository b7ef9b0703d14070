"""A workflow's `ask_agent` is a job like any other (issue 27 item 6, carried here as the branch
that landed second): its relay-signed 43001 opens the job, the agent accepts and answers through
the relay's job rules, and the run resumes on the 43004; a cancel of the workflow's own job
(its timeout) ends the job for the agent too."""

from __future__ import annotations

import json
from pathlib import Path

from buzz.core.event import Event
from buzz.core.nip_oa import build_auth_tag
from buzz.jobs import build
from buzz.workflows.host import Settings
from tests.support.relay import Identity, relay_on
from tests.workflow_runs.support import run_end, save, trigger, wait_for
from tests.workspace.helpers import accepted, create_channel, put_user


def ask(timeout: str) -> str:
    return (
        "name: Ask\ntrigger: {on: webhook}\nsteps:\n"
        f"  - {{id: q, action: ask_agent, agent: '@Helper', prompt: 'Summarise {{{{trigger.topic}}}}', timeout: {timeout}}}\n"
    )


async def test_ask_agent_resumes_on_the_agents_result(tmp_path: Path) -> None:
    owner, agent = Identity.new(), Identity.new()
    tag = build_auth_tag(owner.secret, agent.pubkey)
    async with (
        relay_on(tmp_path, workflows=Settings(tick_s=0.5)) as running,
        running.client(owner) as client,
        running.client(agent, auth_tags=[tag]) as ac,
    ):
        channel = await create_channel(client, owner)
        await put_user(client, owner, channel, agent.pubkey, "bot")
        await accepted(ac, Event.create(agent.secret, 0, json.dumps({"name": "Helper"}), [tag]))
        wid, _ = await save(client, owner, channel, ask("1h"))
        run_id = await trigger(client, owner, wid, {"topic": "the outage"})
        (job,) = await wait_for(
            ac, [{"kinds": [43001], "#h": [channel], "#p": [agent.pubkey]}], lambda evs: len(evs) == 1
        )
        row = await running.relay.store.get_job(job.id)
        assert row is not None and (row.requester, row.state) == (
            owner.pubkey,
            "requested",
        )  # the workflow's owner
        await accepted(ac, Event.create(agent.secret, *_parts(build.accepted(channel, job.id))))
        manifest = {
            "schemaVersion": 1,
            "jobRequest": job.id,
            "requestedOutcome": "Summarise the outage",
            "outcome": "the database ran out of disk",
            "disposition": "no_artifact",
        }
        await accepted(
            ac, Event.create(agent.secret, *_parts(build.result(channel, job.id, owner.pubkey, manifest)))
        )
        end = await run_end(client, channel, run_id)
        assert end.kind == 46005, end.content
        assert (await running.relay.store.get_job(job.id)).state == "completed"  # type: ignore[union-attr]

        # the workflow stops waiting (timeout): its relay-signed 43005 ends the job for the agent
        wid2, _ = await save(client, owner, channel, ask("2s"))
        run2 = await trigger(client, owner, wid2, {"topic": "x"})
        jobs = await wait_for(
            ac, [{"kinds": [43001], "#h": [channel], "#p": [agent.pubkey]}], lambda evs: len(evs) == 2
        )
        second = next(e for e in jobs if e.id != job.id)
        assert json.loads((await run_end(client, channel, run2)).content)["error_code"] == "job_timeout"
        assert (await running.relay.store.get_job(second.id)).state == "cancelled"  # type: ignore[union-attr]
        late = await ac.publish(Event.create(agent.secret, *_parts(build.accepted(channel, second.id))))
        assert (late.accepted, late.message) == (False, "invalid: job is cancelled")


def _parts(t: build.Template) -> tuple[int, str, tuple[tuple[str, ...], ...]]:
    return t.kind, t.content, t.tags
