"""Browser: the inbox and notifications (issue 29 items 3, 4 and 11)."""

from __future__ import annotations

from buzz.client.dms import dm_channel_from
from buzz.core.event import Event
from tests.agent.support import add_member, create_channel, set_profile
from tests.support.relay import Identity, RunningRelay
from tests.web.browser import LiveScenario, assert_all_passed, require_browser

CHECKS = [
    "the Inbox link counts what waits: a mention, a DM, a reply in my thread",
    "an item opens in its context (a thread reply in its thread)",
    "Mark done removes an item, also after a reload",
    "a new mention arrives in the inbox live",
    '"Notifications" per channel: all, then muted',
    "screenshots: the inbox at phone width",
]


async def test_inbox_and_notifications(sqlite_relay: RunningRelay, alice: Identity, bob: Identity) -> None:
    require_browser()
    async with sqlite_relay.client(alice) as a, sqlite_relay.client(bob) as b:
        await set_profile(a, alice, "Alice")
        await set_profile(b, bob, "Bob")
        general = await create_channel(a, alice, "general")
        random = await create_channel(a, alice, "random")
        await add_member(a, alice, general, bob.pubkey)
        question = Event.create(alice.secret, 9, "my question", [["h", general]])
        assert (await a.publish(question)).accepted

        async def post(text: str, channel: str = general, *tags: list[str]) -> None:
            assert (await b.publish(Event.create(bob.secret, 9, text, [["h", channel], *tags]))).accepted

        await post("@Alice look at this", general, ["p", alice.pubkey])
        await post("an answer in your thread", general, ["e", question.id, "", "reply"])
        await post("not for Alice")
        dm = dm_channel_from(
            (await b.publish(Event.create(bob.secret, 41010, "", [["p", alice.pubkey]]))).message
        )
        await post("psst in a DM", dm)
        page = await LiveScenario.start(
            "inbox", {"url": sqlite_relay.http_url + "/", "secret": alice.secret, "random": random}
        )
        try:
            await page.reached("mention again")
            await post("@Alice once more", general, ["p", alice.pubkey])
            page.go("mentioned")
            await page.reached("level all")
            await post("a plain message")
            page.go("plain posted")
            await page.reached("muted")
            await post("a message while muted")
            page.go("muted posted")
            report = await page.report()
        finally:
            await page.abort()
    assert_all_passed(report, CHECKS)
