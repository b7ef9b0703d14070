"""Triggers and actions end to end on a real relay (issue 28 items 2, 3, 5)."""

from __future__ import annotations

import json
from pathlib import Path

from buzz.core.event import Event
from tests.support.relay import Identity, relay_on
from tests.workflow_runs.support import LIFECYCLE, run_end, run_tag, save, trigger, wait_for
from tests.workspace.helpers import accepted, create_channel, message, put_user

SENDS_TWO = """name: Two
trigger: {on: message_posted, filter: 'str_contains(trigger_text, "deploy")'}
steps:
  - {id: first, action: send_message, text: "Saw {{trigger.text}} from {{trigger.author | npub}}"}
  - {id: second, action: send_message, text: "done: {{steps.first.output.event_id}}", reply_in_thread: true}
"""


async def test_message_posted_runs_two_steps_with_lifecycle(tmp_path: Path) -> None:
    owner = Identity.new()
    async with relay_on(tmp_path) as running, running.client(owner) as client:
        channel = await create_channel(client, owner)
        wid, body = await save(client, owner, channel, SENDS_TWO)
        assert body == {"workflow_id": wid}
        await message(client, owner, channel, "nothing to see")
        posted = await message(client, owner, channel, "please deploy now")
        msgs = await wait_for(client, [{"kinds": [9], "#h": [channel], "authors": [running.relay.pubkey]}],
                              lambda evs: len(evs) == 2)  # fmt: skip
        first = next(e for e in msgs if e.content.startswith("Saw"))
        second = next(e for e in msgs if e.content.startswith("done"))
        assert second.content == f"done: {first.id}"
        tags = [list(t) for t in first.tags]
        assert (
            tags[0] == ["h", channel]
            and ["actor", owner.pubkey] in tags
            and ["buzz:workflow", "true"] in tags
        )
        assert ["p", owner.pubkey] not in tags
        assert ["e", posted.id, "", "reply"] in [list(t) for t in second.tags]
        runs = {run_tag(e) for e in await client.query([{"kinds": [46001], "#h": [channel]}])}
        assert len(runs) == 1  # the engine's own messages never trigger (loop guard)
        end = await run_end(client, channel, runs.pop())
        assert end.kind == 46005
        life = await client.query([{"kinds": LIFECYCLE, "#d": [wid]}])
        seqs = sorted(json.loads(e.content)["seq"] for e in life)
        assert seqs == list(range(1, len(life) + 1))
        assert sorted(e.kind for e in life) == [46001, 46002, 46002, 46003, 46003, 46005]


async def test_manual_trigger_inputs_and_refusals(tmp_path: Path) -> None:
    owner, other = Identity.new(), Identity.new()
    yaml = "name: M\ntrigger: {on: webhook}\nsteps:\n  - {id: s, action: send_message, text: 'hi {{trigger.who}}'}\n"
    async with relay_on(tmp_path) as running, running.client(owner) as client, running.client(other) as oc:
        channel = await create_channel(client, owner)
        await put_user(client, owner, channel, other.pubkey)
        wid, body = await save(client, owner, channel, yaml)
        assert set(body) == {"workflow_id", "webhook_secret"}
        run_id = await trigger(client, owner, wid, {"who": "Ann"})
        assert (await run_end(client, channel, run_id)).kind == 46005
        msgs = await client.query([{"kinds": [9], "#h": [channel], "authors": [running.relay.pubkey]}])
        assert [m.content for m in msgs] == ["hi Ann"]
        refused = await oc.publish(Event.create(other.secret, 46020, "", [["d", wid]]))
        assert (refused.accepted, refused.message) == (
            False,
            "restricted: only the workflow owner may trigger it",
        )
        bad = await client.publish(Event.create(owner.secret, 46020, "[1]", [["d", wid]]))
        assert (bad.accepted, bad.message) == (False, "invalid: trigger inputs must be a JSON object")


async def test_delay_and_reaction_and_topic(tmp_path: Path) -> None:
    owner = Identity.new()
    yaml = """name: R
trigger: {on: reaction_added, emoji: "👍"}
steps:
  - {id: wait, action: delay, duration: 1}
  - {id: react, action: add_reaction, emoji: "✅"}
  - {id: topic, action: set_channel_topic, topic: "last: {{trigger.emoji}}"}
"""
    async with relay_on(tmp_path) as running, running.client(owner) as client:
        channel = await create_channel(client, owner)
        await save(client, owner, channel, yaml)
        posted = await message(client, owner, channel, "ship it")
        await accepted(client, Event.create(owner.secret, 7, "👎", [["e", posted.id], ["h", channel]]))
        await accepted(client, Event.create(owner.secret, 7, "👍", [["e", posted.id], ["h", channel]]))
        runs = await wait_for(client, [{"kinds": [46001], "#h": [channel]}], lambda evs: len(evs) >= 1)
        end = await run_end(client, channel, run_tag(runs[0]) or "")
        assert end.kind == 46005, end.content
        assert len(runs) == 1
        reactions = await client.query([{"kinds": [7], "#e": [posted.id], "authors": [running.relay.pubkey]}])
        assert [r.content for r in reactions] == ["✅"]
        state = await client.query([{"kinds": [39000], "#d": [channel]}])
        assert ["topic", "last: 👍"] in [list(t) for t in state[0].tags]
