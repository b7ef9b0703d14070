"""The relay's huddle service: settings, rooms, counters, lifecycle, and the HTTP entry point of
`GET /huddle/{channel_id}/audio` (huddle.md §2.1–§2.3)."""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from aiohttp import web
from redis.asyncio import Redis

from buzz.core.channel_id import is_channel_id
from buzz.core.huddle_admission import Removed
from buzz.relay.huddle.fanout import HuddleStats, PeerSink
from buzz.relay.huddle.lease_redis import LeaseStore
from buzz.relay.huddle.lifecycle import Lifecycle
from buzz.relay.huddle.mesh import Ownership
from buzz.relay.huddle.mesh_link import MeshLink
from buzz.relay.huddle.mesh_owner import RemoteSeat
from buzz.relay.huddle.mesh_remote import RemoteHub
from buzz.relay.huddle.rooms import LocalRooms, RoomSlot
from buzz.relay.huddle.settings import HuddleSettings
from buzz.relay.huddle.socket import AudioSocket, AudioWebSocket
from buzz.relay.ingestion.ratelimit import SlidingWindow

if TYPE_CHECKING:
    from collections.abc import Callable

    from buzz.relay.huddle.host import HuddleHost

log = logging.getLogger(__name__)

CONNECTION_LIMIT_BODY = "relay: connection limit reached"
DRAIN_CLOSE = (1012, b"relay draining; reconnect")  # §9.5 drain: local huddle clients, mesh on
DRAIN_WAIT_S = 5.0  # how long a drain waits for the closed sockets' cleanup (48102, unregister)
HUDDLE_ROUTE = "/huddle/{channel_id}/audio"  # HUDDLE_AUDIO_PATH of §11.1
BAD_CHANNEL_BODY = "invalid channel id: must be a canonical UUID"


