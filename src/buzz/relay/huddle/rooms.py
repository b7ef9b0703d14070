"""The relay's room registry with one admission lock per room (huddle.md §5.1–§5.4, §5.8).

`huddle_admission.Room` makes the decisions; this module owns the asyncio side: the per-room lock,
and a count of joiners holding a handle between "get or create" and the end of their admission,
so that one joiner's failure path never reclaims a room another joiner is about to enter (it
would leave that joiner alone in an orphan room). The last holder of an empty room reclaims it.

Seams for §9: rooms are keyed `(community_id, channel_id)`; `by_channel` is the fail-closed
lookup the mesh needs; `admit_at_index` of huddle_wire covers the ingress mirror room.
"""

from __future__ import annotations

import asyncio
import collections
from dataclasses import dataclass, field

from buzz.core.huddle_admission import Admitted, Refused, Removed, Room, RoomRegistry
from buzz.core.mesh_lease import Lease
from buzz.relay.huddle.fanout import PeerSink


@dataclass(eq=False)
class RoomSlot:
    """A registered room, its admission lock, its holders and its counters."""

    community_id: str
    channel_id: str
    room: Room[PeerSink]
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    holders: int = 0
    stats: collections.Counter[str] = field(default_factory=collections.Counter)
    lease: Lease | None = None  # mesh on: the lease this replica owns the room under (§9.5)


class LocalRooms:
    """`(community_id, channel_id) → RoomSlot`; every Room call runs under the slot's lock."""

    def __init__(self) -> None:
        self.registry: RoomRegistry[PeerSink] = RoomRegistry()
        self._slots: dict[Room[PeerSink], RoomSlot] = {}

    def acquire(self, community_id: str, channel_id: str) -> RoomSlot:
        """Get or create the room (atomic: no await) and hold it until `release`."""
        room = self.registry.get_or_create(community_id, channel_id)
        slot = self._slots.get(room)
        if slot is None:
            slot = self._slots[room] = RoomSlot(community_id, channel_id, room)
        slot.holders += 1
        return slot

    def release(self, slot: RoomSlot) -> None:
        slot.holders -= 1

    def reclaim_if_empty(self, slot: RoomSlot) -> bool:
        """Remove the room if it is empty and nobody holds it (§5.1); True when removed.

        The next joiner builds a fresh Room, so the version pin is released (§5.4).
        """
        if slot.holders > 0 or not slot.room.is_empty:
            return False
        removed = self.registry.reclaim(slot.community_id, slot.channel_id, slot.room)
        if removed or self._slots.get(slot.room) is slot:
            self._slots.pop(slot.room, None)
        return removed

    async def admit(
        self, slot: RoomSlot, pubkey: str, version: int, sink: PeerSink
    ) -> Admitted[PeerSink] | Refused:
        """§5.4 under the admission lock."""
        async with slot.lock:
            return slot.room.admit(pubkey, version, sink)

    async def remove(self, slot: RoomSlot, peer_id: str) -> Removed[PeerSink] | None:
        """§5.8 step 1 under the admission lock."""
        async with slot.lock:
            return slot.room.remove(peer_id)

    async def reopen(self, slot: RoomSlot) -> None:
        """Clear `ended` after a failed archive (§5.8 step 4)."""
        async with slot.lock:
            slot.room.reopen()

    def get(self, community_id: str, channel_id: str) -> RoomSlot | None:
        room = self.registry.rooms.get((community_id, channel_id))
        return self._slots.get(room) if room is not None else None

    def by_channel(self, channel_id: str) -> RoomSlot | None:
        """The one room carrying `channel_id` in any community; None when none or several (§9.8)."""
        room = self.registry.by_channel(channel_id)
        return self._slots.get(room) if room is not None else None

    def peer_count(self) -> int:
        """Peers admitted across every registered room (for metrics)."""
        return sum(len(slot.room.peers) for slot in self._slots.values())

    def __len__(self) -> int:
        return len(self.registry.rooms)
