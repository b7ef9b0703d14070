"""Browser: read state everywhere (issue 29 item 2, decision 222) — two browsers with the same
key and nothing shared but the relay show the same unread counts, reading on one clears the
other, and the stored read state is NIP-44 encrypted to its owner."""

from __future__ import annotations

import time

import orjson

from buzz.core import nip44
from buzz.core.event import Event
from tests.agent.support import add_member, create_channel, set_profile
from tests.support.relay import Identity, RunningRelay
from tests.web.browser import LiveScenario, assert_all_passed, require_browser


async def test_read_state_follows_the_key(sqlite_relay: RunningRelay, alice: Identity, bob: Identity) -> None:
    require_browser()
    start = int(time.time()) - 100
    async with sqlite_relay.client(alice) as a, sqlite_relay.client(bob) as b:
        await set_profile(a, alice, "Alice")
        general = await create_channel(a, alice, "general")
        random = await create_channel(a, alice, "random")
        await add_member(a, alice, general, bob.pubkey)
        for i in range(10):
            assert (
                await b.publish(Event.create(bob.secret, 9, f"old {i}", [["h", general]], start + i))
            ).accepted
        page = await LiveScenario.start(
            "readsync", {"url": sqlite_relay.http_url + "/", "secret": alice.secret, "random": random}
        )
        try:
            await page.reached("read")
            for i in range(5):
                assert (await b.publish(Event.create(bob.secret, 9, f"new {i}", [["h", general]]))).accepted
            page.go("posted")
            report = await page.report()
        finally:
            await page.abort()
        (state,) = await b.query([{"kinds": [30078], "authors": [alice.pubkey], "#d": ["buzz/read-state"]}])
    assert general not in state.content  # only its owner can read it
    key = nip44.get_conversation_key(alice.secret, alice.pubkey)
    read = orjson.loads(nip44.decrypt(state.content, key))["read"]
    assert set(read) >= {general, random}
    assert_all_passed(
        report, ["a second browser shows the same unread count", "reading in one browser clears the other"]
    )
    print(f"read in one browser → cleared in the other: {report['numbers']['clearedMs']} ms")
