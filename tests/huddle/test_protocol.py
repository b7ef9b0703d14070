"""Audio socket handshake and join decisions against the real relay (huddle.md §2–§4, §5.4).

Every refusal is checked as the exact JSON of §4.2 followed by the relay closing the socket.
"""

from __future__ import annotations

import asyncio
import time

import aiohttp
import pytest

from buzz.relay.huddle import HuddleSettings
from tests.huddle.support import AudioPeer, ChannelSpec, audio_url, join, make_channel, refused
from tests.support.deadline import scaled
from tests.support.relay import Identity, RunningRelay, relay_on


def settings(running: RunningRelay, **changes: object) -> None:
    from dataclasses import replace

    huddles = running.relay.huddles
    huddles.settings = replace(huddles.settings, **changes)  # type: ignore[arg-type]


async def test_route_checks_before_upgrade(sqlite_relay: RunningRelay) -> None:
    async with aiohttp.ClientSession() as http:
        for bad in ("not-a-uuid", "6F9619FF-8B86-D011-B42D-00C04FC964FF"):
            async with http.get(f"{sqlite_relay.http_url}/huddle/{bad}/audio") as resp:
                assert resp.status == 400
            with pytest.raises(aiohttp.WSServerHandshakeError) as err:
                await http.ws_connect(audio_url(sqlite_relay, bad))
            assert err.value.status == 400


async def test_shared_connection_budget(tmp_path, alice: Identity) -> None:
    async with relay_on(tmp_path, max_connections=1) as running:
        cid = await make_channel(running, ChannelSpec(alice))
        async with running.client(alice):  # the one permit, taken by a Nostr socket
            async with aiohttp.ClientSession() as http:
                async with http.get(audio_url(running, cid), headers={"Upgrade": "websocket"}) as resp:
                    assert (resp.status, await resp.text()) == (503, "relay: connection limit reached")
        await asyncio.sleep(0.1)
        peer = await join(running, alice, cid)  # the permit came back
        assert peer.joined is not None and peer.joined["type"] == "joined"
        with pytest.raises(aiohttp.WSServerHandshakeError) as err:  # the audio socket holds it now
            async with running.client(alice):
                pass
        assert err.value.status == 503
        await peer.close()


async def test_challenge_is_fresh_and_junk_is_ignored_before_auth(
    sqlite_relay: RunningRelay, alice: Identity
) -> None:
    cid = await make_channel(sqlite_relay, ChannelSpec(alice))
    first, second = await AudioPeer.connect(sqlite_relay, cid), await AudioPeer.connect(sqlite_relay, cid)
    c1, c2 = await first.challenge(), await second.challenge()
    assert len(c1) == 64 and int(c1, 16) >= 0 and c1 == c1.lower() and c1 != c2
    await first.ws.send_bytes(b"\x00" * 20)
    await first.ws.send_str('{"type":"hello"}')
    await first.ws.send_str("not json")
    await first.ws.send_str('{"type":"auth","event":"nope"}')
    await first.send_auth(sqlite_relay, alice, c1)
    joined = await first.recv_json()
    assert joined == {
        "type": "joined",
        "revision": 1,
        "pubkey": alice.pubkey,
        "peer_index": 0,
        "peers": [{"pubkey": alice.pubkey, "peer_index": 0}],
    }
    await first.close()
    await second.close()


async def test_no_auth_within_timeout_closes_without_message(
    sqlite_relay: RunningRelay, alice: Identity
) -> None:
    settings(sqlite_relay, auth_timeout_s=0.5)
    cid = await make_channel(sqlite_relay, ChannelSpec(alice))
    peer = await AudioPeer.connect(sqlite_relay, cid)
    await peer.challenge()
    started = time.monotonic()
    assert await peer.expect_close() == []
    assert 0.4 < time.monotonic() - started < scaled(3)
    await peer.close()


