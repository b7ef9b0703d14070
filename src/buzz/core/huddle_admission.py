"""Huddle room admission and cleanup, with no I/O (huddle.md §5): `Room` / `RoomRegistry`.
The relay wraps each call in the room's admission lock and owns the sockets and queues (the
`sink` it passes in); each decision says whom to tell (`Admitted`, `Removed`)."""

from __future__ import annotations

import collections
import enum
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from buzz.core.huddle_control import (
    ROOM_ENDED,
    ROOM_FULL,
    ErrorMessage,
    Joined,
    Left,
    RosterEntry,
    upgrade_required,
)
from buzz.core.huddle_wire import (
    EPOCH_MODULUS,
    MAX_PEER_INDEX,
    MAX_PEERS_PER_ROOM,
    REVISION_MODULUS,
    same_media_format,
)

S = TypeVar("S")


@dataclass(frozen=True, slots=True)
class Peer(Generic[S]):
    """One admission (seat). `sink` is whatever the relay attached: its audio/control queues."""

    peer_id: str
    pubkey: str
    peer_index: int
    protocol_version: int
    sink: S
    epoch: int = 0

    @property
    def entry(self) -> RosterEntry:
        return RosterEntry(self.peer_index, self.pubkey, self.epoch)


class Refusal(enum.Enum):
    """Why `Room.admit` refused, in precedence order Ended > Full > VersionMismatch (§5.4)."""

    ENDED = "room_ended"
    FULL = "room_full"
    VERSION_MISMATCH = "upgrade_required"


@dataclass(frozen=True, slots=True)
class Refused:
    """A failed admission; the room is unchanged."""

    reason: Refusal
    requested: int
    pinned: int | None = None

    def error(self) -> ErrorMessage:
        """The §4.2 step 8 message for this refusal."""
        if self.reason is Refusal.ENDED:
            return ROOM_ENDED
        if self.reason is Refusal.FULL:
            return ROOM_FULL
        assert self.pinned is not None
        return upgrade_required(self.pinned, self.requested)


@dataclass(frozen=True, slots=True)
class Admitted(Generic[S]):
    """A successful admission: put `joined` on the control queue of every peer in `recipients`."""

    peer: Peer[S]
    revision: int
    joined: Joined
    recipients: tuple[Peer[S], ...]


@dataclass(frozen=True, slots=True)
class Removed(Generic[S]):
    """A removal (§5.8 step 1): broadcast `left` to `recipients`; `should_end` goes to one caller."""

    peer: Peer[S]
    revision: int
    left: Left
    recipients: tuple[Peer[S], ...]
    should_end: bool


