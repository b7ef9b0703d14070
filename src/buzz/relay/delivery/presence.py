"""Presence (relay.md §12.2 item 2): the newest kind 20001 per pubkey, kept in memory for
PRESENCE_TTL_S and served on stored reads of `{"kinds":[20001],"authors":[…]}`.

Content `offline` (bare, or as the `status` of a JSON object) clears the author's presence; any
other content sets it. Absent or expired presence means offline. One process keeps it in
memory; several replicas keep it in Redis with the same TTL (`buzz.relay.replicas.presence_redis`,
through the async `record` / `lookup`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence

import orjson

from buzz.core.filters import Filter
from buzz.core.limits import PRESENCE_TTL_S
from buzz.core.stored import StoredEvent
from buzz.core.visibility import Reader
from buzz.relay.auth.access import ChannelAccess

PRESENCE_KIND = 20001
PRESENCE_STATUS_MAX_BYTES = 128  # relay.md §17
OFFLINE = "offline"


def presence_status(content: str) -> str:
    """The status a 20001 announces: the `status` string of JSON object content, else the bare
    content; cut to 128 UTF-8 bytes (never inside a character)."""
    status = content
    try:
        body = orjson.loads(content)
    except orjson.JSONDecodeError:
        body = None
    if isinstance(body, dict) and isinstance(body.get("status"), str):
        status = body["status"]
    return status.encode("utf-8")[:PRESENCE_STATUS_MAX_BYTES].decode("utf-8", "ignore")


class Presence:
    """Newest live 20001 per pubkey. `clock` returns seconds (monotonic by default)."""

    def __init__(self, ttl_s: float = PRESENCE_TTL_S, clock: Callable[[], float] = time.monotonic) -> None:
        self._ttl = ttl_s
        self._clock = clock
        # pubkey -> (expires at, created_at of the newest 20001 seen, the event or None when offline)
        self._by_pubkey: dict[str, tuple[float, int, StoredEvent | None]] = {}

    def update(self, stored: StoredEvent) -> None:
        """Record an accepted 20001; an older one than the newest seen changes nothing."""
        event = stored.event
        now = self._clock()
        current = self._by_pubkey.get(event.pubkey)
        if current is not None and current[0] > now and current[1] > event.created_at:
            return
        live = None if presence_status(event.content) == OFFLINE else stored
        self._by_pubkey[event.pubkey] = (now + self._ttl, event.created_at, live)
        if len(self._by_pubkey) > 100_000:
            self._expire(now)

    def current(self, pubkeys: Iterable[str]) -> list[StoredEvent]:
        """The live presence events of `pubkeys` (absent, offline and expired ones left out)."""
        now = self._clock()
        out = []
        for pubkey in sorted(set(pubkeys)):
            entry = self._by_pubkey.get(pubkey)
            if entry is not None and entry[0] > now and entry[2] is not None:
                out.append(entry[2])
        return out

    async def record(self, stored: StoredEvent) -> None:
        """`update`, as the ingest path calls it (the Redis variant writes through)."""
        self.update(stored)

    async def lookup(self, pubkeys: Iterable[str]) -> list[StoredEvent]:
        """`current`, as the read path calls it (the Redis variant reads the shared keys)."""
        return self.current(pubkeys)

    def status(self, pubkey: str) -> str:
        """The pubkey's current status, `offline` when absent or expired."""
        live = self.current([pubkey])
        return presence_status(live[0].event.content) if live else OFFLINE

    def _expire(self, now: float) -> None:
        for pubkey in [k for k, v in self._by_pubkey.items() if v[0] <= now]:
            del self._by_pubkey[pubkey]


async def presence_results(
    presence: Presence,
    access: ChannelAccess,
    filters: Sequence[Filter],
    reader: Reader,
    seen: set[str],
) -> list[StoredEvent]:
    """Live presence for the stored part of a REQ: for each filter whose `kinds` contain 20001
    (or that names no kinds: it matches every kind) and that names `authors` (not a search,
    `limit` ≠ 0), the authors' live 20001 events that
    match it and that `reader` may see (`ChannelAccess.visible`). Ids in `seen` are skipped
    and added to it (one event per request, relay.md §6.4 item 2)."""
    out: list[StoredEvent] = []
    for flt in filters:
        if (flt.kinds is not None and PRESENCE_KIND not in flt.kinds) or not flt.authors:
            continue
        if flt.search is not None or flt.effective_limit == 0:
            continue
        for stored in await presence.lookup(flt.authors):
            event = stored.event
            if event.id in seen or not flt.matches(event):
                continue
            if await access.visible(stored, reader):
                seen.add(event.id)
                out.append(stored)
    return out