async def test_no_auth_in_time_closes_1008_naming_what_was_ignored(
    sqlite_relay: RunningRelay, alice: Identity
) -> None:
    """§3.3 ignores junk before `auth` and sends no error message, so the close frame says what
    was wrong: the timeout, how many messages were ignored and why the last one was."""
    settings(sqlite_relay, auth_timeout_s=0.5)
    cid = await make_channel(sqlite_relay, ChannelSpec(alice))
    cases = [
        ([], "auth-required: no valid auth within 0.5 s"),
        (
            ["not json"],
            "auth-required: no valid auth within 0.5 s; ignored 1 message, last: text is not JSON",
        ),
        (
            ["not json", b"\x00\x01\x02"],
            "auth-required: no valid auth within 0.5 s; ignored 2 messages, last: binary message before auth",
        ),
        (
            [b"\x00", '{"type":"auth","event":"nope"}'],
            "auth-required: no valid auth within 0.5 s; ignored 2 messages, last: auth: event is not an object",
        ),
        (
            ['{"type":"hello"}'],
            "auth-required: no valid auth within 0.5 s; ignored 1 message, last: type is neither auth nor leave",
        ),
        (
            ['{"type":"leave"}'],
            "auth-required: no valid auth within 0.5 s; ignored 1 message, last: leave before auth",
        ),
    ]
    for sent, reason in cases:
        peer = await AudioPeer.connect(sqlite_relay, cid)
        await peer.challenge()
        for message in sent:
            if isinstance(message, bytes):
                await peer.ws.send_bytes(message)
            else:
                await peer.ws.send_str(message)
        assert await peer.expect_close() == []  # still no error message (§3.3)
        assert peer.close_frame == (1008, reason), (sent, peer.close_frame)
        await peer.close()


async def test_auth_failures(sqlite_relay: RunningRelay, alice: Identity) -> None:
    cid = await make_channel(sqlite_relay, ChannelSpec(alice))
    failed = {"type": "error", "message": "auth failed"}
    peer = await AudioPeer.connect(sqlite_relay, cid)
    await peer.challenge()
    await peer.send_auth(sqlite_relay, alice, "ab" * 32)  # wrong challenge
    assert await peer.recv_json() == failed and await peer.expect_close() == []
    await peer.close()
    assert await refused(sqlite_relay, alice, cid, relay_url="ws://elsewhere.example:3000") == failed
    assert await refused(sqlite_relay, alice, cid, created_at=int(time.time()) - 61) == failed


async def test_non_member_and_order(sqlite_relay: RunningRelay, alice: Identity, bob: Identity) -> None:
    cid = await make_channel(sqlite_relay, ChannelSpec(alice))  # private, bob is not a member
    not_member = {"type": "error", "message": "not a member"}
    assert await refused(sqlite_relay, bob, cid) == not_member
    assert await refused(sqlite_relay, bob, cid, version=9) == not_member  # membership before version
    missing = "0b5e3f0a-1c2d-4e5f-8a9b-0c1d2e3f4a5b"
    assert await refused(sqlite_relay, alice, missing) == not_member


async def test_open_channel_admits_anyone(sqlite_relay: RunningRelay, alice: Identity, bob: Identity) -> None:
    cid = await make_channel(sqlite_relay, ChannelSpec(alice, visibility="open"))
    peer = await join(sqlite_relay, bob, cid)
    assert peer.joined is not None and peer.joined["type"] == "joined"
    await peer.close()


async def test_restricted_relay_member(tmp_path, alice: Identity) -> None:
    async with relay_on(tmp_path, require_relay_membership=True) as running:
        cid = "0b5e3f0a-1c2d-4e5f-8a9b-0c1d2e3f4a5b"
        assert await refused(running, alice, cid) == {
            "type": "error",
            "message": "restricted: not a relay member",
        }


async def test_unsupported_version(sqlite_relay: RunningRelay, alice: Identity) -> None:
    cid = await make_channel(sqlite_relay, ChannelSpec(alice))
    for requested in (0, 4):  # v3 (§6.6) is implemented, so the maximum is 3
        assert await refused(sqlite_relay, alice, cid, version=requested) == {
            "type": "error",
            "code": "unsupported_version",
            "message": f"huddle audio protocol v{requested} not supported; relay max is v3",
            "current_version": 3,
        }


async def test_audio_unavailable_after_membership(sqlite_relay: RunningRelay, alice: Identity) -> None:
    settings(sqlite_relay, audio_available=False)
    cid = await make_channel(sqlite_relay, ChannelSpec(alice))
    assert await refused(sqlite_relay, alice, cid) == {
        "type": "error",
        "code": "huddle_audio_unavailable",
        "message": "huddle audio unavailable in this deployment",
    }


def test_audio_available_switch() -> None:
    assert HuddleSettings.from_env("w", {"BUZZ_HUDDLE_AUDIO_AVAILABLE": "0"}).audio_available is False
    assert HuddleSettings.from_env("w", {"BUZZ_HUDDLE_AUDIO_AVAILABLE": "no"}).audio_available is True
    assert HuddleSettings.from_env("w", {}).audio_available is True


