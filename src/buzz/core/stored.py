"""The StoredEvent envelope (relay.md §2.4): an event plus relay-side facts.

Only two routines hand out envelopes with `verified = True`: `verify_stored` (after the
relay.md §2.3 checks) and `relay_signed` (events the relay signs itself). Storage backends
rebuild rows with `from_storage`, since every row was verified before insertion. Storage and
fan-out refuse unverified envelopes (a programming error, not a client error).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from buzz.core.event import Event, verify_event

_PRIVATE = object()


@dataclass(frozen=True, slots=True)
class StoredEvent:
    """`event` unchanged; `received_at` unix seconds; `channel_id` canonical UUID or None."""

    event: Event
    received_at: int = field(default_factory=lambda: int(time.time()))
    channel_id: str | None = None
    # init=False: neither the constructor nor dataclasses.replace can set it (§2.4 item 1).
    _verified: bool = field(default=False, init=False, repr=False, compare=False)

    @property
    def verified(self) -> bool:
        return self._verified

    def with_channel(self, channel_id: str | None) -> StoredEvent:
        """A copy with the derived channel (relay.md §4.2); keeps the verified flag. `self` when
        the channel is already that one (the envelope is immutable)."""
        if channel_id == self.channel_id:
            return self
        # The constructor, not dataclasses.replace: same fields, a fraction of the cost per event.
        out = StoredEvent(self.event, self.received_at, channel_id)
        object.__setattr__(out, "_verified", self._verified)
        return out

    @classmethod
    def _trusted(cls, token: object, event: Event, received_at: int, channel_id: str | None) -> StoredEvent:
        if token is not _PRIVATE:
            raise PermissionError("only buzz.core.stored may mark an envelope verified")
        out = cls(event, received_at, channel_id)
        object.__setattr__(out, "_verified", True)
        return out


def verify_stored(event: Event, received_at: int | None = None) -> StoredEvent:
    """Verify id then signature (relay.md §2.3) and wrap. Raises InvalidId / InvalidSignature."""
    verify_event(event)
    return StoredEvent._trusted(
        _PRIVATE, event, int(time.time()) if received_at is None else received_at, None
    )


def relay_signed(event: Event, channel_id: str | None = None) -> StoredEvent:
    """Wrap an event the relay signed itself with its own key (relay.md §4.6)."""
    return StoredEvent._trusted(_PRIVATE, event, int(time.time()), channel_id)


def from_storage(event: Event, received_at: int, channel_id: str | None) -> StoredEvent:
    """Rebuild a stored row; rows were verified before insertion (relay.md §2.4 item 2)."""
    return StoredEvent._trusted(_PRIVATE, event, received_at, channel_id)


class UnverifiedEnvelope(RuntimeError):
    """Storage or fan-out was handed an envelope that never passed verification."""


def require_verified(stored: StoredEvent) -> None:
    """Raise UnverifiedEnvelope unless `stored.verified` (relay.md §2.4 item 3)."""
    if not stored.verified:
        raise UnverifiedEnvelope(f"event {stored.event.id} was not verified")
