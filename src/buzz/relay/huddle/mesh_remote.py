"""Remote peers (huddle.md §9.6–§9.8): the owner's side (remote seats in its room, fan-out
envelopes back) and the ingress side (registration at the owner, the mirror room, delivery).

Control streams are one per remote client socket; messages follow §9.6 with `fenced` on each.
Every envelope is checked against the generation floor and the registration it claims; the
owner's fan-out skips the author (`Room.receivers`), and the ingress never delivers a frame to
the index that wrote it nor forwards it back onto the mesh.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import struct
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import orjson

from buzz.core.huddle_wire import (
    CLIENT_JOINED_TIMEOUT,
    OWNER_UNREACHABLE,
    ROOM_ENDED,
    ROOM_FULL,
    Admitted,
    ErrorMessage,
    Joined,
    Left,
    RosterEntry,
    join_rejected,
    relay_frame,
    upgrade_required,
)
from buzz.core.mesh_envelope import (
    ENV_VERSION,
    FANOUT,
    FIXED_LEN,
    HEADER_LEN,
    INGRESS,
    MIN_LEN,
    NO_PEER,
    Envelope,
    fixed_part,
    pack_fast,
    unpack,
)
from buzz.core.mesh_lease import PROFILE, GenerationFloor, Lease, fence_check
from buzz.relay.huddle.fanout import PeerSink, forward
from buzz.relay.huddle.membership import JoinDenied
from buzz.relay.huddle.mesh_link import MeshLink

if TYPE_CHECKING:
    from buzz.relay.huddle.rooms import RoomSlot
    from buzz.relay.huddle.service import Huddles

log = logging.getLogger(__name__)

PING_S = 5.0  # §9.9 Redis transport: `ping` on every ingress stream this often
SILENCE_TICKS = 3  # an owner stream silent this many pings (15 s) is closed
# §9.6 ingress step 1 waits for the owner's answer until the answer, a `goodbye` or the stream's
# close; a stream to a replica that is not listening is closed at once (`on_undelivered`). The
# wait is also bounded below the client's own (CLIENT_JOINED_TIMEOUT, 5 s after its `auth`), so
# a slow owner gets the client a coded `huddle_owner_unreachable` (retry with backoff) rather than
# silence until it gives up; a registration given up on is unregistered at the owner (decision
# 85), so nothing is held for it (docs/decisions.md 134).
REGISTER_ANSWER_S = CLIENT_JOINED_TIMEOUT - 1.0
# seq and target_index: an owner's fan-out envelope is fixed part + these + the relay → client
# message `[author][frame]` the room already built (the same bytes as `pack_fast`, one concat).
_SEQ_TARGET = struct.Struct(">QB")
_TARGET_AT = HEADER_LEN - 1  # byte 98; the payload `[author][frame]` starts at HEADER_LEN
# `goodbye` reasons of this project beyond §9.6's three (docs/decisions.md): the owner dropped
# the stream's seat because its participant lost access to the channel or was banned. An
# ingress replica that does not know them tears the stream down as for any `goodbye`.
GOODBYE_REVOKED = "access_revoked"
GOODBYE_BANNED = "banned"
GOODBYE_ENDED = "huddle_ended"  # the huddle's channel was archived while the seat was held
# Each reason → the seat method that ends it, on the owner (`RemoteSeat`) and on the ingress
# replica's client socket (`AudioSocket`): both name them alike.
SEAT_ENDINGS = {GOODBYE_REVOKED: "revoke", GOODBYE_BANNED: "ban", GOODBYE_ENDED: "end"}


def _fenced(session: str, lease: Lease) -> dict[str, Any]:
    return {"session_id": session, "generation": lease.generation, "owner": lease.owner}


# -- owner side -------------------------------------------------------------------------------
class RemoteSink(PeerSink):
    """A remote peer's seat in the owner's room: audio becomes fan-out envelopes, `joined`/`left`
    become `roster_delta`s on its control stream. Always receives the v2 prefix `[author][frame]`
    (the envelope payload); the ingress adds what its client's version needs."""

    __slots__ = ("fixed", "hub", "owner_stream", "seq", "target_index")

    def __init__(self, hub: RemoteHub, stream: OwnerStream, slot: RoomSlot) -> None:
        super().__init__(
            f"room {slot.channel_id} remote {stream.stream}", hub.huddles.stats, slot.stats, self._gone, 2
        )
        self.hub = hub
        self.owner_stream = stream
        self.seq = 0
        self.target_index = NO_PEER
        s = stream
        self.fixed = fixed_part(FANOUT, s.session, s.lease.generation, s.lease.owner, hub.runtime_id)

    def offer_audio(self, message: bytes) -> bool:
        env = self.fixed + _SEQ_TARGET.pack(self.seq % 2**64, self.target_index) + message
        self.seq += 1
        self.hub.link.send_media(self.owner_stream.sender, env)
        self.stats.count("mesh_fanout_envelopes_total")
        return True

    def offer_control(self, text: str) -> bool:
        body = orjson.loads(text)
        kind = body.get("type")
        if kind not in ("joined", "left"):
            return True
        entry = {"pubkey": body["pubkey"], "peer_index": body["peer_index"]}
        self.hub.send(self.owner_stream, {"t": "roster_delta", "revision": body["revision"], kind: entry})
        return True

    def flush_index(self, peer_index: int) -> int:
        return 0  # nothing queued here: envelopes leave at once

    def _gone(self, code: int, reason: bytes) -> None:
        """Closed by the owner (lost lease, overflow): tell the ingress, drop the seat."""
        self.hub.send(self.owner_stream, {"t": "goodbye", "reason": "stale_generation"})
        self.hub.spawn(self.hub.owner_remove(self.owner_stream))


