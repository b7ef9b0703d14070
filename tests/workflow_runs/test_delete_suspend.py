"""Deleting and suspending workflows (issue 28 items 1 and 8, workflows.md §6.6–§6.7), on both
backends: a channel owner or admin deletes a member's workflow and a plain member is refused;
the deletion cancels the unfinished runs in its own transaction (their 46007s are stored when
its OK arrives, and a delay that ends later posts nothing); an owner who leaves the channel
suspends their workflows until they save one again."""

from __future__ import annotations

import json
from typing import Any

import aiohttp

from buzz.core.event import Event
from buzz.core.nip98 import build_auth_header
from tests.support.relay import Identity, RunningRelay
from tests.workflow_runs.support import run_end, run_tag, save, trigger, wait_for
from tests.workspace.helpers import accepted, create_channel, put_user

NAP = "name: Nap\ntrigger: {on: webhook}\nsteps:\n  - {id: nap, action: delay, duration: %d}\n" \
      "  - {id: after, action: send_message, text: '%s'}\n"  # fmt: skip
ASK = ("name: Ask\ntrigger: {on: webhook}\nsteps:\n"
       "  - {id: ok, action: request_approval, from: any, message: 'go?', timeout: 1h}\n"
       "  - {id: after, action: send_message, text: 'approved'}\n")  # fmt: skip


def _delete(who: Identity, owner: str, wid: str, channel: str) -> Event:
    return Event.create(who.secret, 5, "", [["a", f"30620:{owner}:{wid}"], ["k", "30620"], ["h", channel]])


async def _hook(http: aiohttp.ClientSession, base: str, wid: str, secret: str) -> int:
    async with http.post(f"{base}/hooks/{wid}", data=b"{}", headers={"X-Webhook-Secret": secret}) as r:
        return r.status


async def _get(http: aiohttp.ClientSession, base: str, path: str, who: Identity) -> tuple[int, Any]:
    headers = {"Authorization": build_auth_header(who.secret, base + path, "GET")}
    async with http.get(base + path, headers=headers) as r:
        return r.status, await r.json()


async def test_an_admin_deletes_a_members_workflow_and_its_runs_end_with_the_ok(relay: RunningRelay) -> None:
    boss, admin, author, member = Identity.new(), Identity.new(), Identity.new(), Identity.new()
    async with relay.client(boss) as bc, relay.client(admin) as ac, relay.client(author) as wc, \
            relay.client(member) as mc:  # fmt: skip
        channel = await create_channel(bc, boss)
        await put_user(bc, boss, channel, admin.pubkey, "admin")
        for who in (author, member):
            await put_user(bc, boss, channel, who.pubkey)
        # 15 s: the deletes below must come while it sleeps, also on a loaded box (1 s did not)
        nap, _ = await save(wc, author, channel, NAP % (15, "woke"))
        ask, _ = await save(wc, author, channel, ASK)
        napping, asking = await trigger(wc, author, nap), await trigger(wc, author, ask)
        await wait_for(wc, [{"kinds": [46002], "#h": [channel]}],
                       lambda evs: {run_tag(e) for e in evs} >= {napping})  # fmt: skip
        await wait_for(
            wc, [{"kinds": [46010], "#h": [channel]}], lambda evs: any(run_tag(e) == asking for e in evs)
        )

        refused = await mc.publish(_delete(member, author.pubkey, nap, channel))
        assert not refused.accepted and refused.message.startswith("restricted: "), refused.message
        assert await wc.query([{"kinds": [30620], "#d": [nap]}]) != []

        await accepted(ac, _delete(admin, author.pubkey, nap, channel))  # before the delay ends
        await accepted(bc, _delete(boss, author.pubkey, ask, channel))
        ended = {run_tag(e): e for e in await wc.query([{"kinds": [46007], "#h": [channel]}])}
        assert set(ended) == {napping, asking}  # stored by the deletions' own transactions
        assert json.loads(ended[napping].content)["reason"] == "workflow_deleted"
        assert json.loads(ended[napping].content)["cancelled_by"] == admin.pubkey
        assert await wc.query([{"kinds": [30620], "#d": [nap, ask]}]) == []

        grant = await bc.publish(Event.create(boss.secret, 46030, "", [["e", (await wc.query(
            [{"kinds": [46010], "#h": [channel]}]))[0].id]]))  # fmt: skip
        assert not grant.accepted, grant.message

        # A later workflow's longer delay ends after the deleted run's would have: nothing woke.
        later, _ = await save(wc, author, channel, NAP % (16, "later"))
        await run_end(wc, channel, await trigger(wc, author, later), timeout=90)
        texts = [e.content for e in await wc.query([{"kinds": [9], "#h": [channel]}])]
        assert "later" in texts and "woke" not in texts and "approved" not in texts


