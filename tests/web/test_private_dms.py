"""Browser: end-to-end encrypted DMs (NIP-17, docs/decisions.md 285). nostr-tools' own `nip17`
helper sends Bob a private DM; our browser shows it beside his channel DM with Alice, marked,
and answers it privately; nostr-tools and `buzz dms read` read the answer; the relay's database
holds neither text."""

from __future__ import annotations

import uuid

import orjson

from buzz.core.event import Event
from tests.cli.helpers import buzz
from tests.interop.test_nostr_tools import node  # noqa: F401  (fixture)
from tests.interop.test_private_dms import nostr_tools
from tests.support.plaintext import database_holds
from tests.support.relay import Identity, RunningRelay
from tests.web.browser import assert_all_passed, require_browser, run_scenario


async def _profile(relay: RunningRelay, who: Identity, name: str) -> None:
    async with relay.client(who) as client:
        result = await client.publish(Event.create(who.secret, 0, orjson.dumps({"name": name}).decode(), []))
        assert result.accepted, result.message


async def test_private_dms_in_the_browser(
    node: str,  # noqa: F811
    sqlite_relay: RunningRelay,
    alice: Identity,
    bob: Identity,
) -> None:
    require_browser()
    relay = sqlite_relay
    await _profile(relay, alice, "Alice")
    await _profile(relay, bob, "Bob")
    hello = f"hello-from-nostr-tools-{uuid.uuid4().hex[:12]}"
    reply = f"reply-from-the-browser-{uuid.uuid4().hex[:12]}"
    plain = f"plain-channel-dm-{uuid.uuid4().hex[:12]}"
    assert (await buzz(relay.url, alice, "dms", "send", "--pubkey", bob.pubkey, "--content", plain)).json[
        "e2ee"
    ] is False
    await nostr_tools(node, "send", relay.url, alice.secret, bob.pubkey, hello)
    hostile = '<img src=x onerror="window.__pwned=1"> **not bold**'
    sent = await buzz(
        relay.url, alice, "dms", "send", "--private", "--pubkey", bob.pubkey, "--content", hostile
    )
    assert sent.json["e2ee"] is True

    report = await run_scenario(
        "private-dms",
        {
            "url": relay.http_url + "/",
            "bobSecret": bob.secret,
            "hello": hello,
            "reply": reply,
            "plain": plain,
            "hostile": hostile,
        },
    )
    assert_all_passed(
        report,
        [
            "a private DM from nostr-tools shows beside the channel DM, marked end-to-end encrypted",
            "a hostile private DM shows as text and runs nothing",
            "the browser answers privately",
            "the channel DM's view opens the private conversation",
            "no frame the page sent holds the private text",
        ],
    )
    theirs = await nostr_tools(node, "read", relay.url, alice.secret)
    assert [(m["pubkey"], m["content"]) for m in theirs["messages"] if m["content"] == reply] == [
        (bob.pubkey, reply)
    ]
    ours = (await buzz(relay.url, alice, "dms", "read", "--pubkey", bob.pubkey)).json["messages"]
    assert {(m["content"], m["e2ee"]) for m in ours} >= {(reply, True), (plain, False)}
    assert not await database_holds(relay, hello) and not await database_holds(relay, reply)
    assert await database_holds(relay, plain)