@dataclass(eq=False)
class OwnerStream:
    stream: str
    sender: str
    session: str
    lease: Lease
    community: str | None = None
    slot: RoomSlot | None = None
    peer_id: str | None = None
    peer_index: int | None = None
    lifecycle_parent: str | None = None  # where 48103 goes if this peer leaves the room last
    pubkey: str | None = None
    last_seen: float = field(default_factory=time.monotonic)


@dataclass(frozen=True, eq=False, slots=True)
class RemoteSeat:
    """The owner's view of a seat another replica holds in its room, shaped like an audio
    socket for revocation (relay.md §4.7) and the ban watch: `pubkey`, `huddle_channel()`,
    `revoke()`, `ban()`. Ending it is the owner's own decision (docs/decisions.md): it does not
    wait for the ingress replica to notice."""

    hub: RemoteHub
    stream: OwnerStream

    @property
    def pubkey(self) -> str | None:
        return self.stream.pubkey if self.stream.slot is not None else None

    def huddle_channel(self) -> str | None:
        return self.stream.session if self.stream.slot is not None else None

    def revoke(self) -> None:
        self.hub.drop_seat(self.stream, GOODBYE_REVOKED)

    def ban(self) -> None:
        self.hub.drop_seat(self.stream, GOODBYE_BANNED)

    def end(self) -> None:
        self.hub.drop_seat(self.stream, GOODBYE_ENDED)


# -- ingress side -----------------------------------------------------------------------------
@dataclass(eq=False)
class IngressStream:
    """One local client's registration at a remote owner."""

    stream: str
    session: str
    lease: Lease
    community: str
    pubkey: str
    lifecycle_parent: str
    answer: asyncio.Future[dict[str, Any]] = field(
        default_factory=lambda: asyncio.get_running_loop().create_future()
    )
    roster: dict[int, str] = field(default_factory=dict)  # index → pubkey, as the owner says
    revision: int = 0
    peer_index: int | None = None
    sink: PeerSink | None = None
    version: int = 2
    seq: int = 0
    closed: bool = False
    fixed: bytes = b""  # the ingress envelopes' per-stream bytes (`fixed_part`), packed once


