"""The client's roster: `peer_index` → pubkey, from `joined` and `left` (huddle.md §5.5, §5.6).

Applied on the control path, which never waits for decoding or playout (§10.3). A message whose
revision is not newer (modulo 2^64) is ignored. The first `joined` after `auth` is the client's own
admission and gives `self_index`.
"""

from __future__ import annotations

from dataclasses import dataclass

from buzz.core.huddle_wire import Joined, Left, revision_is_newer


@dataclass(frozen=True, slots=True)
class RosterChange:
    """What an applied message changed. `reset`: indices whose decoder and jitter buffer must be
    recreated (the peer left, or the index now belongs to another pubkey)."""

    joined: frozenset[int]
    reset: frozenset[int]


class ClientRoster:
    def __init__(self) -> None:
        self.peers: dict[int, str] = {}
        self.revision: int | None = None
        self.self_index: int | None = None

    def __contains__(self, peer_index: int) -> bool:
        return peer_index in self.peers

    def apply(self, message: Joined | Left) -> RosterChange | None:
        """Apply one control message; None when it was stale and ignored."""
        if self.revision is not None and not revision_is_newer(message.revision, self.revision):
            return None
        self.revision = message.revision
        if isinstance(message, Left):
            gone = (
                frozenset({message.peer_index}) if self.peers.pop(message.peer_index, None) else frozenset()
            )
            return RosterChange(frozenset(), gone)
        if self.self_index is None:
            self.self_index = message.peer_index
        new = {entry.peer_index: entry.pubkey for entry in message.peers}
        reset = frozenset(i for i, pubkey in self.peers.items() if new.get(i) != pubkey)
        joined = frozenset(i for i, pubkey in new.items() if self.peers.get(i) != pubkey)
        self.peers = new
        return RosterChange(joined, reset)