async def test_version_pin_until_reclaimed(
    sqlite_relay: RunningRelay, alice: Identity, bob: Identity
) -> None:
    cid = await make_channel(sqlite_relay, ChannelSpec(alice, members=[bob]))
    v1 = await join(sqlite_relay, alice, cid, version=None)  # no protocol_version: v1, pins v1
    assert v1.joined is not None and v1.joined["type"] == "joined"
    assert await refused(sqlite_relay, bob, cid, version=2) == {
        "type": "error",
        "code": "upgrade_required",
        "message": "this huddle is using audio protocol v1; your client requested v2",
        "pinned_version": 1,
        "requested_version": 2,
    }
    await v1.ws.send_str('{"type":"leave"}')
    assert await v1.expect_close() == []
    await v1.close()
    await asyncio.sleep(0.1)
    v2 = await join(sqlite_relay, bob, cid, version=2)  # the room was reclaimed: a fresh pin
    assert v2.joined is not None and v2.joined["type"] == "joined" and v2.joined["peer_index"] == 0
    await v2.close()


async def test_room_full_and_its_precedence(sqlite_relay: RunningRelay, alice: Identity) -> None:
    cid = await make_channel(sqlite_relay, ChannelSpec(alice))
    seats = [await join(sqlite_relay, alice, cid) for _ in range(25)]  # one pubkey, 25 seats
    assert [s.joined["peer_index"] for s in seats if s.joined] == list(range(25))
    full = {"type": "error", "code": "room_full", "message": "room participant capacity reached"}
    assert await refused(sqlite_relay, alice, cid, version=2) == full  # the 26th
    assert await refused(sqlite_relay, alice, cid, version=1) == full  # full AND mismatched: full
    # FIFO reuse (issue 13, least recently freed first): free 7 then 3; the next joiners get 7 then 3.
    for i in (7, 3):
        await seats[i].ws.send_str('{"type":"leave"}')
        await seats[i].expect_close()
    await asyncio.sleep(0.1)
    again = [await join(sqlite_relay, alice, cid) for _ in range(2)]
    assert [p.joined["peer_index"] for p in again if p.joined] == [7, 3]
    for peer in seats + again:
        await peer.close()


async def test_joiner_holding_an_ended_room_gets_room_ended(
    sqlite_relay: RunningRelay, alice: Identity, bob: Identity
) -> None:
    """A joiner between "get or create" and admission while the last peer leaves (§5.8).

    The real store's channel re-read (§4.1 step 5) is held at a gate so that the leave lands in
    between; nothing else is changed.
    """
    relay = sqlite_relay.relay
    cid = await make_channel(sqlite_relay, ChannelSpec(alice, members=[bob]))
    first = await join(sqlite_relay, alice, cid)
    gate, original = asyncio.Event(), relay.store.get_channel

    async def gated(channel_id: str, include_deleted: bool = False):  # type: ignore[no-untyped-def]
        slot = relay.huddles.rooms.get(relay.huddles.settings.community_id, channel_id)
        if slot is not None and slot.holders > 0:
            await gate.wait()
        return await original(channel_id, include_deleted)

    relay.store.get_channel = gated  # type: ignore[method-assign]
    try:
        second = await AudioPeer.connect(sqlite_relay, cid)
        await second.send_auth(sqlite_relay, bob, await second.challenge())
        slot = relay.huddles.rooms.get("default", cid)
        async with asyncio.timeout(scaled(5)):
            while slot is None or slot.holders == 0:
                await asyncio.sleep(0.01)
                slot = relay.huddles.rooms.get("default", cid)
        await first.ws.send_str('{"type":"leave"}')
        await first.expect_close()
        async with asyncio.timeout(scaled(5)):
            while not slot.room.ended:
                await asyncio.sleep(0.01)
        gate.set()
        assert await second.recv_json() == {
            "type": "error",
            "code": "room_ended",
            "message": "huddle has ended",
        }
        assert await second.expect_close() == []
    finally:
        relay.store.get_channel = original  # type: ignore[method-assign]
    await asyncio.sleep(0.05)
    assert relay.huddles.rooms.get("default", cid) is None  # the failed joiner reclaimed it
    third = await join(sqlite_relay, bob, cid)
    assert third.joined is not None and third.joined["type"] == "joined"
    for peer in (first, second, third):
        await peer.close()


