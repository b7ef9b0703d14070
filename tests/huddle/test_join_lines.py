"""`buzz huddle join`'s plain roster lines (huddle.md §10.3): peers by display name when known."""

from __future__ import annotations

import asyncio

from buzz.cli.huddle_cmd import KeySigner
from buzz.core.event import Event
from buzz.voice.client import HuddleClient, HuddleOptions
from tests.huddle.support import ChannelSpec, join, make_channel, start_huddle, until_seated
from tests.huddle.test_flow import Silent
from tests.support.deadline import scaled
from tests.support.relay import Identity, RunningRelay


async def _lines_with(lines: list[str], prefix: str, count: int) -> list[str]:
    async with asyncio.timeout(scaled(30)):
        while len(found := [x for x in lines if x.startswith(prefix) and "you" not in x]) < count:
            await asyncio.sleep(0.05)
    return found


async def test_join_lines_name_a_peer_who_set_a_name_since_last_seen(
    sqlite_relay: RunningRelay, alice: Identity, bob: Identity
) -> None:
    parent = await make_channel(sqlite_relay, ChannelSpec(alice, members=[bob]))
    huddle = await start_huddle(sqlite_relay, alice, parent)
    lines: list[str] = []
    async with sqlite_relay.client(alice) as alice_nostr:
        client = HuddleClient(
            HuddleOptions(
                sqlite_relay.url, huddle, parent_channel_id=parent, speak_replies=False, display=lines.append
            ),
            KeySigner(alice.secret),
            alice_nostr,
            recognizer_factory=Silent,
        )
        running = asyncio.create_task(client.run())
        try:
            await until_seated(client, running)
            bob_seat = await join(sqlite_relay, bob, huddle, parent=parent)
            assert bob_seat.joined is not None
            await _lines_with(lines, "joined:", 1)  # no profile yet: a hex prefix
            await bob_seat.close()
            await _lines_with(lines, "left:", 1)
            async with sqlite_relay.client(bob) as bob_nostr:
                profile = Event.create(bob.secret, 0, '{"name":"bob","display_name":"Bob"}', [])
                assert (await bob_nostr.publish(profile)).accepted
            bob_seat = await join(sqlite_relay, bob, huddle, parent=parent)
            assert bob_seat.joined is not None
            await _lines_with(lines, "joined:", 2)
            await bob_seat.close()
        finally:
            client.stop()
            await asyncio.wait_for(running, scaled(30))
    first, again = [line for line in lines if line.startswith("joined:") and "you" not in line]
    assert first == f"joined: {bob.pubkey[:12]}… (peer 1)", lines
    assert again.startswith("joined: Bob (peer "), lines
