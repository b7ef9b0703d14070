"""Browser: the composer never loses or leaks text, and one order for everyone (issue 29 items
5 and 6). The relay really stops while a message is on its way: its OK is lost (the link to
the page is deaf from just before the send), the page says "Not sent", the relay restarts on
the same data and Retry sends the same event — the relay holds it once."""

from __future__ import annotations

import contextlib
from pathlib import Path

from buzz.core.event import Event
from tests.agent.support import create_channel, set_profile
from tests.support.relay import Identity, relay_on
from tests.web.browser import LiveScenario, assert_all_passed, require_browser
from tests.web.link import Link

CHECKS = [
    "drafts are kept per channel and thread, also across a reload",
    "a message shows Sending…, then Sent, and empties the box at once",
    "messages sent in one second keep their order, live and after a reload",
    "a picked @name leaves the caret after it, also when keys run ahead of the screen",
    "the box grows with the lines typed, then scrolls",
    "a send whose answer is lost shows Not sent; text typed meanwhile stays",
    "Retry after the relay is back sends the same event: Sent",
    "after a reload the message is there once",
    "a message lost on its way shows again after a reload: Not sent, then Retry sends it",
]
LOST = "lost on its way"
TEXT = "exactly once please"


def _port(url: str) -> int:
    return int(url.rstrip("/").rsplit(":", 1)[1])


async def test_the_composer_never_loses_or_leaks_text(tmp_path: Path, alice: Identity) -> None:
    require_browser()
    data = tmp_path / "data"
    first = relay_on(data)
    relay = await first.__aenter__()
    async with relay.client(alice) as client:
        await set_profile(client, alice, "Alice")
        general = await create_channel(client, alice, "general")
        await create_channel(client, alice, "plans", visibility="private")
        root = Event.create(alice.secret, 9, "the root message", [["h", general]])
        assert (await client.publish(root)).accepted
    link = Link(_port(relay.url))
    await link.start()
    page = await LiveScenario.start(
        "composer", {"url": link.http_url, "secret": alice.secret, "general": general}
    )
    try:
        await page.reached("ready")
        async with relay.client(alice) as watcher:
            stored = await watcher.subscribe([{"kinds": [9], "#h": [general], "limit": 0}])
            link.deaf = True
            page.go("deaf")
            await page.reached("sending")
            while (await stored.next(timeout=30)).content != TEXT:
                pass
        await first.__aexit__(None, None, None)  # the relay stops: the page's connection closes
        page.go("stopped")
        await page.reached("not sent")
        async with relay_on(data) as again:
            link.target_port = _port(again.url)
            link.deaf = False
            page.go("restarted")
            await page.reached("retried")
            async with again.client(alice) as client:
                held = await client.query([{"kinds": [9], "#h": [general], "search": TEXT}])
                assert [e.content for e in held] == [TEXT]
            page.go("counted")
            await page.reached("mute me")
            link.mute_open()
            page.go("muted")
            await page.reached("resent")
            report = await page.report()  # first: a failed check says why the count below is off
            async with again.client(alice) as client:
                held = await client.query([{"kinds": [9], "#h": [general], "authors": [alice.pubkey]}])
    finally:
        await page.abort()
        await link.stop()
        with contextlib.suppress(Exception):
            await first.__aexit__(None, None, None)
    assert_all_passed(report, CHECKS)
    assert [e.content for e in held].count(LOST) == 1
