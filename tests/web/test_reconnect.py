"""Browser: reconnects (issue 29 item 10). The relay stops and starts again on the same data
(a short stop: the page's reconnect back-off is capped at 2 s, so 20 s behave the same);
three tabs show Offline, reconnect, catch up on a message posted while they were away, once,
and send nothing again — the relay holds the message sent before the outage once."""

from __future__ import annotations

import contextlib
from pathlib import Path

from buzz.core.event import Event
from tests.agent.support import add_member, create_channel, set_profile
from tests.support.relay import Identity, relay_on
from tests.web.browser import LiveScenario, assert_all_passed, require_browser
from tests.web.link import Link

CHECKS = [
    "every tab shows Offline when the relay stops",
    "every tab reconnects soon after the relay is back",
    "each tab catches up on what was posted meanwhile, once",
]


def _port(url: str) -> int:
    return int(url.rstrip("/").rsplit(":", 1)[1])


async def test_tabs_reconnect_and_catch_up_once(tmp_path: Path, alice: Identity, bob: Identity) -> None:
    require_browser()
    data = tmp_path / "data"
    first = relay_on(data)
    relay = await first.__aenter__()
    async with relay.client(alice) as client:
        await set_profile(client, alice, "Alice")
        general = await create_channel(client, alice, "general")
        await add_member(client, alice, general, bob.pubkey)
    link = Link(_port(relay.url))
    await link.start()
    config = {"url": link.http_url, "alice": alice.secret, "bob": bob.secret, "general": general}
    page = await LiveScenario.start("reconnect", config)
    try:
        await page.reached("ready")
        await first.__aexit__(None, None, None)
        page.go("stopped")
        await page.reached("offline")
        link.down = True
        async with relay_on(data) as again:
            link.target_port = _port(again.url)
            async with again.client(bob) as b:
                posted = Event.create(bob.secret, 9, "posted during the outage", [["h", general]])
                assert (await b.publish(posted)).accepted
                link.down = False
                page.go("back")
                await page.reached("caught up")
                held = await b.query([{"kinds": [9], "#h": [general]}])
                assert sorted(e.content for e in held) == [
                    "posted during the outage",
                    "sent before the outage",
                ]
            page.go("counted")
            report = await page.report()
    finally:
        await page.abort()
        await link.stop()
        with contextlib.suppress(Exception):
            await first.__aexit__(None, None, None)
    assert_all_passed(report, CHECKS)
    numbers = report["numbers"]
    print(
        f"offline shown after {numbers['offlineMs']} ms; reconnected {numbers['reconnectMs']} ms after the return"
    )