@dataclass(eq=False)
class Room(Generic[S]):
    """Room state of huddle.md §5.2. Call every method under the room's admission lock.

    Pure: no asyncio, no sockets. The relay attaches a `sink` (its queues) to each admission and
    does the broadcasting the returned decisions describe. An exception inside a method marks
    the room unusable, and from then on it refuses every joiner with Ended (§5.4 item 1).
    """

    max_peers: int = MAX_PEERS_PER_ROOM
    peers: dict[str, Peer[S]] = field(default_factory=dict)
    # FIFO (issue 13, where the spec has a LIFO stack): the least recently freed index is reused
    # first, so an index rests as long as possible before it names someone else.
    free_indices: collections.deque[int] = field(default_factory=collections.deque)
    epochs: dict[int, int] = field(default_factory=dict)  # index → epoch of its latest occupancy
    next_fresh: int = 0
    pinned_version: int | None = None
    ended: bool = False
    revision: int = 0
    unusable: bool = False

    @property
    def is_empty(self) -> bool:
        return not self.peers

    def roster(self) -> tuple[RosterEntry, ...]:
        """The complete roster sorted by `peer_index`."""
        return tuple(sorted(p.entry for p in self.peers.values()))

    def receivers(self, sender_peer_id: str) -> Iterator[Peer[S]]:
        """Every peer except the sender's own admission (no echo by `peer_id`, §6.4)."""
        return (p for p in self.peers.values() if p.peer_id != sender_peer_id)

    def _refusal(self, version: int, index_available: bool) -> Refused | None:
        if self.ended or self.unusable:
            return Refused(Refusal.ENDED, version)
        if len(self.peers) >= self.max_peers or not index_available:
            return Refused(Refusal.FULL, version)
        if self.pinned_version is not None and not same_media_format(self.pinned_version, version):
            return Refused(Refusal.VERSION_MISMATCH, version, self.pinned_version)
        return None

    def admit(
        self, pubkey: str, version: int, sink: S, *, peer_id: str | None = None
    ) -> Admitted[S] | Refused:
        """`add_peer(pubkey, version)` of §5.4: Ended > Full > VersionMismatch, else admit.

        The index is the least recently freed one, else `next_fresh` while it is below 255. The
        version check accepts v2 and v3 in one room (`same_media_format`). `peer_id` defaults to
        a fresh UUIDv4.
        """
        index_available = bool(self.free_indices) or self.next_fresh <= MAX_PEER_INDEX
        refused = self._refusal(version, index_available)
        if refused is not None:
            return refused
        try:
            if self.free_indices:
                index = self.free_indices.popleft()
            else:
                index = self.next_fresh
                self.next_fresh += 1
            return self._insert(pubkey, version, sink, index, peer_id)
        except BaseException:
            self.unusable = True
            raise

    def admit_at_index(
        self, pubkey: str, version: int, sink: S, index: int, *, peer_id: str | None = None
    ) -> Admitted[S] | Refused:
        """Mirror-room admission at an owner-assigned index (§9.6 ingress step 2).

        Obeys the cap and the pin; Full when `index` is held locally. Takes `index` off the free
        stack and moves `next_fresh` past it.
        """
        if not 0 <= index <= MAX_PEER_INDEX:
            raise ValueError(f"peer_index must be 0..254, got {index}")
        taken = any(p.peer_index == index for p in self.peers.values())
        refused = self._refusal(version, not taken)
        if refused is not None:
            return refused
        try:
            if index in self.free_indices:
                self.free_indices.remove(index)
            self.next_fresh = max(self.next_fresh, index + 1)
            return self._insert(pubkey, version, sink, index, peer_id)
        except BaseException:
            self.unusable = True
            raise

    def _insert(self, pubkey: str, version: int, sink: S, index: int, peer_id: str | None) -> Admitted[S]:
        epoch = (self.epochs[index] + 1) % EPOCH_MODULUS if index in self.epochs else 0
        self.epochs[index] = epoch
        peer = Peer(peer_id or str(uuid.uuid4()), pubkey, index, version, sink, epoch)
        self.peers[peer.peer_id] = peer
        if self.pinned_version is None:
            self.pinned_version = version
        self.revision = (self.revision + 1) % REVISION_MODULUS
        joined = Joined(self.revision, pubkey, index, self.roster(), epoch)
        return Admitted(peer, self.revision, joined, tuple(self.peers.values()))

    def remove(self, peer_id: str) -> Removed[S] | None:
        """§5.8 step 1: remove, push the index, bump `revision`; None if `peer_id` is not seated.

        When the room becomes empty and was not ended, it is marked ended and `should_end` is
        True; of several last leavers exactly one sees it.
        """
        peer = self.peers.get(peer_id)
        if peer is None:
            return None
        try:
            del self.peers[peer_id]
            self.free_indices.append(peer.peer_index)
            self.revision = (self.revision + 1) % REVISION_MODULUS
            should_end = not self.peers and not self.ended
            if should_end:
                self.ended = True
        except BaseException:
            self.unusable = True
            raise
        left = Left(self.revision, peer.pubkey, peer.peer_index, peer.epoch)
        return Removed(peer, self.revision, left, tuple(self.peers.values()), should_end)

    def reopen(self) -> None:
        """Clear `ended` after a failed archive, so the room stays usable (§5.8 step 4)."""
        self.ended = False


@dataclass(eq=False)
class RoomRegistry(Generic[S]):
    """`(community_id, channel_id) → Room` (huddle.md §5.1). Atomic under the caller's lock."""

    rooms: dict[tuple[str, str], Room[S]] = field(default_factory=dict)

    def get_or_create(self, community_id: str, channel_id: str) -> Room[S]:
        key = (community_id, channel_id)
        room = self.rooms.get(key)
        if room is None:
            room = self.rooms[key] = Room()
        return room

    def reclaim(self, community_id: str, channel_id: str, room: Room[S]) -> bool:
        """Remove `room` only if it is still the registered one and empty; True when removed."""
        key = (community_id, channel_id)
        if self.rooms.get(key) is room and room.is_empty:
            del self.rooms[key]
            return True
        return False

    def by_channel(self, channel_id: str) -> Room[S] | None:
        """The one room carrying `channel_id`; None when none or several communities do (§9.8)."""
        found = [room for (_, channel), room in self.rooms.items() if channel == channel_id]
        return found[0] if len(found) == 1 else None
