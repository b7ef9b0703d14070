"""Browser: a ~2,000-message channel in the windowed timeline (issue 29, decision 136) — it opens
at a first unread message 400 below the last read one, the jumps work, scrolling to the start
loads every page with the view held, and the messages in the DOM stay a bounded few."""

from __future__ import annotations

import asyncio
import time

from buzz.core.event import Event
from tests.agent.support import add_member, create_channel, set_profile
from tests.support.relay import Identity, RunningRelay
from tests.web.browser import LiveScenario, assert_all_passed, require_browser

OLD = 1500  # read before
NEW = 400  # unread: the opening loads back past them (at most 500 beyond the first page)
BOUND = 200  # message nodes in the DOM at once
CHECKS = [
    "the long channel opens at its first unread message, far below the last read one",
    '"Jump to latest" goes to the newest message',
    '"Jump to first unread" goes back to the divider, hundreds of messages up',
    "scrolling up to the start loads every older page with the view held, the DOM bounded",
    "back at the bottom, a new message is followed",
    "an edit in progress survives its message scrolled far out of view and back",
    "the messages in the DOM stay bounded",
]


async def publish_all(client, events: list[Event]) -> None:  # type: ignore[no-untyped-def]
    for i in range(0, len(events), 50):
        results = await asyncio.gather(*(client.publish(e) for e in events[i : i + 50]))
        assert all(r.accepted for r in results), [r.message for r in results if not r.accepted][:3]


def lines(secret: str, channel: str, prefix: str, n: int, start: int) -> list[Event]:
    # Four a second after the first (alone in its second: it is the first unread),  every seventh a few lines long: rows of different heights.
    out = []
    for i in range(n):
        text = f"{prefix} {i:04d}" + ("\nsecond line\nthird line" if i % 7 == 3 else "")
        out.append(Event.create(secret, 9, text, [["h", channel]], start + (i + 3) // 4))
    return out


async def test_a_long_channel_stays_windowed(
    sqlite_relay: RunningRelay, alice: Identity, bob: Identity
) -> None:
    require_browser()
    start = int(time.time()) - (OLD + NEW) // 4 - 60  # the relay takes ~10 minutes back
    async with sqlite_relay.client(alice) as a, sqlite_relay.client(bob) as b:
        await set_profile(a, alice, "Alice")
        await set_profile(b, bob, "Bob")
        channel = await create_channel(a, alice, "long")
        await create_channel(a, alice, "random")
        await add_member(a, alice, channel, bob.pubkey)
        await publish_all(b, lines(bob.secret, channel, "old", OLD, start))
        config = {
            "url": sqlite_relay.http_url + "/",
            "secret": alice.secret,
            "lastRead": f"old {OLD - 1:04d}",
            "firstUnread": f"new {0:04d}",
            "newest": f"new {NEW - 1:04d}",
            "oldest": "old 0000",
            "total": OLD + NEW,
            "unread": NEW,
            "bound": BOUND,
        }
        page = await LiveScenario.start("window", config)
        try:
            await page.reached("read")
            await publish_all(b, lines(bob.secret, channel, "new", NEW, start + OLD // 4 + 10))
            page.go("posted")
            await page.reached("bottom", timeout=600)
            assert (await b.publish(Event.create(bob.secret, 9, "live one", [["h", channel]]))).accepted
            page.go("live")
            report = await page.report(timeout=120)
        finally:
            await page.abort()
    assert_all_passed(report, CHECKS)
    print(f"messages in the DOM at most: {report['numbers']['maxArticles']} of {OLD + NEW + 1}")
    print(f"the badge when the relay had taken the {NEW} new ones: {report['numbers']['badgeWhenPosted']!r}")
