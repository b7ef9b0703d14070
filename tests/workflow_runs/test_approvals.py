"""Approvals end to end (issue 28 item 4): 46010 to the approvers, grant/deny by `d` or `e`,
approver specs, refusals, double grant, expiry."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from buzz.core.event import Event
from buzz.workflows.host import Settings
from tests.support.relay import Identity, relay_on
from tests.workflow_runs.support import run_end, run_tag, save, trigger, wait_for
from tests.workspace.helpers import create_channel, put_user


def approval_yaml(spec: str, timeout: str = "1h") -> str:
    return f"""name: Deploy
trigger: {{on: webhook}}
steps:
  - {{id: ok, action: request_approval, from: "{spec}", message: "Ship {{{{trigger.version}}}}?", timeout: {timeout}}}
  - {{id: after, action: send_message, text: "approved by {{{{steps.ok.output.approver}}}}: {{{{steps.ok.output.note}}}}"}}
"""


async def _request(client, channel: str, run_id: str) -> Event:  # type: ignore[no-untyped-def]
    events = await wait_for(client, [{"kinds": [46010], "#h": [channel]}],
                            lambda evs: any(run_tag(e) == run_id for e in evs))  # fmt: skip
    return next(e for e in events if run_tag(e) == run_id)


async def test_grant_by_d_and_by_e_resume_the_runs(tmp_path: Path) -> None:
    owner, admin, member = Identity.new(), Identity.new(), Identity.new()
    async with (
        relay_on(tmp_path) as running,
        running.client(owner) as client,
        running.client(admin) as ac,
        running.client(member) as mc,
    ):
        channel = await create_channel(client, owner)
        await put_user(client, owner, channel, admin.pubkey, "admin")
        await put_user(client, owner, channel, member.pubkey)
        wid, _ = await save(client, owner, channel, approval_yaml("role:admin"))
        run1 = await trigger(client, owner, wid, {"version": "1.2"})
        request = await _request(client, channel, run1)
        body = json.loads(request.content)
        assert body["message"] == "Ship 1.2?" and body["approver_spec"] == "role:admin"
        assert {t[1] for t in request.tags if t[0] == "p"} == {owner.pubkey, admin.pubkey}
        ref = next(t[1] for t in request.tags if t[0] == "d")
        no = await mc.publish(Event.create(member.secret, 46030, "", [["d", ref]]))
        assert (no.accepted, no.message) == (False, "restricted: not the designated approver")
        unknown = await ac.publish(Event.create(admin.secret, 46030, "", [["d", "0" * 64]]))
        assert (unknown.accepted, unknown.message) == (False, "invalid: approval not found")
        yes = await ac.publish(Event.create(admin.secret, 46030, "lgtm", [["d", ref]]))
        assert yes.accepted, yes.message
        again = await ac.publish(Event.create(admin.secret, 46030, "again", [["d", ref]]))
        assert (again.accepted, again.message) == (False, "invalid: approval already granted")
        assert (await run_end(client, channel, run1)).kind == 46005
        msgs = await client.query([{"kinds": [9], "#h": [channel], "authors": [running.relay.pubkey]}])
        assert [m.content for m in msgs] == [f"approved by {admin.pubkey}: lgtm"]
        granted = await client.query([{"kinds": [46011], "#d": [ref]}])
        assert len(granted) == 1 and json.loads(granted[0].content)["decision"] == "granted"
        # the second run's 46010 named by `e`, granted by the owner (an owner holds role:admin)
        run2 = await trigger(client, owner, wid, {"version": "1.3"})
        request2 = await _request(client, channel, run2)
        assert (await client.publish(Event.create(owner.secret, 46030, "", [["e", request2.id]]))).accepted
        assert (await run_end(client, channel, run2)).kind == 46005


async def test_deny_cancels_and_two_racing_grants_one_wins(tmp_path: Path) -> None:
    owner, a, b = Identity.new(), Identity.new(), Identity.new()
    async with relay_on(tmp_path) as running, running.client(owner) as client, running.client(a) as ac, \
            running.client(b) as bc:  # fmt: skip
        channel = await create_channel(client, owner)
        await put_user(client, owner, channel, a.pubkey)
        await put_user(client, owner, channel, b.pubkey)
        wid, _ = await save(client, owner, channel, approval_yaml(f"{a.pubkey},{b.pubkey}"))
        run1 = await trigger(client, owner, wid, {"version": "9"})
        ref = next(t[1] for t in (await _request(client, channel, run1)).tags if t[0] == "d")
        deny = await ac.publish(Event.create(a.secret, 46031, "no", [["d", ref]]))
        assert deny.accepted, deny.message
        end = await run_end(client, channel, run1)
        assert end.kind == 46007 and json.loads(end.content)["reason"] == "approval_denied"
        assert [
            json.loads(e.content)["decision"] for e in await client.query([{"kinds": [46012], "#d": [ref]}])
        ] == ["denied"]
        run2 = await trigger(client, owner, wid, {"version": "10"})
        ref2 = next(t[1] for t in (await _request(client, channel, run2)).tags if t[0] == "d")
        results = await asyncio.gather(
            ac.publish(Event.create(a.secret, 46030, "", [["d", ref2]])),
            bc.publish(Event.create(b.secret, 46030, "", [["d", ref2]])),
        )
        assert sorted(r.accepted for r in results) == [False, True]
        loser = next(r for r in results if not r.accepted)
        assert loser.message in (
            "invalid: approval already acted on (race)",
            "invalid: approval already granted",
        )
        assert (await run_end(client, channel, run2)).kind == 46005


async def test_an_expired_approval_fails_the_run(tmp_path: Path) -> None:
    owner = Identity.new()
    async with relay_on(tmp_path, workflows=Settings(tick_s=0.5)) as running, running.client(owner) as client:
        channel = await create_channel(client, owner)
        wid, _ = await save(client, owner, channel, approval_yaml("any", "1s"))
        run_id = await trigger(client, owner, wid, {"version": "1"})
        ref = next(t[1] for t in (await _request(client, channel, run_id)).tags if t[0] == "d")
        end = await run_end(client, channel, run_id)
        assert end.kind == 46006 and json.loads(end.content)["error_code"] == "approval_expired"
        decided = await client.query([{"kinds": [46012], "#d": [ref]}])
        assert json.loads(decided[0].content)["decision"] == "expired"
        late = await client.publish(Event.create(owner.secret, 46030, "", [["d", ref]]))
        assert (late.accepted, late.message) == (False, "invalid: approval already expired")
