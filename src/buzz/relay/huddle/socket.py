"""One audio socket: handshake, join decision, media and cleanup (huddle.md §2–§7).

`AudioSocket.run` is the whole life of one participant's socket after the upgrade:

1. send `challenge` (§3.1) and wait up to 5 s for the first well-formed `auth` (§3.2–§3.3);
2. evaluate the join in the §4.1 order, stopping at the first failure with its exact §4.2
   message, then close;
3. on success queue `joined` to every seat (§5.5), emit 48101, and serve: heartbeat (§2.4),
   inbound frames fanned out (§6), `leave` (§5.7);
4. cleanup (§5.8): remove the seat, `left` to the others, 48102, and end the huddle when this
   was the last seat.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Coroutine
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from aiohttp import WSCloseCode, WSMsgType, web

from buzz.core import nip42
from buzz.core.event import Event
from buzz.core.huddle_admission import Admitted
from buzz.core.huddle_control import (
    AUDIO_UNAVAILABLE,
    AUTH_FAILED,
    HUDDLE_HAS_ENDED,
    NOT_A_MEMBER,
    NOT_RELAY_MEMBER,
    OWNER_UNREACHABLE,
    RELAY_DRAINING,
    ROOM_ENDED,
    Auth,
    Challenge,
    ErrorMessage,
    Ignored,
    Leave,
    auth_timeout_close,
    check_version,
    join_rate_limited,
    parse_client_message,
    read_client_message,
)
from buzz.core.huddle_wire import MAX_AUDIO_FRAME_BYTES, MAX_WEBSOCKET_MESSAGE_BYTES, Ingress, ingress_verdict
from buzz.core.mesh_lease import Lease, RemoteOwner
from buzz.core.token_bucket import TokenBucket
from buzz.relay.huddle.fanout import PeerSink, forward
from buzz.relay.huddle.membership import ChannelGrant, JoinDenied, channel_admission, relay_admission
from buzz.relay.huddle.mesh import LOST_CLOSE
from buzz.relay.huddle.rooms import RoomSlot
from buzz.relay.transport.websocket import refused_size

if TYPE_CHECKING:
    from buzz.relay.huddle.mesh_streams import IngressStream
    from buzz.relay.huddle.parts import HuddleParts

log = logging.getLogger(__name__)

OVERSIZE_LOG_EVERY = 1000  # an oversized frame is logged once, then every 1000th on that socket
REVOKED_CLOSE = (1008, b"channel access revoked")  # a seat whose participant lost access
ENDED_CLOSE = (1000, b"huddle has ended")  # the huddle's channel was archived (decision 98)
BANNED_CLOSE = (1008, b"blocked")  # a seat whose participant was banned (as the main relay closes)
OVER_BUDGET_METRIC = "huddle_audio_frames_over_budget_total"  # beyond the seat's frame budget


class AudioWebSocket(web.WebSocketResponse):
    """The audio socket's WebSocket (§2.3): messages of up to MAX_WEBSOCKET_MESSAGE_BYTES are
    read (aiohttp refuses a message of exactly its `max_msg_size`, hence one more), a longer one
    is closed 1009 by aiohttp with the reason `message too big (<n> > 8192 bytes)`, where aiohttp
    gives none. No auto-pong, no heartbeat (§2.4 is the relay's own), no compression."""

    def __init__(self) -> None:
        super().__init__(
            max_msg_size=MAX_WEBSOCKET_MESSAGE_BYTES + 1, autoping=False, heartbeat=None, compress=False
        )

    async def close(self, *, code: int = WSCloseCode.OK, message: bytes = b"", drain: bool = True) -> bool:
        if code == WSCloseCode.MESSAGE_TOO_BIG and not message and not self.closed:
            size = refused_size(self)
            message = f"message too big ({size or 'over'} > {MAX_WEBSOCKET_MESSAGE_BYTES} bytes)".encode()
        return await super().close(code=code, message=message, drain=drain)


class _SilentClose(Exception):
    """Close with no message: a §4.1 step 5 database error (fail closed), or a client that went
    away before the owner answered its registration."""


@dataclass(slots=True)
class Seat:
    """An admitted participant on this socket."""

    slot: RoomSlot
    grant: ChannelGrant
    pubkey: str
    peer_id: str
    peer_index: int
    protocol_version: int
    sink: PeerSink
    remote: IngressStream | None = None  # mesh ingress: the registration at the room's owner


class AudioSocket:
    """One participant in one huddle (§1 item 4). Counts against the relay's connection budget."""

    def __init__(
        self,
        huddles: HuddleParts,
        ws: web.WebSocketResponse,
        channel_id: str,
        host: str | None,
        transport: asyncio.BaseTransport | None = None,
    ) -> None:
        self.huddles = huddles
        self.transport = transport
        self.relay = huddles.relay
        self.ws = ws
        self.channel_id = channel_id
        self.host = host
        self.challenge = Challenge.fresh()
        self.seat: Seat | None = None
        self.owners: frozenset[str] = frozenset()  # whose ban ends the seat too (`Admission`)
        self.missed_pongs = 0
        self._oversized = 0
        self._reading: asyncio.Task[None] | None = None  # the seat's read loop, while serving
        self._ending: tuple[int, bytes] | None = None  # the close an end/revoke/ban asked for

    @property
    def pubkey(self) -> str | None:
        """The admitted participant (None before admission): the revocation filter's key."""
        return self.seat.pubkey if self.seat is not None else None

    def huddle_channel(self) -> str | None:
        """The huddle channel of an admitted seat (relay.md §4.7 revocation covers it)."""
        return self.channel_id if self.seat is not None else None

    def revoke(self) -> None:
        """The participant lost access to the channel: `{"type":"error","message":"not a
        member"}` (§4.2 step 3, so clients do not retry), then close 1008; cleanup follows
        (`left` to the others, 48102; on an ingress replica, unregistered at the owner)."""
        self._end_seat(NOT_A_MEMBER, REVOKED_CLOSE, "huddle_seats_revoked_total")

    def ban(self) -> None:
        """The participant (or its NIP-OA owner) was banned while seated: the §4.2 step 2
        refusal a rejoin would get (`restricted: not a relay member`, no retry), then close
        1008 "blocked"; the same cleanup as `revoke`."""
        self._end_seat(NOT_RELAY_MEMBER, BANNED_CLOSE, "huddle_seats_banned_total")

    def end(self) -> None:
        """The huddle ended while seated (its channel archived: the starter's explicit end, or
        the TTL): `room_ended`, the error a rejoin of an ended room gets (§4.2, no retry), then
        close 1000; the usual cleanup follows (`left` to the others, 48102)."""
        self._end_seat(ROOM_ENDED, ENDED_CLOSE, "huddle_seats_ended_total")

    def _end_seat(self, error: ErrorMessage, close: tuple[int, bytes], counter: str) -> None:
        if self.ws.closed or self._ending is not None:
            return
        self._ending = close
        self.huddles.stats.count(counter)

        async def end() -> None:
            with contextlib.suppress(Exception):
                await self.ws.send_str(error.to_text())
            # The close is `run`'s, from the task that reads: aiohttp's close from another task
            # while one reads drops the TCP connection right after the close frame, and a client
            # still sending audio then gets a reset that can discard this error unread (it saw
            # "no close frame" instead of `room_ended` under load). Read by `run`, the close
            # waits for the client's own close frame, discarding its audio meanwhile.
            if self._reading is not None:
                self._reading.cancel()
            else:
                with contextlib.suppress(Exception):
                    await self.ws.close(code=close[0], message=close[1])

        task = asyncio.get_running_loop().create_task(end())
        self.huddles.background.add(task)
        task.add_done_callback(self.huddles.background.discard)

    async def run(self) -> None:
        """Serve the socket until it closes; never raises for client behaviour."""
        ws = self.ws
        try:
            await ws.send_str(self.challenge.to_text())
            auth = await self._await_auth()
            if auth is None:
                return
            try:
                self.seat = await self._join(auth)
            except JoinDenied as denied:
                await ws.send_str(denied.error.to_text())
                return
            except _SilentClose:
                return
            await self._serve(self.seat)
        except ConnectionError:
            log.debug("huddle socket on channel %s went away", self.channel_id)
        finally:
            if self.seat is not None:
                await self._cleanup(self.seat)
            if not ws.closed:
                code, message = self._ending or (WSCloseCode.OK, b"")
                with contextlib.suppress(Exception):
                    await ws.close(code=code, message=message)

    # -- §3 handshake ----------------------------------------------------------------------
    async def _await_auth(self) -> Auth | None:
        """The first well-formed `auth` within AUTH_TIMEOUT; None on timeout, close or error.

        Binary messages, bad JSON, other types and a `leave` are ignored while waiting (§3.3: a
        later valid `auth` still joins), but counted: on timeout the socket is closed with
        `auth_timeout_close`'s 1008 and a reason naming the last one, since §3.3 sends no
        error message and a bare close left a client guessing what it did wrong."""
        timeout_s = self.huddles.settings.auth_timeout_s
        ignored, last = 0, None
        try:
            async with asyncio.timeout(timeout_s):
                while True:
                    msg = await self.ws.receive()
                    if msg.type == WSMsgType.TEXT:
                        parsed = read_client_message(msg.data)
                        if isinstance(parsed, Auth):
                            return parsed
                        last = parsed.reason if isinstance(parsed, Ignored) else "leave before auth"
                    elif msg.type == WSMsgType.BINARY:
                        last = "binary message before auth"
                    elif msg.type in (WSMsgType.CLOSE, WSMsgType.CLOSING, WSMsgType.CLOSED, WSMsgType.ERROR):
                        return None
                    else:
                        continue  # pings and pongs are not messages
                    ignored += 1
        except TimeoutError:
            code, reason = auth_timeout_close(timeout_s, ignored, last)
            log.info("huddle socket on channel %s closed %d: %s", self.channel_id, code, reason)
            with contextlib.suppress(Exception):
                await self.ws.close(code=code, message=reason.encode())
            return None

    # -- §4.1 join decision ------------------------------------------------------------------
    async def _join(self, auth: Auth) -> Seat:
        relay, huddles = self.relay, self.huddles
        event = await self._verify(auth)  # step 1
        admitted = await relay_admission(relay, event)  # step 2
        pubkey, self.owners = admitted.pubkey, admitted.owners
        if not huddles.joins.allow(pubkey):  # the member's join rate (docs/decisions.md 133)
            huddles.stats.count("huddle_joins_rate_limited_total")
            settings = huddles.settings
            raise JoinDenied(join_rate_limited(settings.join_limit, settings.join_window_s))
        grant = await channel_admission(relay, self.channel_id, auth.parent_channel_id, pubkey)  # step 3
        community_id = huddles.settings.community_id
        fresh: Lease | None = None  # the lease this join won; released unless the join succeeds
        if huddles.mesh is not None:  # step 4, mesh on: resolve the owner (§9.4)
            if huddles.draining:
                raise JoinDenied(RELAY_DRAINING)
            owner = await huddles.mesh.resolve(community_id, self.channel_id)
            if isinstance(owner, RemoteOwner):
                return await self._join_remote(auth, pubkey, grant, owner.lease)
            fresh = owner.lease if owner.fresh else None
        elif not huddles.settings.audio_available:  # step 4, mesh off
            raise JoinDenied(AUDIO_UNAVAILABLE)
        slot = huddles.rooms.acquire(community_id, self.channel_id)  # step 5
        admitted: Admitted[PeerSink] | None = None
        try:
            await self._recheck(auth)  # steps 5–6
            sink = huddles.new_sink(slot, pubkey, self._close_soon, auth.protocol_version)
            result = await huddles.rooms.admit(slot, pubkey, auth.protocol_version, sink)  # step 8
            if not isinstance(result, Admitted):
                raise JoinDenied(result.error())
            admitted = result
        finally:
            huddles.rooms.release(slot)
            if admitted is None:
                huddles.rooms.reclaim_if_empty(slot)
                if fresh is not None and huddles.mesh is not None:
                    await huddles.mesh.release(community_id, self.channel_id, fresh)
        if fresh is not None and huddles.mesh is not None:
            slot.lease = fresh
            huddles.mesh.install(
                (community_id, self.channel_id), fresh, lambda: huddles.close_room(slot, *LOST_CLOSE)
            )
        peer = admitted.peer
        peer.sink.epoch = peer.epoch
        texts = {v: admitted.joined.to_text(v) for v in {p.protocol_version for p in admitted.recipients}}
        for other in admitted.recipients:  # step 9: to every seat, the joiner included (§5.5)
            other.sink.offer_control(texts[other.protocol_version])
        seat = Seat(slot, grant, pubkey, peer.peer_id, peer.peer_index, peer.protocol_version, peer.sink)
        await huddles.lifecycle.joined(
            grant.lifecycle_parent, self.channel_id, pubkey, admitted.revision, peer.peer_id
        )
        return seat

    async def _join_remote(self, auth: Auth, pubkey: str, grant: ChannelGrant, lease: Lease) -> Seat:
        """§4.1 steps 5–9 on an ingress replica: channel re-read, version, owner registration
        (§9.6), then the mirror room at the owner's index; `joined` goes to this client only."""
        huddles = self.huddles
        hub = huddles.remote
        if hub is None:
            raise JoinDenied(OWNER_UNREACHABLE)
        await self._recheck(auth)
        community_id = huddles.settings.community_id
        stream = await self._until_client_gone(
            hub.register(
                lease, community_id, self.channel_id, pubkey, auth.protocol_version, grant.lifecycle_parent
            )
        )
        assert stream.peer_index is not None
        slot = huddles.rooms.acquire(community_id, self.channel_id)
        admitted: Admitted[PeerSink] | None = None
        try:
            sink = huddles.new_sink(slot, pubkey, self._close_soon, auth.protocol_version)
            async with slot.lock:
                result = slot.room.admit_at_index(pubkey, auth.protocol_version, sink, stream.peer_index)
            if not isinstance(result, Admitted):
                hub.unregister(stream)
                raise JoinDenied(result.error())
            admitted = result
        finally:
            huddles.rooms.release(slot)
            if admitted is None:
                huddles.rooms.reclaim_if_empty(slot)
        peer = admitted.peer
        joined = hub.attach(stream, peer.sink)
        if joined is None:  # torn down since the answer (goodbye, gap, fence): the client rejoins
            async with slot.lock:
                removed = slot.room.remove(peer.peer_id)
                if removed is not None and removed.should_end:
                    slot.room.reopen()  # a mirror never ends (§9.2): another joiner may hold it
            huddles.rooms.reclaim_if_empty(slot)
            raise JoinDenied(OWNER_UNREACHABLE)
        peer.sink.offer_control(joined.to_text(peer.protocol_version))
        seat = Seat(
            slot, grant, pubkey, peer.peer_id, peer.peer_index, peer.protocol_version, peer.sink, stream
        )
        await huddles.lifecycle.joined(
            grant.lifecycle_parent, self.channel_id, pubkey, stream.revision, peer.peer_id
        )
        return seat

    async def _recheck(self, auth: Auth) -> None:
        """§4.1 steps 5–6: the channel re-read (a database error closes silently, fail closed;
        a missing or archived channel is `huddle has ended`), then the protocol version."""
        try:
            channel = await self.relay.store.get_channel(self.channel_id)
        except Exception:
            log.exception("huddle room fetch: channel re-read failed for %s", self.channel_id)
            raise _SilentClose from None
        if channel is None or channel.archived_at is not None:
            raise JoinDenied(HUDDLE_HAS_ENDED)
        version_error = check_version(auth.protocol_version)
        if version_error is not None:
            raise JoinDenied(version_error)

    async def _until_client_gone(self, registration: Coroutine[Any, Any, IngressStream]) -> IngressStream:
        """Await the owner's answer while watching the client: a close, an error or `leave`
        before it cancels the registration, which then unregisters at the owner (a seat granted
        meanwhile is freed at once, before the client's retry can find the room full). Nothing
        else is expected before `joined`: frames are dropped (no seat yet), pings answered."""
        answer = asyncio.ensure_future(registration)
        watch = asyncio.ensure_future(self._client_leaves())
        try:
            await asyncio.wait((answer, watch), return_when=asyncio.FIRST_COMPLETED)
        finally:  # also when this join is cancelled: the registration must not outlive it
            watch.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await watch
            if not answer.done():
                answer.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await answer
        if answer.cancelled():  # the client went first
            raise _SilentClose
        return answer.result()

    async def _client_leaves(self) -> None:
        """Return once the client closes, errs or sends `leave` (before it was admitted)."""
        while True:
            msg = await self.ws.receive()
            if msg.type in (WSMsgType.CLOSE, WSMsgType.CLOSING, WSMsgType.CLOSED, WSMsgType.ERROR):
                return
            if msg.type == WSMsgType.PING:
                await self.ws.pong(msg.data)
            elif msg.type == WSMsgType.TEXT and isinstance(parse_client_message(msg.data), Leave):
                return

    async def _verify(self, auth: Auth) -> Event:
        """§3.4 with the main relay's NIP-42 verifier. The auth event is never stored or logged."""
        try:
            event = Event.from_json(auth.event)
            nip42.check_auth_event(
                event, self.challenge.challenge, self.relay.relay_urls(self.host), int(time.time())
            )
            await self.relay.ingest.verify(event)
        except Exception:
            raise JoinDenied(AUTH_FAILED) from None
        return event

    # -- §2.4, §5.7, §6 after admission --------------------------------------------------------
    async def _serve(self, seat: Seat) -> None:
        writer = asyncio.create_task(seat.sink.run_writer(self.ws, self.transport))
        heartbeat = asyncio.create_task(self._heartbeat(seat.sink))
        reading = self._reading = asyncio.create_task(self._read_loop(seat))
        try:
            await asyncio.wait({reading})  # cancelled by `_end_seat`: the seat was ended
            if not reading.cancelled():
                reading.result()
        finally:
            self._reading = None
            for task in (reading, writer, heartbeat):
                task.cancel()
            for task in (reading, writer, heartbeat):
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task

    async def _read_loop(self, seat: Seat) -> None:
        room, sink, stats = seat.slot.room, seat.sink, self.huddles.stats
        version, index, peer_id = seat.protocol_version, seat.peer_index, seat.peer_id
        remote, hub = seat.remote, self.huddles.remote
        # The seat's budgets (docs/limits.md, issue 24 item 15): frames beyond the fan-out
        # budget are dropped and counted; beyond the read budget the socket waits unread (its
        # sender's TCP window closes), so a flood costs neither fan-out nor unbounded reads.
        settings = self.huddles.settings
        clock = time.monotonic
        budget = TokenBucket.full(settings.seat_frame_rate, settings.seat_frame_burst, clock())
        reads = TokenBucket.full(settings.seat_read_rate, settings.seat_read_burst, clock())
        async for msg in self.ws:
            while not reads.take(clock()):  # a timer may fire early (uvloop counts in ms)
                await asyncio.sleep(reads.wait())
            if msg.type == WSMsgType.BINARY:
                if not budget.take(clock()):
                    stats.count("huddle_audio_frames_in_total")
                    stats.count(OVER_BUDGET_METRIC)
                    continue
                frame: bytes = msg.data
                if remote is not None and hub is not None:  # §9.8: all fan-out goes through the owner
                    verdict = ingress_verdict(frame, version)
                    if verdict is Ingress.FORWARD:
                        hub.send_ingress(remote, frame)
                else:
                    receivers = (p.sink for p in room.receivers(peer_id))
                    verdict = forward(frame, version, index, receivers, sink)
                stats.count("huddle_audio_frames_in_total")
                if verdict is Ingress.TOO_LARGE:
                    self._warn_oversized(len(frame))
                elif verdict is Ingress.TOO_SHORT:
                    stats.count("huddle_audio_frames_too_short_total")
            elif msg.type == WSMsgType.TEXT:
                if isinstance(parse_client_message(msg.data), Leave):
                    return  # §5.7: start cleanup, no reply
            elif msg.type == WSMsgType.PING:
                sink.offer_socket_control(("pong", msg.data))
            elif msg.type == WSMsgType.PONG:
                self.missed_pongs = 0
            elif msg.type == WSMsgType.ERROR:
                return

    def _warn_oversized(self, size: int) -> None:
        self.huddles.stats.count("huddle_audio_frames_oversized_total")
        if self._oversized % OVERSIZE_LOG_EVERY == 0:
            log.warning(
                "huddle frame of %d bytes dropped (max %d) on channel %s",
                size,
                MAX_AUDIO_FRAME_BYTES,
                self.channel_id,
            )
        self._oversized += 1

    async def _heartbeat(self, sink: PeerSink) -> None:
        """§2.4: first tick at once; each tick counts a missed pong; close when it reaches 3."""
        settings = self.huddles.settings
        while True:
            self.missed_pongs += 1
            if self.missed_pongs >= settings.max_missed_pongs:
                sink.close(1001, b"ping timeout")
                return
            if not sink.offer_socket_control(("ping", b"")):
                return
            await asyncio.sleep(settings.heartbeat_interval_s)

    def _close_soon(self, code: int, reason: bytes) -> None:
        if not self.ws.closed:
            task = asyncio.get_running_loop().create_task(self.ws.close(code=code, message=reason))
            self.huddles.background.add(task)
            task.add_done_callback(self.huddles.background.discard)

    # -- §5.8 cleanup --------------------------------------------------------------------------
    async def _cleanup(self, seat: Seat) -> None:
        huddles = self.huddles
        if seat.remote is not None:
            await self._cleanup_remote(seat, seat.remote)
            return
        try:
            removed = await huddles.rooms.remove(seat.slot, seat.peer_id)
            if removed is None:
                return
            texts = {v: removed.left.to_text(v) for v in {p.protocol_version for p in removed.recipients}}
            for other in removed.recipients:
                # the leaver's queued frames go before `left`, so none can follow it and be heard
                # under the index's next occupant (issue 13)
                other.sink.flush_index(seat.peer_index)
                other.sink.offer_control(texts[other.protocol_version])
            parent = seat.grant.lifecycle_parent
            await huddles.lifecycle.left(parent, self.channel_id, seat.pubkey, removed.revision, seat.peer_id)
            await huddles.finish_removal(seat.slot, removed, parent, seat.grant.has_ttl, seat.pubkey)
        except Exception:
            log.exception("huddle cleanup failed on channel %s", self.channel_id)

    async def _cleanup_remote(self, seat: Seat, stream: IngressStream) -> None:
        """§9.6 ingress step 6: leave the mirror room, unregister at the owner; the owner sends
        `left` to everyone else, ends and archives. This replica emits 48102 for its client."""
        huddles = self.huddles
        try:
            removed = await huddles.rooms.remove(seat.slot, seat.peer_id)
            if huddles.remote is not None:
                huddles.remote.unregister(stream)
            if removed is not None and removed.should_end:
                await huddles.rooms.reopen(seat.slot)  # only the owner ends rooms (§9.2); a mirror is reused
            if removed is not None:
                parent = seat.grant.lifecycle_parent
                await huddles.lifecycle.left(
                    parent, self.channel_id, seat.pubkey, stream.revision, seat.peer_id
                )
            huddles.rooms.reclaim_if_empty(seat.slot)
        except Exception:
            log.exception("huddle cleanup failed on channel %s", self.channel_id)
