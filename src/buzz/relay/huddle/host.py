"""What the huddle side uses of its relay: the `Relay` composition root provides it, and the
huddle modules name this instead of `Relay` (issue 30 item 5: no import leads back to the
root)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from buzz.core.event import Event
    from buzz.relay.auth.access import ChannelAccess
    from buzz.relay.auth.admission import Admission
    from buzz.relay.config import RelayConfig
    from buzz.relay.delivery.fanout import FanOut
    from buzz.relay.ingestion.emit import Emitter
    from buzz.relay.ingestion.ingest import Ingest
    from buzz.store.base import EventStore


class DrainLog(Protocol):
    """The operator's lines of a huddle drain (huddle.md §9.5; `Telemetry` writes them)."""

    def huddle_drain_started(self, owned_rooms: int, remote_peers: int, sockets: int) -> None: ...

    def huddle_drain_done(self, duration_s: float, sockets_left: int) -> None: ...


class HuddleHost(Protocol):
    """The relay's parts the audio route reaches: settings and the socket budget (one with the
    Nostr WebSockets), admission and AUTH checks, and the store, fan-out and follow-ups its
    relay-signed lifecycle and membership events go through."""

    config: RelayConfig
    connections: set[object]
    telemetry: DrainLog
    secret_key: str
    pubkey: str
    store: EventStore
    access: ChannelAccess
    fanout: FanOut
    emitter: Emitter
    ingest: Ingest

    @property
    def max_connections(self) -> int: ...

    async def admission(self, auth_event: Event) -> Admission: ...

    def relay_urls(self, host: str | None) -> frozenset[str]: ...
