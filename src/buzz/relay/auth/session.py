"""Who is asking, and over what: the facts gates read about a request (khatru-style accessors)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from buzz.core.visibility import Reader

Transport = Literal["ws", "http"]


@dataclass(frozen=True, slots=True)
class Session:
    """`pubkey` is the first authenticated key (None before NIP-42/NIP-98 succeeds); `also` the
    keys a WebSocket authenticated after it (NIP-42 allows several per connection, issue 25
    item 2): the session may sign as any of them and reads with the union of their rights."""

    pubkey: str | None
    transport: Transport = "ws"
    also: frozenset[str] = frozenset()

    def signs_as(self, pubkey: str) -> bool:
        """May this session publish events whose `pubkey` is `pubkey`?"""
        return pubkey == self.pubkey or pubkey in self.also

    @property
    def reader(self) -> Reader:
        """The reader of read paths and gates: the one key, or the set of every key."""
        if not self.also or self.pubkey is None:
            return self.pubkey
        return self.also | {self.pubkey}
