"""Browser: identity (issue 12, item 1) — create, name, NIP-49 storage, unlock, nsec/hex, NIP-07."""

from __future__ import annotations

import orjson

from buzz.core import nip19
from buzz.core.event import Event
from tests.support.relay import Identity, RunningRelay
from tests.web.browser import assert_all_passed, require_browser, run_scenario


async def _profile(relay: RunningRelay, who: Identity, name: str) -> None:
    async with relay.client(who) as client:
        result = await client.publish(Event.create(who.secret, 0, orjson.dumps({"name": name}).decode(), []))
        assert result.accepted, result.message


async def test_identity_in_the_browser(sqlite_relay: RunningRelay) -> None:
    require_browser()
    hexa, extension = Identity.new(), Identity.new()
    await _profile(sqlite_relay, hexa, "Hexa")
    await _profile(sqlite_relay, extension, "Nip Seven")
    report = await run_scenario(
        "identity",
        {
            "url": sqlite_relay.http_url + "/",
            "hexSecret": hexa.secret,
            "extensionSecret": extension.secret,
            "extensionPubkey": extension.pubkey,
        },
    )
    assert_all_passed(
        report,
        [
            "create identity enters the workspace and names me",
            "the key is exported on request",
            "a passphrase stores the key as ncryptsec only",
            "after a reload the passphrase unlocks the same identity",
            "signing in with a pasted nsec enters at once",
            "a hex key is refused when mistyped and accepted when right",
            "a pasted ncryptsec asks for its passphrase and unlocks",
            "a NIP-07 extension signs in without a key in the page",
            "no secret key was ever sent on the socket",
        ],
    )
    # The display name the browser set is a kind 0 signed by the new key, in the store.
    hrp, pubkey = nip19.decode(report["npub"])
    assert hrp == "npub"
    async with sqlite_relay.client(Identity.new()) as reader:
        found = await reader.query([{"kinds": [0], "authors": [str(pubkey)]}])
    assert [orjson.loads(e.content)["display_name"] for e in found] == ["Ada"]
