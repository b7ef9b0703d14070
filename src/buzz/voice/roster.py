"""The client's roster: `peer_index` → pubkey (and epoch), from `joined`, `left` and `roster`
(huddle.md §5.5, §5.6, §6.6).

Applied on the control path, which never waits for decoding or playout (§10.3). A message whose
revision is not newer (modulo 2^64) is ignored. The first `joined` after `auth` is the client's own
admission and gives `self_index`. Each index carries the epoch of its occupancy (0 on v2, where
the relay sends none), so a v3 client can drop frames of a previous occupant (§6.6).
"""

from __future__ import annotations

from dataclasses import dataclass

from buzz.core.huddle_control import Joined, Left, Roster, revision_is_newer


@dataclass(frozen=True, slots=True)
class RosterChange:
    """What an applied message changed. `reset`: indices whose decoder and jitter buffer must be
    recreated (the peer left, or the index now belongs to another pubkey or epoch)."""

    joined: frozenset[int]
    reset: frozenset[int]


class ClientRoster:
    def __init__(self) -> None:
        self.peers: dict[int, str] = {}
        self.epochs: dict[int, int] = {}
        self.revision: int | None = None
        self.self_index: int | None = None

    def __contains__(self, peer_index: int) -> bool:
        return peer_index in self.peers

    def holds(self, peer_index: int, epoch: int) -> bool:
        """Whether `(peer_index, epoch)` is a current occupancy (the v3 receive rule, §6.6)."""
        return peer_index in self.peers and self.epochs.get(peer_index, 0) == epoch

    def apply(self, message: Joined | Left | Roster) -> RosterChange | None:
        """Apply one control message; None when it was stale and ignored."""
        if self.revision is not None and not revision_is_newer(message.revision, self.revision):
            return None
        self.revision = message.revision
        if isinstance(message, Left):
            gone = frozenset({message.peer_index}) if message.peer_index in self.peers else frozenset()
            self.peers.pop(message.peer_index, None)
            self.epochs.pop(message.peer_index, None)
            return RosterChange(frozenset(), gone)
        if isinstance(message, Joined) and self.self_index is None:
            self.self_index = message.peer_index
        new = {entry.peer_index: (entry.pubkey, entry.epoch) for entry in message.peers}
        old = {i: (pubkey, self.epochs.get(i, 0)) for i, pubkey in self.peers.items()}
        reset = frozenset(i for i, seat in old.items() if new.get(i) != seat)
        joined = frozenset(i for i, seat in new.items() if old.get(i) != seat)
        self.peers = {i: pubkey for i, (pubkey, _) in new.items()}
        self.epochs = {i: epoch for i, (_, epoch) in new.items()}
        return RosterChange(joined, reset)
