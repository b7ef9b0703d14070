"""What the HTTP routes use of their relay (the NIP-98 bridge, Blossom media, workflows): the
`Relay` composition root provides it, and the route modules name this instead of `Relay`
(issue 30 item 5: no import leads back to the root)."""

from __future__ import annotations

import collections
from collections.abc import Sequence
from concurrent.futures import Executor
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from buzz.core.event import Event
    from buzz.media.service import MediaService
    from buzz.relay.config import RelayConfig
    from buzz.relay.delivery.reads import Reads
    from buzz.relay.ingestion.ingest import Ingest
    from buzz.relay.operator.telemetry import Telemetry
    from buzz.store.base import EventStore
    from buzz.workflows.engine import Engine


class HttpHost(Protocol):
    """The relay's parts an HTTP route reaches: settings, the store and the verify pool, the
    same ingest and read paths as the WebSocket, admission, the handler slots (relay.md §7.1
    item 6), the operator's log and counters, and the media and workflow services."""

    config: RelayConfig
    store: EventStore
    executor: Executor
    ingest: Ingest
    reads: Reads
    telemetry: Telemetry
    stats: collections.Counter[str]
    media: MediaService
    workflows: Engine

    async def admit(self, auth_event: Event, auth_tag: Sequence[str] | None = None) -> str: ...

    def try_acquire_handler(self) -> bool: ...

    def release_handler(self) -> None: ...
