"""Browser: a 1,000-message channel paged by `until`, and hostile content rendered as text."""

from __future__ import annotations

import time

import orjson
import pytest

from buzz.core.event import Event
from tests.agent.support import add_member, create_channel, set_profile
from tests.support.relay import Identity, RunningRelay
from tests.web.browser import assert_all_passed, require_browser, run_scenario

COUNT = 1000
PER_SECOND = 3


async def test_a_thousand_messages_page_in_order(sqlite_relay: RunningRelay, alice: Identity) -> None:
    require_browser()
    async with sqlite_relay.client(alice) as client:
        channel = await create_channel(client, alice, "history")
        # Three messages a second: page boundaries fall inside a second, which `until` (an
        # inclusive bound) must not skip or repeat.
        start = int(time.time()) - COUNT // PER_SECOND - 5
        for i in range(COUNT):
            event = Event.create(
                alice.secret, 9, f"message {i:04d}", [["h", channel]], start + i // PER_SECOND
            )
            result = await client.publish(event)
            assert result.accepted, result.message
    report = await run_scenario(
        "paging",
        {"url": sqlite_relay.http_url + "/", "secret": alice.secret, "count": COUNT, "perSecond": PER_SECOND},
    )
    assert_all_passed(
        report,
        ["the newest page shows right after sign-in", "scrolling up loads every older page once, in order"],
    )
    assert report["numbers"]["firstPage"] == 50, report["numbers"]["firstPageReqs"]
    assert report["numbers"]["loaded"] == COUNT
    print(f"time to first message on a {COUNT}-message channel: {report['numbers']['firstMessageMs']} ms")


@pytest.mark.parametrize("size", [100_000])
async def test_hostile_content_renders_as_text(
    sqlite_relay: RunningRelay, alice: Identity, size: int
) -> None:
    require_browser()
    mallory = Identity.new()
    async with sqlite_relay.client(alice) as client:
        await set_profile(client, alice, "Alice")
        channel = await create_channel(client, alice, "<img src=y onerror=alert(6)>")
        await add_member(client, alice, channel, mallory.pubkey)
    big = "BIGSTART " + ("lorem ipsum <b>dolor</b> " * (size // 24)) + " BIGEND"
    texts = [
        "<img src=x onerror=alert(1)>",
        "<script>window.__pwned = 2</script>",
        '<a href="javascript:alert(3)">click</a>',
        "try javascript:alert(4) or data:text/html,<script>alert(7)</script> or https://example.com/safe",
        big,
    ]
    async with sqlite_relay.client(mallory) as client:
        name = orjson.dumps({"name": "<b onmouseover=alert(5)>Mallory</b>"}).decode()
        assert (await client.publish(Event.create(mallory.secret, 0, name, []))).accepted
        for text in texts:
            result = await client.publish(Event.create(mallory.secret, 9, text, [["h", channel]]))
            assert result.accepted, result.message
    report = await run_scenario("hostile", {"url": sqlite_relay.http_url + "/", "secret": alice.secret})
    assert_all_passed(
        report,
        [
            "markup in messages is shown as text",
            "no javascript: or data: link exists anywhere",
            "hostile names and channel names are text",
            "a 100 KB message is folded, expands, and the page stays usable",
            "nothing ran",
        ],
    )
