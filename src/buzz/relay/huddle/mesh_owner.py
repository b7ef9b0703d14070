"""The owner's side of remote peers (huddle.md §9.6 owner steps, §9.8): seats other replicas
hold in the rooms this replica owns — each a `RemoteSink` whose audio becomes fan-out envelopes
and whose `joined`/`left` become `roster_delta`s — registration fenced against Redis, removal,
drain, and the media envelopes ingress replicas send in."""

from __future__ import annotations

import logging
import struct
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import orjson

from buzz.core.huddle_admission import Admitted
from buzz.core.mesh_envelope import (
    FANOUT,
    NO_PEER,
    Envelope,
    fixed_part,
)
from buzz.core.mesh_lease import PROFILE, GenerationFloor, Lease, fence_check
from buzz.relay.huddle.fanout import PeerSink, forward
from buzz.relay.huddle.mesh_streams import (
    GOODBYE_BANNED,
    GOODBYE_ENDED,
    GOODBYE_REVOKED,
    OwnerStream,
    fenced_field,
)

if TYPE_CHECKING:
    from collections.abc import Callable

    from buzz.relay.huddle.mesh_link import MeshLink
    from buzz.relay.huddle.parts import HuddleParts
    from buzz.relay.huddle.rooms import RoomSlot

# seq and target_index: an owner's fan-out envelope is fixed part + these + the relay → client
# message `[author][frame]` the room already built (the same bytes as `pack_fast`, one concat).
_SEQ_TARGET = struct.Struct(">QB")

log = logging.getLogger(__name__)


class RemoteSink(PeerSink):
    """A remote peer's seat in the owner's room: audio becomes fan-out envelopes, `joined`/`left`
    become `roster_delta`s on its control stream. Always receives the v2 prefix `[author][frame]`
    (the envelope payload); the ingress adds what its client's version needs."""

    __slots__ = ("fixed", "hub", "owner_stream", "seq", "target_index")

    def __init__(self, hub: OwnerSide, stream: OwnerStream, slot: RoomSlot) -> None:
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


@dataclass(frozen=True, eq=False, slots=True)
class RemoteSeat:
    """The owner's view of a seat another replica holds in its room, shaped like an audio
    socket for revocation (relay.md §4.7) and the ban watch: `pubkey`, `huddle_channel()`,
    `revoke()`, `ban()`. Ending it is the owner's own decision (docs/decisions.md): it does not
    wait for the ingress replica to notice."""

    hub: OwnerSide
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


class OwnerSide:
    """`RemoteHub`'s owner half (state in `RemoteHub`)."""

    huddles: HuddleParts
    runtime_id: str
    floor: GenerationFloor
    owner_streams: dict[str, OwnerStream]
    registered: dict[tuple[str, int, str, int], OwnerStream]
    link: MeshLink
    send: Callable[[OwnerStream, dict[str, Any]], None]  # `RemoteHub.send`
    spawn: Callable[[Any], None]  # `RemoteHub.spawn`

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
        if owned is None or fenced != fenced_field(owned.session, owned.lease):
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


async def _channel_or_none(huddles: HuddleParts, channel_id: str) -> Any:
    try:
        return await huddles.relay.store.get_channel(channel_id)
    except Exception:
        log.exception("huddle end: channel re-read failed for %s", channel_id)
        return None
