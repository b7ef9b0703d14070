"""Browser: catching up in a channel (issue 29 items 1 and 11) — the "New messages" divider,
"Jump to first unread", "Jump to latest" with the count of what arrived, and mention and DM
badges apart from plain unread."""

from __future__ import annotations

import time

from buzz.client.dms import dm_channel_from
from buzz.core.event import Event
from tests.agent.support import add_member, create_channel, set_profile
from tests.support.relay import Identity, RunningRelay
from tests.web.browser import LiveScenario, assert_all_passed, require_browser

CHECKS = [
    "unread, mention and DM badges are distinct descriptions of the links",
    'the channel opens at the first unread message under "New messages"',
    '"Jump to first unread" goes back to the divider',
    'scrolled up, new messages show on "Jump to latest", which goes to the bottom',
    "screenshots: the divider at phone width",
]


async def test_catching_up(sqlite_relay: RunningRelay, alice: Identity, bob: Identity) -> None:
    require_browser()
    start = int(time.time()) - 200
    async with sqlite_relay.client(alice) as a, sqlite_relay.client(bob) as b:
        await set_profile(a, alice, "Alice")
        await set_profile(b, bob, "Bob")
        general = await create_channel(a, alice, "general")
        random = await create_channel(a, alice, "random")
        await add_member(a, alice, general, bob.pubkey)
        for i in range(30):
            assert (
                await b.publish(Event.create(bob.secret, 9, f"old {i:02d}", [["h", general]], start + i))
            ).accepted
        page = await LiveScenario.start(
            "catchup", {"url": sqlite_relay.http_url + "/", "secret": alice.secret, "random": random}
        )
        try:
            await page.reached("read")
            later = start + 100
            for i in range(60):
                tags = [["h", general]] + ([["p", alice.pubkey]] if i == 59 else [])
                event = Event.create(bob.secret, 9, f"new {i:02d}", tags, later + i)
                assert (await b.publish(event)).accepted
            opened = await b.publish(Event.create(bob.secret, 41010, "", [["p", alice.pubkey]]))
            dm = dm_channel_from(opened.message)
            assert (await b.publish(Event.create(bob.secret, 9, "psst", [["h", dm]]))).accepted
            page.go("posted")
            await page.reached("scrolled up")
            for text in ("live 1", "live 2"):
                assert (await b.publish(Event.create(bob.secret, 9, text, [["h", general]]))).accepted
            page.go("more")
            await page.reached("away")
            # A second apart (as people write), after the marker's second.
            then = int(time.time()) + 1
            for i in range(8):
                text = (
                    f"later {i}: the build is green again"
                    if i % 2
                    else f"later {i}: who is looking at the deploy?"
                )
                later_event = Event.create(bob.secret, 9, text, [["h", general]], then + i)
                assert (await b.publish(later_event)).accepted
            page.go("later")
            report = await page.report()
        finally:
            await page.abort()
    assert_all_passed(report, CHECKS)
