"""Browser: group DMs with people and agents (issue 29 item 8) — "New message" picks several
people and an agent, the relay opens the one DM of that set, and every participant, and
nobody else, reads what is written there."""

from __future__ import annotations

from buzz.core.event import Event
from buzz.core.nip_oa import build_auth_tag
from tests.agent.support import add_member, create_channel, set_profile
from tests.support.relay import Identity, RunningRelay
from tests.web.browser import assert_all_passed, require_browser, run_scenario

CHECKS = [
    "New message lists people and agents, marked",
    "choosing two people and an agent opens one conversation named after them",
    "the same set again reuses the conversation",
]


async def test_group_dm(sqlite_relay: RunningRelay, alice: Identity, bob: Identity, carol: Identity) -> None:
    require_browser()
    agent, outsider = Identity.new(), Identity.new()
    async with sqlite_relay.client(alice) as a:
        await set_profile(a, alice, "Alice")
        general = await create_channel(a, alice, "general")
        for who, name in ((bob, "Bob"), (carol, "Carol"), (outsider, "Oscar")):
            async with sqlite_relay.client(who) as c:
                await set_profile(c, who, name)
            await add_member(a, alice, general, who.pubkey)
        tag = build_auth_tag(alice.secret, agent.pubkey)
        async with sqlite_relay.client(agent, auth_tags=[tag]) as c:
            await set_profile(c, agent, "Rulesbot", list(tag))
        await add_member(a, alice, general, agent.pubkey)
        for who in (bob, carol, outsider, agent):  # authors seen in the channel: profiles known
            async with sqlite_relay.client(who) as c:
                assert (await c.publish(Event.create(who.secret, 9, "here", [["h", general]]))).accepted
    report = await run_scenario("groupdm", {"url": sqlite_relay.http_url + "/", "secret": alice.secret})
    assert_all_passed(report, CHECKS)
    async with sqlite_relay.client(carol) as c, sqlite_relay.client(outsider) as o:
        said = [{"kinds": [9], "search": "hello all three"}]
        assert [e.content for e in await c.query(said)] == ["hello all three"]
        assert await o.query(said) == []  # not a participant: nothing
