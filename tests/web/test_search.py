"""Browser: search filters (issue 29 item 8) — `from:`, `in:`, `has:file`, `before:` and
`after:` beside the words, said back in words, an unreadable filter named instead of a search,
and a hit that opens in its channel."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from buzz.core.event import Event
from tests.agent.support import add_member, create_channel, set_profile
from tests.support.relay import Identity, RunningRelay, relay_on
from tests.web.browser import assert_all_passed, require_browser, run_scenario

CHECKS = [
    "from: keeps one person's messages and says so",
    "in: keeps one channel's messages",
    "has:file alone lists the messages with a file",
    "before: and after: split at a day",
    "a filter that names nobody is said, not searched",
    "a hit opens in its channel",
]


DAY = 86400


def _day(at: float) -> str:
    """The local date of `at` as before:/after: take it (the browser runs in this machine's zone)."""
    return time.strftime("%Y-%m-%d", time.localtime(at))


async def test_search_filters(tmp_path: Path, alice: Identity, bob: Identity) -> None:
    require_browser()
    now = time.time()
    old = int(now) - 3 * DAY  # the relay takes created_at up to a week back here
    async with relay_on(tmp_path, max_past_drift_s=7 * DAY) as relay:
        report = await _scenario(relay, alice, bob, old, now)
    assert_all_passed(report, CHECKS)


async def _scenario(
    relay: RunningRelay, alice: Identity, bob: Identity, old: int, now: float
) -> dict[str, Any]:
    async with relay.client(alice) as a, relay.client(bob) as b:
        await set_profile(a, alice, "Alice")
        await set_profile(b, bob, "Bob")
        general = await create_channel(a, alice, "general")
        random = await create_channel(a, alice, "random")
        await add_member(a, alice, general, bob.pubkey)
        await add_member(a, alice, random, bob.pubkey)
        url = "https://files.example.com/deploy.log"  # another host: stored as it is (media.md §9.2)
        sent = [
            (b, bob, "deploy retro from january", general, [], old),
            (b, bob, "deploy plan for friday", general, [], None),
            (a, alice, "deploy notes by alice", random, [], None),
            (b, bob, f"the deploy log\n{url}", general, [["imeta", f"url {url}", "m text/plain"]], None),
            (a, alice, "lunch anyone?", general, [], None),
        ]
        for client, who, text, channel, more, at in sent:
            event = Event.create(who.secret, 9, text, [["h", channel], *more], at)
            assert (await client.publish(event)).accepted, text
    # before: yesterday keeps only the old one; after: the day before yesterday drops it.
    config = {"before": _day(now - DAY), "after": _day(now - 2 * DAY)}
    return await run_scenario("search", {"url": relay.http_url + "/", "secret": alice.secret, **config})
