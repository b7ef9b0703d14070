"""What the audio socket and the mesh's two sides use of `Huddles` (`service.py`), which builds
them: they name `HuddleParts` instead, so no huddle module imports back the one that wires
them (issue 30 item 5)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from buzz.core.huddle_admission import Removed
    from buzz.core.huddle_control import Joined
    from buzz.core.mesh_lease import Lease
    from buzz.relay.huddle.fanout import HuddleStats, PeerSink
    from buzz.relay.huddle.host import HuddleHost
    from buzz.relay.huddle.lifecycle import Lifecycle
    from buzz.relay.huddle.mesh import Ownership
    from buzz.relay.huddle.mesh_streams import IngressStream
    from buzz.relay.huddle.rooms import LocalRooms, RoomSlot
    from buzz.relay.huddle.settings import HuddleSettings
    from buzz.relay.ingestion.ratelimit import SlidingWindow


class IngressHub(Protocol):
    """A mesh replica's ingress side as the audio socket uses it (huddle.md §9.6, §9.8):
    `RemoteHub` in `mesh_remote.py`."""

    async def register(
        self, lease: Lease, community: str, session: str, pubkey: str, version: int, parent: str
    ) -> IngressStream: ...

    def attach(self, stream: IngressStream, sink: PeerSink) -> Joined | None: ...

    def unregister(self, stream: IngressStream) -> None: ...

    def send_ingress(self, stream: IngressStream, frame: bytes) -> None: ...


class HuddleParts(Protocol):
    """The huddle side's shared parts: the relay (`HuddleHost`), settings, counters, rooms, the
    mesh's ownership and ingress hub (None with BUZZ_MESH off), lifecycle events, the join
    limit, background tasks, the open audio sockets, and the room endings `Huddles` decides."""

    relay: HuddleHost
    settings: HuddleSettings
    stats: HuddleStats
    rooms: LocalRooms
    mesh: Ownership | None
    remote: IngressHub | None
    lifecycle: Lifecycle
    joins: SlidingWindow
    background: set[asyncio.Task[None]]
    sockets: set[Any]  # `AudioSocket`s
    draining: bool

    def close_room(self, slot: RoomSlot, code: int, reason: bytes) -> None: ...

    async def finish_removal(
        self, slot: RoomSlot, removed: Removed[PeerSink], parent: str, has_ttl: bool, leaver: str
    ) -> None: ...

    async def reclaimed(self, slot: RoomSlot) -> None: ...

    def new_sink(
        self, slot: RoomSlot, pubkey: str, on_close: Callable[[int, bytes], None], protocol_version: int = 2
    ) -> PeerSink: ...