async def test_an_owner_who_leaves_suspends_the_workflow_until_they_save_it(relay: RunningRelay) -> None:
    boss, author = Identity.new(), Identity.new()
    yaml = "name: Hook\ntrigger: {on: webhook}\nsteps:\n  - {id: s, action: send_message, text: hi}\n"
    async with relay.client(boss) as bc, relay.client(author) as wc, aiohttp.ClientSession() as http:
        channel = await create_channel(bc, boss)
        await put_user(bc, boss, channel, author.pubkey)
        wid, body = await save(wc, author, channel, yaml)
        secret = body["webhook_secret"]
        assert await _hook(http, relay.http_url, wid, secret) == 202

        removal = Event.create(boss.secret, 9001, "", [["h", channel], ["p", author.pubkey]])
        await accepted(bc, removal)
        status, shown = await _get(http, relay.http_url, f"/workflows/{wid}", boss)
        assert status == 200, shown
        assert shown["workflow"]["status"] == "suspended", shown
        assert shown["workflow"]["status_reason"].startswith("owner_left: ")
        assert shown["workflow"]["effectively_enabled"] is False

        back = Event.create(
            boss.secret, 9000, "", [["h", channel], ["p", author.pubkey]], removal.created_at + 1
        )
        await accepted(bc, back)  # a member again (dated after the removal), but still suspended
        assert await _hook(http, relay.http_url, wid, secret) == 404

        again = Event.create(
            author.secret, 30620, yaml + "# saved again\n", [["d", wid], ["h", channel]], back.created_at + 1
        )  # a newer version than the first save's
        await accepted(wc, again)
        assert await _hook(http, relay.http_url, wid, secret) == 202
        status, shown = await _get(http, relay.http_url, f"/workflows/{wid}", boss)
        assert shown["workflow"]["status"] == "active" and "status_reason" not in shown["workflow"]


async def test_a_moderation_delete_of_the_head_and_a_channel_deletion_delete_workflows(
    relay: RunningRelay,
) -> None:
    boss, author = Identity.new(), Identity.new()
    async with relay.client(boss) as bc, relay.client(author) as wc:
        channel = await create_channel(bc, boss)
        other = await create_channel(bc, boss, name="other")
        for c in (channel, other):
            await put_user(bc, boss, c, author.pubkey)
        moderated, _ = await save(wc, author, channel, ASK)
        kept, _ = await save(wc, author, other, ASK)
        runs = [await trigger(wc, author, moderated), await trigger(wc, author, kept)]
        await wait_for(wc, [{"kinds": [46010], "#h": [channel, other]}], lambda evs: len(evs) == 2)
        head = (await wc.query([{"kinds": [30620], "#d": [moderated]}]))[0]

        await accepted(bc, Event.create(boss.secret, 9005, "", [["h", channel], ["e", head.id]]))
        await accepted(bc, Event.create(boss.secret, 9008, "", [["h", other]]))
        store = relay.relay.workflows.store
        for wid, run_id in zip((moderated, kept), runs, strict=True):
            assert (await store.workflow(wid)).status == "deleted"
            row, _ = await store.workflow_run(run_id)
            assert (row.status, row.error_code) == ("cancelled", "workflow_deleted")
