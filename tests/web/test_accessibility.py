"""Browser: accessible and phone-sized (issue 29 item 9) — axe-core (web/package.json, a dev
dependency) on the sign-in, channel, thread, inbox and settings views, light and dark; tap
targets and on-tap message actions at 390×844."""

from __future__ import annotations

from buzz.core.event import Event
from tests.agent.support import add_member, create_channel, set_profile
from tests.support.relay import Identity, RunningRelay
from tests.web.browser import assert_all_passed, require_browser, run_scenario

VIEWS = ["channel", "thread", "inbox", "settings"]
CHECKS = [
    "axe: sign-in",
    *[f"axe: {v}" for v in VIEWS],
    *[f"axe: {v} (dark)" for v in VIEWS],
    "at 390×844 message actions show on tap only",
    "at 390×844 every tap target is at least 32 px",
]


async def test_accessible_and_phone_sized(sqlite_relay: RunningRelay, alice: Identity, bob: Identity) -> None:
    require_browser()
    async with sqlite_relay.client(alice) as a, sqlite_relay.client(bob) as b:
        await set_profile(a, alice, "Alice")
        await set_profile(b, bob, "Bob")
        general = await create_channel(a, alice, "general")
        await add_member(a, alice, general, bob.pubkey)
        question = Event.create(alice.secret, 9, "a question", [["h", general]])
        assert (await a.publish(question)).accepted
        reply = Event.create(
            bob.secret,
            9,
            "@Alice an answer",
            [["h", general], ["e", question.id, "", "reply"], ["p", alice.pubkey]],
        )
        assert (await b.publish(reply)).accepted
    report = await run_scenario(
        "a11y", {"url": sqlite_relay.http_url + "/", "secret": alice.secret, "general": general}
    )
    assert_all_passed(report, CHECKS)