class RemoteHub:
    """Both sides for one replica, on one `MeshLink`."""

    def __init__(
        self, huddles: Huddles, runtime_id: str, link_factory: Callable[[RemoteHub], MeshLink]
    ) -> None:
        self.huddles = huddles
        self.runtime_id = runtime_id
        self.floor = GenerationFloor()
        self.owner_streams: dict[str, OwnerStream] = {}
        self.registered: dict[tuple[str, int, str, int], OwnerStream] = {}  # (session, gen, sender, author)
        self.ingress_streams: dict[str, IngressStream] = {}
        self.by_target: dict[tuple[str, int], IngressStream] = {}  # (session, local index)
        self.link = link_factory(self)
        self.tasks: set[asyncio.Task[Any]] = set()
        self.ping_s = PING_S
        self._watch: asyncio.Task[None] | None = None

    async def start(self) -> None:
        await self.link.start()
        self._watch = asyncio.get_running_loop().create_task(self._watch_loop(), name="mesh-watch")

    async def _watch_loop(self) -> None:
        """Liveness both ways (§9.5, §9.6, §9.9). Ingress: ping each stream, and close the clients
        of a stream whose lease is no longer in Redis as registered (the owner died or lost it;
        a Redis error counts the same: fail closed), so they rejoin under the next owner. Owner:
        drop the peers of a stream silent for SILENCE_TICKS pings (its replica died)."""
        while True:
            await asyncio.sleep(self.ping_s)
            with contextlib.suppress(Exception):
                await self._watch_once()

    async def _watch_once(self) -> None:
        mesh = self.huddles.mesh
        assert mesh is not None
        checked: dict[tuple[str, str], Lease | None] = {}
        for stream in list(self.ingress_streams.values()):
            if stream.sink is None or stream.closed:
                continue
            self.send(stream, {"t": "ping"})
            key = (stream.session, stream.community)
            if key not in checked:
                try:
                    checked[key] = (await mesh.store.read(stream.session, stream.community))[0]
                except Exception:
                    checked[key] = None
            if checked[key] != stream.lease:
                log.warning(
                    "huddle owner of %s is gone (lease %s): closing its remote clients",
                    stream.session,
                    checked[key],
                )
                self._teardown_ingress(stream)
        deadline = time.monotonic() - self.ping_s * SILENCE_TICKS
        for owned in list(self.owner_streams.values()):
            if owned.last_seen < deadline:  # a seat, or a hello whose registration never came
                log.warning("huddle remote stream %s silent: removing its peer", owned.stream)
                await self.owner_remove(owned)

    def on_undelivered(self, stream_id: str) -> None:
        """A control message of `stream_id` reached no subscriber: the replica at the other end
        is not listening (killed, or its listener lost Redis), so no answer can come. Ingress: a
        registration still waiting is answered as by a `goodbye`, `huddle_owner_unreachable`
        now rather than after the wait (a rejoin after the owner died); a joined client stays
        until the lease check closes it, since until the dead owner's lease expires a rejoin
        could not succeed anyway (decision 78). Owner: the stream's seat is removed, as after
        its silence check."""
        stream = self.ingress_streams.get(stream_id)
        if stream is not None:
            if not stream.answer.done():
                log.warning(
                    "huddle owner of %s is not listening (lease %s): join refused as unreachable",
                    stream.session,
                    stream.lease,
                )
                stream.answer.set_result({"t": "goodbye"})
            return
        owned = self.owner_streams.get(stream_id)
        if owned is not None:
            log.warning("huddle remote stream %s is not listening: removing its peer", stream_id)
            self.spawn(self.owner_remove(owned))

    def seats(self) -> list[RemoteSeat]:
        """The seats other replicas hold in the rooms this replica owns."""
        return [RemoteSeat(self, s) for s in list(self.owner_streams.values()) if s.slot is not None]

    def drop_seat(self, stream: OwnerStream, reason: str) -> None:
        """The owner ends a remote seat whose participant lost access or was banned: `goodbye`
        with `reason` (the ingress closes its client with the matching error), then the normal
        removal — `left` to everyone else and, when it was the last seat, the room's end, as
        for a local seat closed the same way."""
        if self.owner_streams.get(stream.stream) is not stream:
            return  # already gone (the ingress unregistered it first, or dropped a moment ago)
        del self.owner_streams[stream.stream]  # at once: a second drop sends no second goodbye
        self.huddles.stats.count("mesh_seats_dropped_total")
        self.send(stream, {"t": "goodbye", "reason": reason})
        self.spawn(self.owner_remove(stream, left_by_choice=True))

    def spawn(self, coro: Any) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    def send(self, stream: OwnerStream | IngressStream, message: dict[str, Any]) -> None:
        if isinstance(stream, OwnerStream):
            peer, lease = stream.sender, stream.lease
        else:
            peer, lease = stream.lease.owner, stream.lease
        self.link.send_control(peer, stream.stream, {**message, "fenced": _fenced(stream.session, lease)})

    # -- ingress: registration ------------------------------------------------------------------
    async def register(
        self, lease: Lease, community: str, session: str, pubkey: str, version: int, parent: str
    ) -> IngressStream:
        """§9.6 ingress step 1: hello + register_peer, then the owner's answer. Raises JoinDenied
        with the mapped §4.2 error; no answer in REGISTER_ANSWER_S (the stream's silence close)
        is huddle_owner_unreachable. A registration given up on — that timeout, or this
        coroutine cancelled because the client went away first — is unregistered at the owner
        (`unregister_peer`, `goodbye session_ended`), so a seat the owner granted meanwhile is
        freed rather than held until its silence check. `parent` (the lifecycle parent this
        replica verified, §3.6) rides along in `register_peer` as `lifecycle_parent`, so the
        owner can post 48103 there when this peer leaves last (docs/decisions.md)."""
        fixed = fixed_part(INGRESS, session, lease.generation, lease.owner, self.runtime_id)
        stream = IngressStream(
            str(uuid.uuid4()), session, lease, community, pubkey, parent, version=version, fixed=fixed
        )
        self.ingress_streams[stream.stream] = stream
        hello = {"t": "hello", "stream": stream.stream, "sender": self.runtime_id, "profile": PROFILE}
        self.send(stream, hello)
        self.send(
            stream,
            {"t": "register_peer", "community_id": community, "pubkey": pubkey,
             "protocol_version": version, "lifecycle_parent": parent},
        )  # fmt: skip
        try:
            answer = await asyncio.wait_for(asyncio.shield(stream.answer), REGISTER_ANSWER_S)
        except TimeoutError:
            self._abandon(stream)
            raise JoinDenied(OWNER_UNREACHABLE) from None
        except BaseException:
            self._abandon(stream)
            raise
        if answer.get("t") == "peer_registered":
            return stream
        stream.closed = True  # refused: the owner holds nothing for this stream
        self._forget_ingress(stream)
        raise JoinDenied(_rejection(answer))

    def _abandon(self, stream: IngressStream) -> None:
        """Given up before the answer: the owner frees whatever it granted (§9.6 step 6's pair,
        as step 2 does for a failed mirror admission); counted for operators."""
        if not stream.closed:
            self.huddles.stats.count("mesh_registrations_abandoned_total")
        self.unregister(stream)

    def attach(self, stream: IngressStream, sink: PeerSink) -> Joined | None:
        """After the mirror admission: route fan-out for this index to `sink`; the client's
        `joined` from the owner's snapshot (with every `roster_delta` that arrived since the
        answer). None when the stream was torn down in between: the caller removes the mirror
        seat and refuses the join (the client rejoins)."""
        assert stream.peer_index is not None
        if stream.closed:
            return None
        stream.sink = sink
        self.by_target[(stream.session, stream.peer_index)] = stream
        self.send(stream, {"t": "ping"})  # the answer's acknowledgement: the owner hears us at once
        return Joined(stream.revision, stream.pubkey, stream.peer_index, _roster(stream.roster))

    def unregister(self, stream: IngressStream) -> None:
        """Client left first (§9.6 ingress step 6). While this replica drains, its clients are
        moving, not leaving: `goodbye draining` alone, so the owner never ends the room for it."""
        if stream.closed:
            return
        stream.closed = True
        if self.huddles.draining:
            self.send(stream, {"t": "goodbye", "reason": "draining"})
        else:
            self.send(stream, {"t": "unregister_peer", "pubkey": stream.pubkey})
            self.send(stream, {"t": "goodbye", "reason": "session_ended"})
        self._forget_ingress(stream)

    def _forget_ingress(self, stream: IngressStream) -> None:
        self.ingress_streams.pop(stream.stream, None)
        if (
            stream.peer_index is not None
            and self.by_target.get((stream.session, stream.peer_index)) is stream
        ):
            del self.by_target[(stream.session, stream.peer_index)]
        if not any(s.session == stream.session for s in self.ingress_streams.values()):
            self.floor.forget(stream.session)

    def send_ingress(self, stream: IngressStream, frame: bytes) -> None:
        """A local client's validated frame to the owner (§9.8): never to local clients."""
        assert stream.peer_index is not None
        env = pack_fast(stream.fixed, stream.seq, NO_PEER, stream.peer_index, frame)
        stream.seq += 1
        self.link.send_media(stream.lease.owner, env)

    # -- arrivals ---------------------------------------------------------------------------
    async def on_control(self, stream_id: str, message: dict[str, Any]) -> None:
        kind = message.get("t")
        ingress = self.ingress_streams.get(stream_id)
        if ingress is not None:
            await self._ingress_control(ingress, kind, message)
        else:
            await self._owner_control(stream_id, kind, message)

    async def _ingress_control(self, stream: IngressStream, kind: Any, message: dict[str, Any]) -> None:
        if message.get("fenced") != _fenced(stream.session, stream.lease):
            return self._teardown_ingress(stream)
        if kind in ("peer_registered", "register_rejected"):
            if stream.answer.done():
                return None
            if kind == "peer_registered":
                # read here, not in `register`: deltas can follow before that coroutine resumes
                roster = message["roster"]
                stream.peer_index = int(message["peer_index"])
                stream.revision = int(roster["revision"])
                stream.roster = {int(p["peer_index"]): str(p["pubkey"]) for p in roster["peers"]}
            stream.answer.set_result(message)
        elif kind == "roster_delta" and stream.peer_index is not None:
            revision = int(message["revision"])
            if revision <= stream.revision:
                return None
            if revision != stream.revision + 1:
                return self._teardown_ingress(stream)  # a gap: the client rejoins
            stream.revision = revision
            sink = stream.sink  # None until attached: the delta then lands in `joined` itself
            if "joined" in message:
                entry = message["joined"]
                stream.roster[int(entry["peer_index"])] = str(entry["pubkey"])
                if sink is not None:
                    joined = Joined(
                        revision, str(entry["pubkey"]), int(entry["peer_index"]), _roster(stream.roster)
                    )
                    sink.offer_control(joined.to_text(sink.protocol_version))
            elif "left" in message:
                index = int(message["left"]["peer_index"])
                stream.roster.pop(index, None)
                if sink is not None:
                    sink.flush_index(index)
                    sink.offer_control(
                        Left(revision, str(message["left"]["pubkey"]), index).to_text(sink.protocol_version)
                    )
        elif kind == "goodbye":
            if not stream.answer.done():
                stream.answer.set_result({"t": "goodbye"})
            reason = message.get("reason")
            if isinstance(reason, str) and reason in SEAT_ENDINGS and self._end_client(stream, reason):
                return None
            self._teardown_ingress(stream)
        return None

    def _end_client(self, stream: IngressStream, reason: str) -> bool:
        """The owner dropped this client's seat (lost access, banned, huddle ended): end the
        client's socket as this replica would have (`not a member` / `restricted: not a relay
        member`, close 1008; `room_ended`, close 1000); its cleanup emits 48102. False when the client is not seated here yet (the
        caller closes the stream as for any `goodbye`)."""
        for sock in list(self.huddles.sockets):
            if sock.seat is not None and sock.seat.remote is stream:
                stream.closed = True  # the owner holds nothing any more: nothing to unregister
                self._forget_ingress(stream)
                getattr(sock, SEAT_ENDINGS[reason])()
                return True
        return False

    def _teardown_ingress(self, stream: IngressStream) -> None:
        """§9.6 ingress step 5: close the client (it rejoins and re-resolves). The owner may
        still hold the seat (a gap, a fence mismatch, a lease this replica could not confirm):
        `unregister_peer` with `rejoin` frees it there without ending the room, since the client
        is coming back; an owner that is gone or already dropped the stream ignores it."""
        if stream.closed:
            return
        stream.closed = True
        self.send(stream, {"t": "unregister_peer", "pubkey": stream.pubkey, "rejoin": True})
        if stream.sink is not None:
            stream.sink.close(1012, b"huddle owner gone")
        self._forget_ingress(stream)

    async def _owner_control(self, stream_id: str, kind: Any, message: dict[str, Any]) -> None:
        fenced = message.get("fenced")
        if not isinstance(fenced, dict):
            return
        owned = self.owner_streams.get(stream_id)
        if owned is not None:
            owned.last_seen = time.monotonic()
        if kind == "hello":
            try:
                session = str(fenced["session_id"])
                lease = Lease(str(fenced["owner"]), int(fenced["generation"]))
                sender = str(message["sender"])
            except (KeyError, ValueError, TypeError):
                return
            if owned is None and message.get("profile") == PROFILE:
                self.owner_streams[stream_id] = OwnerStream(stream_id, sender, session, lease)
            return
        if owned is None or fenced != _fenced(owned.session, owned.lease):
            return
        if kind == "register_peer":
            await self._owner_register(owned, message)
        elif kind == "unregister_peer" and message.get("rejoin") is True:
            await self.owner_remove(owned)  # torn down at the ingress: its client rejoins
        elif kind == "unregister_peer" or (kind == "goodbye" and message.get("reason") == "session_ended"):
            await self.owner_remove(owned, left_by_choice=True)  # the client left: may end the room
        elif kind == "goodbye":
            await self.owner_remove(owned)

    async def _owner_register(self, stream: OwnerStream, message: dict[str, Any]) -> None:
        huddles, mesh = self.huddles, self.huddles.mesh
        assert mesh is not None
        community = str(message.get("community_id"))
        pubkey, version = str(message.get("pubkey")), int(message.get("protocol_version", 2))
        if stream.community is not None or community != huddles.settings.community_id:
            return await self.owner_remove(stream)  # a second registration or another community
        stream.community = community
        parent = message.get("lifecycle_parent")
        stream.lifecycle_parent = parent if isinstance(parent, str) else None
        stream.pubkey = pubkey

        def reject(**fields: Any) -> None:
            self.owner_streams.pop(stream.stream, None)  # nothing held: the ingress forgets it too
            self.send(stream, {"t": "register_rejected", "pubkey": pubkey, **fields})

        try:  # §9.6 owner step 3: fence-checked against Redis before admission
            lease, counter = await mesh.store.read(stream.session, community)
        except Exception:
            return reject(reason="fenced", fence_reason="no_active_lease")
        reason = fence_check(stream.lease, lease, counter)
        if reason is None and stream.lease.owner != self.runtime_id:
            reason_text: str | None = "owner_mismatch"
        else:
            reason_text = reason.value if reason is not None else None
        if reason_text is not None or not mesh.owns((community, stream.session), stream.lease):
            return reject(reason="fenced", fence_reason=reason_text or "owner_mismatch")
        slot = huddles.rooms.acquire(community, stream.session)
        try:
            sink = RemoteSink(self, stream, slot)
            result = await huddles.rooms.admit(slot, pubkey, version, sink)
        finally:
            huddles.rooms.release(slot)
        if not isinstance(result, Admitted):
            huddles.rooms.reclaim_if_empty(slot)
            pinned = (
                {"pinned": result.pinned, "requested": result.requested} if result.pinned is not None else {}
            )
            return reject(
                reason=result.reason.value.replace("upgrade_required", "version_mismatch"), **pinned
            )
        peer = result.peer
        sink.epoch, sink.target_index = peer.epoch, peer.peer_index
        stream.slot, stream.peer_id, stream.peer_index = slot, peer.peer_id, peer.peer_index
        self.registered[(stream.session, stream.lease.generation, stream.sender, peer.peer_index)] = stream
        roster = {
            "revision": result.revision,
            "peers": [{"pubkey": e.pubkey, "peer_index": e.peer_index} for e in result.joined.peers],
        }
        self.send(
            stream,
            {"t": "peer_registered", "pubkey": pubkey, "peer_index": peer.peer_index, "roster": roster},
        )
        texts = {v: result.joined.to_text(v) for v in {p.sink.protocol_version for p in result.recipients}}
        for other in result.recipients:
            if other.peer_id != peer.peer_id:
                other.sink.offer_control(texts[other.sink.protocol_version])
        if self.owner_streams.get(stream.stream) is not stream:
            # dropped while the admission awaited (drain, silence check): nothing else would
            # ever free this seat, so it goes now (`left` follows the `joined` just sent)
            await self.owner_remove(stream)
        return None

    async def owner_remove(self, stream: OwnerStream, left_by_choice: bool = False) -> None:
        """§9.6 owner step 5: the stream's peer leaves (normal §5.8 cleanup: `left` to the others;
        when it left by choice, `unregister_peer` or `goodbye session_ended`, and was the last
        seat, the room ends here as for a local last leaver: archive, 48103). A stream lost
        (silence, lost lease, drain) never ends the room: its clients are reconnecting."""
        self.owner_streams.pop(stream.stream, None)
        slot, peer_id = stream.slot, stream.peer_id
        stream.slot = stream.peer_id = None
        if stream.peer_index is not None:
            self.registered.pop(
                (stream.session, stream.lease.generation, stream.sender, stream.peer_index), None
            )
        if slot is None or peer_id is None:
            return
        huddles = self.huddles
        removed = await huddles.rooms.remove(slot, peer_id)
        if removed is None:
            return
        texts = {v: removed.left.to_text(v) for v in {p.sink.protocol_version for p in removed.recipients}}
        for other in removed.recipients:
            other.sink.flush_index(removed.peer.peer_index)
            other.sink.offer_control(texts[other.sink.protocol_version])
        if removed.should_end and not left_by_choice:
            await huddles.rooms.reopen(slot)  # a lost stream: its clients rejoin, nothing ends
        if removed.should_end and left_by_choice:
            channel = await _channel_or_none(huddles, slot.channel_id)
            has_ttl = channel is not None and channel.ttl_seconds is not None
            parent = stream.lifecycle_parent if has_ttl and stream.lifecycle_parent else slot.channel_id
            await huddles.finish_removal(slot, removed, parent, has_ttl, stream.pubkey or removed.peer.pubkey)
            return
        if huddles.rooms.reclaim_if_empty(slot):
            await huddles.reclaimed(slot)

    async def drain_owned(self) -> None:
        """§9.5 drain on the owner: `goodbye draining` on every control stream (the ingress
        replica closes those clients and they rejoin), and their seats removed; nothing ends."""
        for stream in list(self.owner_streams.values()):
            self.send(stream, {"t": "goodbye", "reason": "draining"})
            await self.owner_remove(stream)

    def on_media(self, envelopes: list[memoryview]) -> None:
        """The envelopes of one Redis message, in one pass. Owner → ingress fan-out envelopes
        (the bulk: one per remote receiver per frame) take `_fanout_fast`; the rest, and any
        fan-out envelope it does not vouch for, the full checks of `_ingress_media`."""
        checked: dict[bytes, tuple[str, int, str] | None] = {}  # fixed part → (session, gen, owner)
        for data in envelopes:
            if not self._fanout_fast(data, checked):
                self._on_envelope(data)

    def _fanout_fast(self, data: memoryview, checked: dict[bytes, tuple[str, int, str] | None]) -> bool:
        """Deliver one owner → ingress envelope with its header checks done once per fixed part
        (version … sender) in this Redis message: `sender == owner` and the generation floor
        (nothing awaits in between, so neither can change). Per envelope: the target's
        registration under that very lease, no echo to the author's index, one room for the
        session (§9.8). False (nothing done) when the full path must decide."""
        if len(data) < MIN_LEN or data[0] != ENV_VERSION or data[1] != FANOUT:
            return False
        fixed = bytes(data[:FIXED_LEN])
        if fixed in checked:
            header = checked[fixed]
        else:
            env = unpack(data)  # type: ignore[arg-type]  # slices and unpack_from take memoryviews
            passed = (
                env is not None
                and env.sender == env.owner
                and self.floor.admit(env.session_id, env.generation)
                and self.huddles.rooms.by_channel(env.session_id) is not None
            )
            header = (env.session_id, env.generation, env.owner) if passed and env is not None else None
            checked[fixed] = header
        if header is None:
            return False
        session, generation, owner = header
        target, author = data[_TARGET_AT], data[HEADER_LEN]
        stream = self.by_target.get((session, target))
        if (stream is None or stream.sink is None or stream.lease.generation != generation
                or stream.lease.owner != owner or target == author):  # fmt: skip
            return False
        sink = stream.sink
        if sink.protocol_version >= 3:
            sink.offer_audio(bytes((author, 0)) + data[HEADER_LEN + 1 :])
        else:
            sink.offer_audio(bytes(data[HEADER_LEN:]))  # exactly `[author][frame]`
        return True

    def _on_envelope(self, data: memoryview | bytes) -> None:
        env = unpack(data)  # type: ignore[arg-type]  # slices and unpack_from take memoryviews
        stats = self.huddles.stats
        if env is None:
            return stats.count("mesh_envelopes_malformed_total")
        if env.direction == INGRESS:
            return self._owner_media(env)
        return self._ingress_media(env)

    def _owner_media(self, env: Envelope) -> None:
        stats = self.huddles.stats
        stream = self.registered.get((env.session_id, env.generation, env.sender, env.author_index))
        if stream is None or env.owner != self.runtime_id or stream.slot is None:
            return stats.count("mesh_envelopes_unregistered_total")
        if not self.floor.admit(env.session_id, env.generation):
            return stats.count("mesh_envelopes_stale_total")
        slot = stream.slot
        if self.huddles.rooms.by_channel(env.session_id) is not slot:
            return stats.count("mesh_envelopes_ambiguous_total")  # fail closed (§9.8)
        author = slot.room.peers.get(stream.peer_id or "")
        if author is None:
            return None
        receivers = (p.sink for p in slot.room.receivers(author.peer_id))
        forward(env.frame, author.protocol_version, author.peer_index, receivers, author.sink)
        return None

    def _ingress_media(self, env: Envelope) -> None:
        stats = self.huddles.stats
        if env.sender != env.owner:
            return stats.count("mesh_envelopes_unregistered_total")
        if not self.floor.admit(env.session_id, env.generation):
            return stats.count("mesh_envelopes_stale_total")
        stream = self.by_target.get((env.session_id, env.target_index))
        if (stream is None or stream.sink is None or stream.lease.generation != env.generation
                or stream.lease.owner != env.owner or env.target_index == env.author_index):  # fmt: skip
            return stats.count("mesh_envelopes_unregistered_total")
        if self.huddles.rooms.by_channel(env.session_id) is None:
            return stats.count("mesh_envelopes_ambiguous_total")
        sink = stream.sink
        epoch = 0 if sink.protocol_version >= 3 else None
        sink.offer_audio(relay_frame(env.author_index, env.frame, epoch))
        return None

    async def close(self) -> None:
        if self._watch is not None:
            self._watch.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._watch
        for stream in list(self.ingress_streams.values()):
            self.unregister(stream)
        await self.link.flush(1.0)  # unregister_peer / goodbye reach the owners before we stop
        await self.link.stop()
        for task in list(self.tasks):
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task


async def _channel_or_none(huddles: Huddles, channel_id: str) -> Any:
    try:
        return await huddles.relay.store.get_channel(channel_id)
    except Exception:
        log.exception("huddle end: channel re-read failed for %s", channel_id)
        return None


def _roster(roster: dict[int, str]) -> tuple[RosterEntry, ...]:
    return tuple(sorted(RosterEntry(i, p) for i, p in roster.items()))


def _rejection(answer: dict[str, Any]) -> ErrorMessage:
    reason = answer.get("reason")
    if reason == "room_full":
        return ROOM_FULL
    if reason == "room_ended":
        return ROOM_ENDED
    if reason == "version_mismatch" and isinstance(answer.get("pinned"), int):
        return upgrade_required(int(answer["pinned"]), int(answer.get("requested", 0)))
    if reason == "fenced":
        fence = answer.get("fence_reason")
        return join_rejected(fence if isinstance(fence, str) else None)  # type: ignore[arg-type]
    return OWNER_UNREACHABLE