async def test_roster_messages(
    sqlite_relay: RunningRelay, alice: Identity, bob: Identity, carol: Identity
) -> None:
    cid = await make_channel(sqlite_relay, ChannelSpec(alice, members=[bob, carol]))
    a = await join(sqlite_relay, alice, cid)
    b = await join(sqlite_relay, bob, cid)
    assert b.joined is not None and b.joined["peer_index"] == 1 and b.joined["revision"] == 2
    seen_by_a = await a.recv_json()
    assert seen_by_a == b.joined  # the same joined reaches every seat, joiner included
    c = await join(sqlite_relay, carol, cid)
    assert c.joined is not None and c.joined["peers"] == [
        {"pubkey": alice.pubkey, "peer_index": 0},
        {"pubkey": bob.pubkey, "peer_index": 1},
        {"pubkey": carol.pubkey, "peer_index": 2},
    ]
    assert await a.recv_json() == c.joined and await b.recv_json() == c.joined
    await b.ws.send_str('{"type":"leave"}')
    left = {"type": "left", "revision": 4, "pubkey": bob.pubkey, "peer_index": 1}
    assert await a.recv_json() == left and await c.recv_json() == left
    await c.ws.close()  # a close frame also starts cleanup
    assert await a.recv_json() == {"type": "left", "revision": 5, "pubkey": carol.pubkey, "peer_index": 2}
    for peer in (a, b, c):
        await peer.close()


async def test_heartbeat_closes_a_silent_client(
    sqlite_relay: RunningRelay, alice: Identity, bob: Identity
) -> None:
    settings(sqlite_relay, heartbeat_interval_s=0.2)
    cid = await make_channel(sqlite_relay, ChannelSpec(alice, members=[bob]))
    # Before the silent join: its first tick (at seating) cannot come earlier, so the close on
    # the third tick is at least two intervals later, however slow the box (decision 275).
    started = time.monotonic()
    silent = await join(sqlite_relay, alice, cid)
    answering = await join(sqlite_relay, bob, cid)
    seen: list[aiohttp.WSMessage] = []

    async def answer_pings() -> None:
        async for msg in answering.ws:
            seen.append(msg)
            if msg.type == aiohttp.WSMsgType.PING:
                await answering.ws.pong(msg.data)

    reader = asyncio.create_task(answer_pings())
    pings = 0
    async with asyncio.timeout(scaled(5)):
        while True:  # the silent client reads but never answers Pings
            msg = await silent.ws.receive()
            if msg.type == aiohttp.WSMsgType.PING:
                pings += 1
            elif msg.type in (aiohttp.WSMsgType.CLOSE, aiohttp.WSMsgType.CLOSED):
                break
    # closed on the third tick: two pings (a fourth tick would have sent a third), and no sooner
    assert pings == 2 and time.monotonic() - started >= 0.4
    await answering.ws.ping(b"x")  # client Pings are answered with Pongs
    await asyncio.sleep(0.8)
    assert not answering.ws.closed
    kinds = [m.type for m in seen]
    assert kinds.count(aiohttp.WSMsgType.PING) >= 4
    assert any(m.type == aiohttp.WSMsgType.PONG and m.data == b"x" for m in seen)
    texts = [m.json() for m in seen if m.type == aiohttp.WSMsgType.TEXT]
    assert any(t["type"] == "left" and t["pubkey"] == alice.pubkey for t in texts)
    reader.cancel()
    await silent.close()
    await answering.close()


async def test_size_caps(sqlite_relay: RunningRelay, alice: Identity, bob: Identity) -> None:
    cid = await make_channel(sqlite_relay, ChannelSpec(alice, members=[bob]))
    a = await join(sqlite_relay, alice, cid)
    b = await join(sqlite_relay, bob, cid)
    await a.recv_json()
    await a.ws.send_bytes(b"\x00" * 4097)  # dropped, socket stays open
    await a.ws.send_bytes(b"\x00\x01" + b"\x00" * 4094)  # 4096 bytes: forwarded
    got = await b.recv_binary()
    assert got == b"\x00" + b"\x00\x01" + b"\x00" * 4094
    assert sqlite_relay.relay.huddles.stats.counters["huddle_audio_frames_oversized_total"] == 1
    await a.ws.send_str("x" * 8192)  # reaches the handler (§2.3), ignored there (§5.7)
    await a.ws.send_bytes(b"\x00\x02" + b"\x00" * 10)  # the socket still serves: forwarded
    assert await b.recv_binary() == b"\x00" + b"\x00\x02" + b"\x00" * 10
    await a.ws.send_str("x" * 8193)  # refused by the parser: 1009, saying why
    msg = await a.ws.receive(5)
    assert msg.type == aiohttp.WSMsgType.CLOSE, msg
    assert (msg.data, msg.extra) == (1009, "message too big (8193 > 8192 bytes)")
    await a.close()
    await b.close()