class Huddles:
    """Everything the audio route needs, owned by the `Relay` (`relay.huddles`)."""

    def __init__(self, relay: HuddleHost, settings: HuddleSettings | None = None) -> None:
        self.relay = relay
        config = relay.config
        self.settings = settings or HuddleSettings.from_env(
            config.workspace_id, replicated=bool(config.redis_url), mesh=config.mesh
        )
        if self.settings.off_reason is not None:
            log.warning("%s", self.settings.off_reason)  # the operator must see why joins are refused
        self.rooms = LocalRooms()
        self.mesh: Ownership | None = None  # §9 room ownership; None when BUZZ_MESH is off
        self.remote: RemoteHub | None = None  # §9.6–§9.8 remote peers, with the mesh
        if self.settings.mesh and config.redis_url:
            store = LeaseStore(
                config.redis_url,
                f"buzz-huddle-lease:{config.workspace_id}",
                config.redis_timeout_ms / 1000,
                self.settings.lease_ttl_s,
            )
            self.mesh = Ownership(store, self.settings.lease_renew_s)
            link_redis = Redis.from_url(config.redis_url, socket_connect_timeout=2.0, socket_timeout=5.0)
            runtime = self.mesh.runtime_id
            self.remote = RemoteHub(
                self,
                runtime,
                lambda hub: MeshLink(link_redis, runtime, hub.on_control, hub.on_media, hub.on_undelivered),
            )
        self.stats = HuddleStats()
        self.joins = SlidingWindow(self.settings.join_limit, self.settings.join_window_s)  # per member
        self.lifecycle = Lifecycle(relay)
        self.background: set[asyncio.Task[None]] = set()
        self.sockets: set[AudioSocket] = set()
        self.draining = False  # §9.5: SIGTERM with the mesh on; new joins get huddle_relay_draining

    def install(self, app: web.Application) -> None:
        """Register the audio route (§2.1) and close audio sockets when the server shuts down
        (before aiohttp waits for handlers, so shutdown does not hang on live huddles)."""
        app.router.add_get(HUDDLE_ROUTE, self.handle)
        app.on_shutdown.append(self._on_shutdown)

    async def _on_shutdown(self, app: web.Application) -> None:
        if self.mesh is not None:
            await self.drain()
            return
        closing = [s.ws.close(code=1001, message=b"relay shutting down") for s in list(self.sockets)]
        await asyncio.gather(*closing, return_exceptions=True)

    async def drain(self) -> None:
        """§9.5 drain (SIGTERM, mesh on). New joins are refused (`huddle_relay_draining`); every
        owned room's lease is released first, so a client that reconnects to another replica
        takes the room over at once instead of waiting out the TTL; each remote peer's replica
        gets `goodbye draining` (it closes those clients, they rejoin); local clients are closed
        with 1012 "relay draining; reconnect" after the others got their `left`. No room ends or
        is archived: the huddle goes on elsewhere. Ingress registrations are unregistered at their
        owners, and the mesh outbox is flushed before the link stops. Runs once."""
        if self.draining:
            return
        self.draining = True
        assert self.mesh is not None
        loop = asyncio.get_running_loop()
        started = loop.time()
        remote_peers = len(self.remote.owner_streams) if self.remote is not None else 0
        self.relay.telemetry.huddle_drain_started(len(self.mesh.owned), remote_peers, len(self.sockets))
        await self.mesh.close_leases()
        if self.remote is not None:
            await self.remote.drain_owned()
        closing = [s.ws.close(code=DRAIN_CLOSE[0], message=DRAIN_CLOSE[1]) for s in list(self.sockets)]
        await asyncio.gather(*closing, return_exceptions=True)
        deadline = loop.time() + DRAIN_WAIT_S
        while self.sockets and loop.time() < deadline:
            await asyncio.sleep(0.02)  # the sockets' cleanup: `left`, 48102, unregister_peer
        self.relay.telemetry.huddle_drain_done(loop.time() - started, len(self.sockets))
        if self.remote is not None:
            await self.remote.close()
            await self.remote.link.redis.aclose()
        await self.mesh.close()

    async def start(self) -> None:
        """Listen on this replica's mesh channels (before any join can name it the owner)."""
        if self.remote is not None:
            await self.remote.start()

    def mesh_counters(self) -> dict[str, int] | None:
        """The mesh's counters (envelopes, outbox, leases) for metrics; None when BUZZ_MESH is off."""
        if self.mesh is None:
            return None
        counters = {k: v for k, v in self.stats.counters.items() if k.startswith("mesh_")}
        counters.update(self.mesh.stats)
        if self.remote is not None:
            counters.update(self.remote.link.stats)
        return counters

    def remote_seats(self) -> list[RemoteSeat]:
        """Seats other replicas hold in the rooms this replica owns (revocation and the ban
        watch re-check them, `buzz.relay.auth.sessions`); none with the mesh off."""
        return self.remote.seats() if self.remote is not None else []

    def close_room(self, slot: RoomSlot, code: int, reason: bytes) -> None:
        """Close every local socket of the room (a lost lease, §9.5): their cleanup runs as usual."""
        for peer in list(slot.room.peers.values()):
            peer.sink.close(code, reason)

    async def finish_removal(
        self, slot: RoomSlot, removed: Removed[PeerSink], parent: str, has_ttl: bool, leaver: str
    ) -> None:
        """§5.8 steps 4–6 after a removal on this room's owner (or a single process): when it was
        the last seat, archive a TTL channel (a failure reopens the room, no 48103), reclaim,
        then 48103 signed by the relay with `p` = the last leaver. A channel its starter already
        ended is not announced again. While draining with the mesh, nothing ends (the room moves
        to another replica)."""
        channel_id = slot.channel_id
        if not removed.should_end or (self.draining and self.mesh is not None):
            if removed.should_end:
                await self.rooms.reopen(slot)
            if self.rooms.reclaim_if_empty(slot):
                await self.reclaimed(slot)
            return
        ended_before = has_ttl and await self.lifecycle.already_ended(channel_id)
        if has_ttl and not ended_before and not await self.lifecycle.archive(channel_id):
            await self.rooms.reopen(slot)  # the room stays usable; no 48103
            return
        if self.rooms.reclaim_if_empty(slot):
            await self.reclaimed(slot)
        if not ended_before:
            await self.lifecycle.ended(parent, channel_id, leaver)

    async def reclaimed(self, slot: RoomSlot) -> None:
        """§5.8 step 6: the room is gone; the owner releases its lease (fenced on its generation)."""
        if self.mesh is not None and slot.lease is not None:
            await self.mesh.release(slot.community_id, slot.channel_id, slot.lease)

    def new_sink(
        self, slot: RoomSlot, pubkey: str, on_close: Callable[[int, bytes], None], protocol_version: int = 2
    ) -> PeerSink:
        label = f"room {slot.channel_id} peer {pubkey}"
        return PeerSink(label, self.stats, slot.stats, on_close, protocol_version)

    async def handle(self, request: web.Request) -> web.StreamResponse:
        """`GET /huddle/{channel_id}/audio`: pre-upgrade checks in the §2.2 order, then the socket.

        400 for a channel id that is not a canonical UUID; 503 when the connection budget shared
        with the Nostr sockets is spent (the permit is held until the socket closes).
        """
        channel_id = request.match_info["channel_id"]
        if not is_channel_id(channel_id):
            return web.Response(status=400, text=BAD_CHANNEL_BODY)
        relay = self.relay
        if len(relay.connections) >= relay.max_connections:
            return web.Response(status=503, text=CONNECTION_LIMIT_BODY)
        ws = AudioWebSocket()
        sock = AudioSocket(self, ws, channel_id, request.host, request.transport)
        relay.connections.add(sock)
        self.sockets.add(sock)
        try:
            await ws.prepare(request)
            await sock.run()
        finally:
            relay.connections.discard(sock)
            self.sockets.discard(sock)
        return ws
