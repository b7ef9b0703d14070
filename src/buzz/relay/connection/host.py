"""What a Nostr connection uses of its relay: the `Relay` composition root provides it, and the
connection's modules name this instead of `Relay` (issue 30 item 5: no import leads back to
the root)."""

from __future__ import annotations

import collections
from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from buzz.core.event import Event
    from buzz.relay.auth.admission import Admission
    from buzz.relay.config import RelayConfig
    from buzz.relay.delivery.reads import Reads
    from buzz.relay.delivery.subscriptions import SubscriptionIndex
    from buzz.relay.ingestion.ingest import Ingest
    from buzz.relay.operator.telemetry import Telemetry
    from buzz.relay.replicas.bus import RedisBus
    from buzz.relay.transport.pings import PingWheel


class ConnectionHost(Protocol):
    """The relay's parts a connection reaches: settings, the pipelines it hands messages to,
    the operator's log and counters, admission, and the handler slots (relay.md §7.1 item 6)."""

    config: RelayConfig
    stats: collections.Counter[str]
    pings: PingWheel
    telemetry: Telemetry
    ingest: Ingest
    reads: Reads
    index: SubscriptionIndex
    bus: RedisBus | None

    async def admission(self, auth_event: Event, auth_tag: Sequence[str] | None = None) -> Admission: ...

    def relay_urls(self, host: str | None) -> frozenset[str]: ...

    def try_acquire_handler(self) -> bool: ...

    def release_handler(self) -> None: ...
