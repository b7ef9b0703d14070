"""No stale or misattributed audio (issue 13 item 5), on the real relay over real sockets.

- A leaver's queued frames are flushed before `left`, so none arrive under the index's next
  occupant (block/buzz#6056); indices are reused least recently freed first.
- A receiver that stops reading gets at most the 200 ms budget of old audio when it resumes,
  the newest frames last, and the drops are counted.
- Protocol v3 (per-index epoch) and v2 clients share one room.

The stalled receiver is a real TCP stall: its socket has a small receive buffer and its
transport stops reading, so the relay's own socket buffers fill up as they would for a phone
that lost its radio.
"""

from __future__ import annotations

import asyncio
import socket
from typing import Any

import aiohttp
import orjson

from buzz.core.huddle_wire import parse_relay_frame
from buzz.core.nip42 import build_auth_event
from buzz.relay.huddle.fanout import AUDIO_BUDGET_FRAMES, DROPPED_METRIC
from tests.huddle.support import AudioPeer, ChannelSpec, audio_url, frame, join, make_channel
from tests.support.deadline import scaled
from tests.support.relay import Identity, RunningRelay

PAYLOAD = 1000  # bytes of "Opus" per frame: a few frames fill the small receive buffer
RCVBUF = 4096


def _small_rcvbuf_socket(addr_info: Any) -> socket.socket:
    family, type_, proto, _, _ = addr_info
    sock = socket.socket(family, type_, proto)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, RCVBUF)  # before connect: sets the window
    return sock


async def stalled_peer(running: RunningRelay, who: Identity, channel_id: str, version: int = 2) -> AudioPeer:
    """A joined peer whose TCP receive side is small and can be paused (`pause`/`resume`)."""
    connector = aiohttp.TCPConnector(socket_factory=_small_rcvbuf_socket)
    session = aiohttp.ClientSession(connector=connector)
    ws = await session.ws_connect(audio_url(running, channel_id), autoping=False, max_msg_size=1 << 16)
    peer = AudioPeer(session, ws)
    challenge = await peer.challenge()
    event = build_auth_event(who.secret, challenge, running.url)
    body = {"type": "auth", "parent_channel_id": None, "protocol_version": version, "event": event.to_dict()}
    await ws.send_str(orjson.dumps(body).decode())
    peer.joined = await peer.recv_json()
    return peer


FRAMES_IN = "huddle_audio_frames_in_total"


async def relay_took(running: RunningRelay, count: int) -> None:
    """Wait until the relay has forwarded (or dropped) `count` frames in all: an event to wait
    on, not a guessed time (the relay counts a frame after fanning it out). Bounded by 30 s."""
    counters = running.relay.huddles.stats.counters
    async with asyncio.timeout(scaled(30)):
        while counters[FRAMES_IN] < count:
            await asyncio.sleep(0.01)
    await asyncio.sleep(0)  # let the per-receiver writers run once


def _transport(peer: AudioPeer) -> asyncio.Transport:
    return peer.ws._conn.transport  # type: ignore[attr-defined,no-any-return]


async def drain(peer: AudioPeer, idle: float = 0.5) -> list[tuple[str, Any]]:
    """Everything the peer receives until `idle` seconds pass without a message, in order:
    ("text", json) or ("binary", bytes). Pings are answered."""
    seen: list[tuple[str, Any]] = []
    while True:
        try:
            msg = await peer.ws.receive(idle)
        except TimeoutError:
            return seen
        if msg.type == aiohttp.WSMsgType.PING:
            await peer.ws.pong(msg.data)
        elif msg.type == aiohttp.WSMsgType.TEXT:
            seen.append(("text", orjson.loads(msg.data)))
        elif msg.type == aiohttp.WSMsgType.BINARY:
            seen.append(("binary", bytes(msg.data)))
        else:
            return seen


def payload(tag: bytes) -> bytes:
    return (tag * PAYLOAD)[:PAYLOAD]


async def test_leavers_frames_never_arrive_under_the_next_occupant(
    sqlite_relay: RunningRelay, alice: Identity, bob: Identity, carol: Identity
) -> None:
    cid = await make_channel(sqlite_relay, ChannelSpec(alice, members=[bob, carol]))
    listener = await stalled_peer(sqlite_relay, alice, cid)
    bob_peer = await join(sqlite_relay, bob, cid)
    assert bob_peer.joined is not None and bob_peer.joined["peer_index"] == 1
    _transport(listener).pause_reading()
    taken = sqlite_relay.relay.huddles.stats.counters[FRAMES_IN]
    for seq in range(40):  # far more than the socket buffers and the queue hold
        await bob_peer.ws.send_bytes(frame(seq, payload(b"B")))
    await relay_took(sqlite_relay, taken + 40)
    await bob_peer.ws.send_str('{"type":"leave"}')
    await bob_peer.expect_close()
    carol_peer = await join(sqlite_relay, carol, cid)
    assert carol_peer.joined is not None and carol_peer.joined["peer_index"] == 1  # Bob's index
    await carol_peer.ws.send_bytes(frame(0, payload(b"C")))  # one word: it must not push Bob's out
    await relay_took(sqlite_relay, taken + 41)
    _transport(listener).resume_reading()
    seen = await drain(listener)
    carol_joined = next(
        i for i, (what, body) in enumerate(seen) if what == "text" and body.get("pubkey") == carol.pubkey
    )
    after = [parse_relay_frame(body, 2) for what, body in seen[carol_joined:] if what == "binary"]
    before = [parse_relay_frame(body, 2) for what, body in seen[:carol_joined] if what == "binary"]
    assert before and all(f is not None and f.opus_packet[:1] == b"B" for f in before)
    assert after and all(f is not None and f.opus_packet[:1] == b"C" for f in after), [
        f.opus_packet[:1] for f in after if f
    ]
    assert sqlite_relay.relay.huddles.stats.counters["huddle_audio_frames_flushed_total"] > 0
    for peer in (listener, carol_peer, bob_peer):
        await peer.close()


