"""The ingress side of remote peers (huddle.md §9.6 ingress steps, §9.8): a local client's
registration at the remote owner, its mirror seat's roster from the owner's deltas, its frames
sent to the owner, and delivery of the owner's fan-out envelopes to local clients — never to
the index that wrote a frame, never forwarded back onto the mesh."""

from __future__ import annotations

import asyncio
import uuid
from typing import TYPE_CHECKING, Any

from buzz.core.huddle_control import (
    OWNER_UNREACHABLE,
    ROOM_ENDED,
    ROOM_FULL,
    ErrorMessage,
    Joined,
    Left,
    RosterEntry,
    join_rejected,
    upgrade_required,
)
from buzz.core.huddle_wire import CLIENT_JOINED_TIMEOUT, relay_frame
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
from buzz.core.mesh_lease import PROFILE, GenerationFloor, Lease
from buzz.relay.huddle.fanout import PeerSink
from buzz.relay.huddle.membership import JoinDenied
from buzz.relay.huddle.mesh_link import MeshLink
from buzz.relay.huddle.mesh_streams import SEAT_ENDINGS, IngressStream, fenced_field

if TYPE_CHECKING:
    from buzz.relay.huddle.parts import HuddleParts

# §9.6 ingress step 1 waits for the owner's answer until the answer, a `goodbye` or the stream's
# close; a stream to a replica that is not listening is closed at once (`on_undelivered`). The
# wait is also bounded below the client's own (CLIENT_JOINED_TIMEOUT, 5 s after its `auth`), so
# a slow owner gets the client a coded `huddle_owner_unreachable` (retry with backoff) rather than
# silence until it gives up; a registration given up on is unregistered at the owner (decision
# 85), so nothing is held for it (docs/decisions.md 134).
REGISTER_ANSWER_S = CLIENT_JOINED_TIMEOUT - 1.0
# An owner's fan-out envelope: fixed part, seq (8 bytes), then target_index at byte 98; the
# payload `[author][frame]` starts at HEADER_LEN.
_TARGET_AT = HEADER_LEN - 1


class IngressSide:
    """`RemoteHub`'s ingress half (state in `RemoteHub`)."""

    huddles: HuddleParts
    runtime_id: str
    floor: GenerationFloor
    ingress_streams: dict[str, IngressStream]
    by_target: dict[tuple[str, int], IngressStream]
    link: MeshLink

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

    async def _ingress_control(self, stream: IngressStream, kind: Any, message: dict[str, Any]) -> None:
        if message.get("fenced") != fenced_field(stream.session, stream.lease):
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
