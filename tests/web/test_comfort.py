"""Browser: comfort (issue 29 items 8 and 11) — dark theme, Ctrl/Cmd+K "Jump to" (a DM named
so), Esc, ↑ edits, Enter / Esc in the edit box."""

from __future__ import annotations

import time

from buzz.core.event import Event
from tests.agent.support import add_member, create_channel, set_profile
from tests.support.relay import Identity, RunningRelay
from tests.web.browser import assert_all_passed, require_browser, run_scenario

CHECKS = [
    "the Dark theme switch turns the page dark and stays so after a reload",
    "a message's actions are pointer targets of 24 px at least (WCAG 2.5.8)",
    "with no choice made, the theme follows the system",
    'Ctrl+K opens "Jump to": a channel, then a person',
    '"Jump to" names a DM a direct message, not a channel',
    "Esc closes the side panel",
    "↑ in the empty box edits my last message",
    "in the edit box Enter saves, Shift+Enter breaks the line, Esc cancels",
    "a sign-in opens the channel last open in this browser, else a channel before a DM",
]


async def test_comfort(sqlite_relay: RunningRelay, alice: Identity, bob: Identity) -> None:
    require_browser()
    async with sqlite_relay.client(alice) as a, sqlite_relay.client(bob) as b:
        await set_profile(a, alice, "Alice")
        await set_profile(b, bob, "Bob")
        general = await create_channel(a, alice, "general")
        await create_channel(a, alice, "random")
        await add_member(a, alice, general, bob.pubkey)
        start = int(time.time()) - 10  # a few seconds apart, as people write
        for i, (who, text) in enumerate(
            [
                (bob, "Morning! The **deploy** is at 10:00, anything to add?"),
                (alice, "Deploy notes:\n```bash\nmake deploy ENV=staging\n```\nthen check the dashboard."),
                (bob, "Looks good to me 👍"),
            ]
        ):
            client = b if who is bob else a
            event = Event.create(who.secret, 9, text, [["h", general]], start + 3 * i)
            assert (await client.publish(event)).accepted
    report = await run_scenario(
        "comfort", {"url": sqlite_relay.http_url + "/", "secret": alice.secret, "general": general}
    )
    assert_all_passed(report, CHECKS)