async def test_resuming_receiver_gets_at_most_the_budget_and_the_newest_last(
    sqlite_relay: RunningRelay, alice: Identity, bob: Identity
) -> None:
    cid = await make_channel(sqlite_relay, ChannelSpec(alice, members=[bob]))
    listener = await stalled_peer(sqlite_relay, alice, cid)
    speaker = await join(sqlite_relay, bob, cid)
    stats = sqlite_relay.relay.huddles.stats.counters
    dropped_before = stats[DROPPED_METRIC]
    _transport(listener).pause_reading()
    taken = stats[FRAMES_IN]
    sent = 100  # 2 s of audio while the listener reads nothing
    for seq in range(sent):
        await speaker.ws.send_bytes(frame(seq, payload(bytes([seq]))))
        await asyncio.sleep(0.002)
    await relay_took(sqlite_relay, taken + sent)
    _transport(listener).resume_reading()
    frames = [parse_relay_frame(body, 2) for what, body in await drain(listener) if what == "binary"]
    seqs = [f.header.seq for f in frames if f is not None and f.header is not None]
    # what the listener's own small kernel buffer held (a few frames) + the relay's 200 ms budget
    own_buffer = 2 * RCVBUF // PAYLOAD + 2
    assert 0 < len(seqs) <= AUDIO_BUDGET_FRAMES + own_buffer, seqs
    assert seqs[-1] == sent - 1  # the oldest were dropped, not the newest
    assert stats[DROPPED_METRIC] - dropped_before >= sent - len(seqs)
    for peer in (listener, speaker):
        await peer.close()


async def test_v2_and_v3_clients_share_a_room(
    sqlite_relay: RunningRelay, alice: Identity, bob: Identity, carol: Identity
) -> None:
    cid = await make_channel(sqlite_relay, ChannelSpec(alice, members=[bob, carol]))
    old = await join(sqlite_relay, alice, cid, version=2)
    new = await join(sqlite_relay, bob, cid, version=3)
    assert old.joined is not None and new.joined is not None
    assert "epoch" not in old.joined and new.joined["epoch"] == 0  # v2 JSON stays as it was
    assert new.joined["peers"] == [
        {"pubkey": alice.pubkey, "peer_index": 0, "epoch": 0},
        {"pubkey": bob.pubkey, "peer_index": 1, "epoch": 0},
    ]
    announced = await old.recv_json()
    assert announced["pubkey"] == bob.pubkey and "epoch" not in announced

    await old.ws.send_bytes(frame(1, b"\x78\x01"))
    heard_by_v3 = await new.recv_binary()
    assert heard_by_v3[:2] == bytes([0, 0]) and heard_by_v3[2:] == frame(1, b"\x78\x01")  # [index][epoch]
    await new.ws.send_bytes(frame(2, b"\x78\x02"))
    assert await old.recv_binary() == bytes([1]) + frame(2, b"\x78\x02")  # [index] only

    # Bob leaves, Carol (v3) takes index 1 again: its epoch moves on, and frames carry it.
    await new.ws.send_str('{"type":"leave"}')
    await new.expect_close()
    assert (await old.recv_json())["type"] == "left"
    third = await join(sqlite_relay, carol, cid, version=3)
    assert third.joined is not None and (third.joined["peer_index"], third.joined["epoch"]) == (1, 1)
    await third.ws.send_bytes(frame(3, b"\x78\x03"))
    assert await old.recv_binary() == bytes([1]) + frame(3, b"\x78\x03")
    await old.ws.send_bytes(frame(4, b"\x78\x04"))
    assert (await third.recv_binary())[:2] == bytes([0, 0])
    for peer in (old, new, third):
        await peer.close()


async def test_v1_still_cannot_join_a_v3_room(
    sqlite_relay: RunningRelay, alice: Identity, bob: Identity
) -> None:
    cid = await make_channel(sqlite_relay, ChannelSpec(alice, members=[bob]))
    first = await join(sqlite_relay, alice, cid, version=3)
    late = await join(sqlite_relay, bob, cid, version=1)
    assert late.joined is not None and late.joined["code"] == "upgrade_required"
    assert (late.joined["pinned_version"], late.joined["requested_version"]) == (3, 1)
    for peer in (first, late):
        await peer.close()
