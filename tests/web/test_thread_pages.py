"""Browser: a thread longer than a page (decision 385) — it opens with its newest replies and
"N+ replies", *Load older replies* brings every older one once and in order, one author's
consecutive replies are grouped under one name; and a channel whose newest messages are all
replies in one thread still shows the thread's root (its pages go on past rows it does not
show)."""

from __future__ import annotations

import time

from buzz.core.event import Event
from tests.agent.support import add_member, create_channel, set_profile
from tests.support.relay import Identity, RunningRelay
from tests.web.browser import assert_all_passed, require_browser, run_scenario
from tests.web.test_window import publish_all

PAGE = 200  # the page's THREAD_PAGE
REPLIES = 2 * PAGE + 57  # three pages, the last short
LATER = 60  # top-level messages after the thread: the channel's first page fills the view
BUSY = 130  # replies in the other channel: more than two of the channel's pages of 50
FLOOD = 560  # replies in a third: more than the ten pages a view loads by itself to fill up
CHECKS = [
    "a long thread opens with its newest replies and offers the older ones",
    "a thread groups one author's consecutive replies under one name",
    "Load older replies brings the rest, each reply once, in order",
    "a channel whose newest messages are all thread replies shows the root",
    "past ten pages of replies it stops and Load older messages goes on",
]


def thread(root_author: Identity, others: list[Identity], channel: str, text: str, n: int, at: int):  # type: ignore[no-untyped-def]
    """A root and `n` direct replies (agents.md §3.3), three a second: a page's oldest reply has
    neighbours in its second, which the next page (until that second) brings back again."""
    root = Event.create(root_author.secret, 9, text, [["h", channel]], at)
    replies = [
        Event.create(
            others[i % len(others)].secret,
            9,
            f"update {i:04d}",
            [["h", channel], ["e", root.id, "", "reply"]],
            at + 1 + i // 3,
        )
        for i in range(n)
    ]
    return root, replies


async def test_a_long_thread_pages(sqlite_relay: RunningRelay, alice: Identity, bob: Identity) -> None:
    require_browser()
    start = int(time.time()) - REPLIES // 3 - LATER - 30  # the relay takes ~10 minutes back
    async with sqlite_relay.client(alice) as a, sqlite_relay.client(bob) as b:
        await set_profile(a, alice, "Alice")
        await set_profile(b, bob, "Bob")
        incident = await create_channel(a, alice, "incident")
        busy = await create_channel(a, alice, "busy")
        flood = await create_channel(a, alice, "flood")
        for channel in (incident, busy, flood):
            await add_member(a, alice, channel, bob.pubkey)
        root, replies = thread(bob, [alice, bob], incident, "Outage: the API is down", REPLIES, start)
        after = start + 2 + REPLIES // 3
        later = [
            Event.create(bob.secret, 9, f"later {i:03d}", [["h", incident]], after + i // 2)
            for i in range(LATER)
        ]
        busy_root, busy_replies = thread(alice, [bob], busy, "Deploy log, replies below", BUSY, start)
        flood_root, flood_replies = thread(alice, [bob], flood, "Load test chatter below", FLOOD, start)
        everything = [root, *replies, *later, busy_root, *busy_replies, flood_root, *flood_replies]
        await publish_all(a, [e for e in everything if e.pubkey == alice.pubkey and len(e.tags) == 1])
        await publish_all(b, [e for e in everything if e.pubkey == bob.pubkey and len(e.tags) == 1])
        await publish_all(a, [e for e in everything if e.pubkey == alice.pubkey and len(e.tags) > 1])
        await publish_all(b, [e for e in everything if e.pubkey == bob.pubkey and len(e.tags) > 1])
    report = await run_scenario(
        "thread-pages",
        {
            "url": sqlite_relay.http_url + "/",
            "secret": alice.secret,
            "channel": incident,
            "root": root.content,
            "newest": replies[-1].content,
            "newestId": replies[-1].id,
            "page": PAGE,
            # The page's order: by time, then by id in a second (the relay's tie rule)
            "replies": [e.content for e in sorted(replies, key=lambda e: (e.created_at, e.id))],
            "busyRoot": busy_root.content,
            "flood": flood,
            "floodRoot": flood_root.content,
        },
    )
    assert_all_passed(report, CHECKS)
    assert report["numbers"]["replies"] == REPLIES
    assert report["numbers"]["pagesBeforePress"] == 11, report["numbers"]
