"""Helpers for huddle tests: channels on the real relay (kinds 9007/9000), and a raw
audio-socket client."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import aiohttp
import orjson

from buzz.core.event import Event
from buzz.core.huddle_wire import FrameHeader, client_frame
from buzz.core.nip42 import build_auth_event
from tests.cli.helpers import buzz
from tests.support.deadline import scaled
from tests.support.relay import Identity, RunningRelay

if TYPE_CHECKING:
    from buzz.voice.client import HuddleClient

# What a join without access gets (huddle.md §4.2), and a seat closed for losing it alike.
NOT_A_MEMBER = {"type": "error", "message": "not a member"}
NOT_RELAY_MEMBER = {"type": "error", "message": "restricted: not a relay member"}
BAN_POLL_WAIT_S = 20  # the relay's ban watch polls every 5 s (buzz.relay.auth.banwatch.POLL_S)


@dataclass
class ChannelSpec:
    owner: Identity
    members: Sequence[Identity] = ()
    bots: Sequence[Identity] = ()
    visibility: str = "private"
    ttl: int | None = None
    channel_id: str = field(default_factory=lambda: str(uuid.uuid4()))


async def make_channel(running: RunningRelay, spec: ChannelSpec) -> str:
    """Create the channel with its members through the relay's own kinds 9007/9000; returns its id."""
    cid = spec.channel_id
    tags = [["h", cid], ["name", f"huddle-{cid[:8]}"], ["visibility", spec.visibility]]
    if spec.ttl is not None:
        tags.append(["ttl", str(spec.ttl)])
    async with running.client(spec.owner) as owner:
        created = await owner.publish(Event.create(spec.owner.secret, 9007, "", tags))
        assert created.accepted, created.message
        for who, role in [*((m, "member") for m in spec.members), *((b, "bot") for b in spec.bots)]:
            put = Event.create(spec.owner.secret, 9000, "", [["h", cid], ["p", who.pubkey], ["role", role]])
            result = await owner.publish(put)
            assert result.accepted, result.message
    return cid


async def start_huddle(running: RunningRelay, who: Identity, parent: str) -> str:
    """The huddle channel of `buzz huddle start --channel <parent>` run as `who` (it must succeed)."""
    return (await buzz(running.url, who, "huddle", "start", "--channel", parent)).json["huddle_channel_id"]


def audio_url(running: RunningRelay, channel_id: str) -> str:
    return f"{running.url}/huddle/{channel_id}/audio"


def frame(seq: int, payload: bytes = b"\x78\x01\x02", level: int = -20, flags: int = 0) -> bytes:
    """A v2 client frame (§6.1)."""
    return client_frame(FrameHeader(seq & 0xFFFF, (seq * 960) & 0xFFFFFFFF, level, flags), payload)


async def pong(ws: aiohttp.ClientWebSocketResponse, data: bytes) -> None:
    """Answer a relay Ping. A Ping read from the buffer after the relay already closed the
    connection cannot be answered, and need not be: the write is skipped, not an error (this race
    once failed the mesh failover test now and then)."""
    with contextlib.suppress(aiohttp.ClientConnectionResetError, ConnectionResetError):
        await ws.pong(data)


class AudioPeer:
    """A raw audio-socket client (aiohttp, no auto-pong) for protocol tests."""

    def __init__(self, session: aiohttp.ClientSession, ws: aiohttp.ClientWebSocketResponse) -> None:
        self.session = session
        self.ws = ws
        self.joined: dict[str, Any] | None = None
        self.close_frame: tuple[int, str] | None = None  # set by expect_close

    @classmethod
    async def connect(cls, running: RunningRelay, channel_id: str) -> AudioPeer:
        session = aiohttp.ClientSession()
        ws = await session.ws_connect(audio_url(running, channel_id), autoping=False, max_msg_size=1 << 16)
        return cls(session, ws)

    async def challenge(self) -> str:
        msg = await self.recv_json()
        assert msg["type"] == "challenge", msg
        return str(msg["challenge"])

    async def send_auth(
        self,
        running: RunningRelay,
        who: Identity,
        challenge: str,
        version: int | None = 2,
        *,
        relay_url: str | None = None,
        created_at: int | None = None,
        parent: str | None = None,
    ) -> None:
        event = build_auth_event(who.secret, challenge, relay_url or running.url, created_at)
        body: dict[str, Any] = {"type": "auth", "parent_channel_id": parent, "event": event.to_dict()}
        if version is not None:
            body["protocol_version"] = version
        await self.ws.send_str(orjson.dumps(body).decode())

    async def recv_json(self, timeout: float = 5.0) -> dict[str, Any]:
        while True:
            msg = await self.ws.receive(scaled(timeout))
            if msg.type == aiohttp.WSMsgType.PING:
                await pong(self.ws, msg.data)
                continue
            assert msg.type == aiohttp.WSMsgType.TEXT, msg
            return orjson.loads(msg.data)  # type: ignore[no-any-return]

    async def recv_binary(self, timeout: float = 5.0) -> bytes:
        while True:
            msg = await self.ws.receive(scaled(timeout))
            if msg.type == aiohttp.WSMsgType.PING:
                await pong(self.ws, msg.data)
                continue
            if msg.type == aiohttp.WSMsgType.TEXT:
                continue  # joined/left of others
            assert msg.type == aiohttp.WSMsgType.BINARY, msg
            return bytes(msg.data)

    async def expect_close(self, timeout: float = 5.0) -> list[dict[str, Any]]:
        """Read until the socket closes; returns the text messages seen (pings answered)."""
        texts = []
        async with asyncio.timeout(scaled(timeout)):
            while True:
                msg = await self.ws.receive()
                if msg.type == aiohttp.WSMsgType.TEXT:
                    texts.append(orjson.loads(msg.data))
                elif msg.type == aiohttp.WSMsgType.PING:
                    await pong(self.ws, msg.data)
                elif msg.type in (
                    aiohttp.WSMsgType.CLOSE,
                    aiohttp.WSMsgType.CLOSED,
                    aiohttp.WSMsgType.CLOSING,
                ):
                    if msg.type == aiohttp.WSMsgType.CLOSE:  # the relay's code and reason, as sent
                        self.close_frame = (int(msg.data), str(msg.extra or ""))
                    return texts

    async def close(self) -> None:
        await self.ws.close()
        await self.session.close()


async def join(
    running: RunningRelay, who: Identity, channel_id: str, version: int | None = 2, **kw: Any
) -> AudioPeer:
    """Connect and authenticate; returns the peer with its first message in `joined` (or error)."""
    peer = await AudioPeer.connect(running, channel_id)
    await peer.send_auth(running, who, await peer.challenge(), version, **kw)
    peer.joined = await peer.recv_json()
    return peer


async def refused(
    running: RunningRelay, who: Identity, channel_id: str, version: int | None = 2, **kw: Any
) -> dict[str, Any]:
    """Join expecting an error: returns it after checking that the relay closed the socket."""
    peer = await join(running, who, channel_id, version, **kw)
    try:
        assert peer.joined is not None and peer.joined["type"] == "error", peer.joined
        assert await peer.expect_close() == []
        return peer.joined
    finally:
        await peer.close()


async def until_seated(client: HuddleClient, running: asyncio.Task[Any]) -> None:
    """Wait until `client` holds its seat (the relay's `joined`), or until `running` (its
    `run()`) ends first: then fail with what ended it."""
    seated = asyncio.create_task(client.seated.wait())
    await asyncio.wait({seated, running}, return_when=asyncio.FIRST_COMPLETED)
    seated.cancel()
    assert client.seated.is_set(), running.exception() if running.done() else None


async def texts_until(peer: AudioPeer, want: int, kind: str) -> list[dict[str, Any]]:
    """Text messages of `kind` until `want` of them arrived (binary frames are skipped)."""
    seen: list[dict[str, Any]] = []
    async with asyncio.timeout(scaled(10)):
        while len(seen) < want:
            msg = await peer.ws.receive()
            if msg.type == aiohttp.WSMsgType.PING:
                await pong(peer.ws, msg.data)
            elif msg.type == aiohttp.WSMsgType.TEXT:
                body = orjson.loads(msg.data)
                if body["type"] == kind:
                    seen.append(body)
            else:
                assert msg.type == aiohttp.WSMsgType.BINARY, msg
    return seen


async def sees_left(peers: Sequence[AudioPeer], pubkey: str, index: int) -> None:
    """Each of `peers` gets `left` for the seat (`pubkey`, `index`) (other messages skipped)."""
    for peer in peers:
        left = (await texts_until(peer, 1, "left"))[0]
        assert (left["pubkey"], left["peer_index"]) == (pubkey, index)
