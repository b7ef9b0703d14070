"""Read paths: REQ stored results, COUNT and search, behind one set of checks.

Source rules: relay.md §5.4–§5.5 (gates, then `visible` on every candidate), §6.3 item 1
(every channel named in `#h` must be readable), §7.5 items 5–7, §7.7, §11.
Live delivery applies the same `visible` in `buzz.relay.delivery.fanout`.

`history` is the one read path that serves superseded versions (`POST /history`, issue 16
item 3, docs/decisions.md 81): only for the kinds of the history gate table
(`buzz.core.visibility.HISTORY_READERS`), every version through `history_visible`.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from buzz.core.channel_id import is_channel_id
from buzz.core.errors import Invalid, Refusal, Restricted, ServerError
from buzz.core.filters import Filter
from buzz.core.kinds import BUILTIN, ENGRAM_KIND, KindTable
from buzz.core.limits import HISTORY_MAX_BYTES
from buzz.core.search import check_search
from buzz.core.stored import StoredEvent
from buzz.core.visibility import (
    HISTORY_READERS,
    Reader,
    check_filter_gates,
    history_visible,
    sets_admit_all,
    visible_by_sets,
)
from buzz.relay.auth.access import ChannelAccess
from buzz.relay.delivery.presence import Presence, presence_results
from buzz.relay.operator.metrics_prom import RelayMetrics
from buzz.store.base import Accept, EventStore, Gates, History

MIXED_SEARCH = Refusal(ServerError, "mixed search and non-search filters not supported")
NOT_A_MEMBER = Refusal(Restricted, "not a channel member")
HISTORY_KINDS_MESSAGE = "history is served for kind " + ", ".join(map(str, sorted(HISTORY_READERS))) + " only"


def gates_of(table: KindTable) -> Gates:
    """`visible_by_sets` of `table` as the store's SQL gates (`buzz.store.base.Gates`)."""
    return Gates(
        author=table.author_only,
        p_tagged=table.p_gated,
        author_or_p=frozenset({ENGRAM_KIND}),
        author_or_shared=table.shared_gated,
    )


class Reads:
    def __init__(self, store: EventStore, access: ChannelAccess, table: KindTable = BUILTIN) -> None:
        self._store = store
        self._access = access
        self._table = table
        self._gates = gates_of(table)
        self.presence: Presence | None = None  # set by the relay: 20001 on stored reads (§12.2)
        self.metrics: RelayMetrics | None = None  # set by the relay: store latency

    async def check(self, filters: Sequence[Filter], reader: Reader, *, count: bool = False) -> bool:
        """Steps 5–7 of relay.md §7.5 (and §7.7 item 1 for COUNT). Returns True for a search request.

        Raises Restricted (channel access, gates), ServerError (mixed search) or Invalid
        (search in COUNT).
        """
        for flt in filters:
            for channel_id in flt.channels:
                if is_channel_id(channel_id) and not await self._access.readable(channel_id, reader):
                    raise NOT_A_MEMBER()
        for flt in filters:
            check_filter_gates(flt, reader, self._table)
        searching = [f.search is not None for f in filters]
        if any(searching):
            if count:
                raise Invalid("search is not supported in COUNT")
            if not all(searching):
                raise MIXED_SEARCH()
            for flt in filters:
                check_search(flt.search or "")
            return True
        return False

    def accept(self, reader: Reader) -> Accept:
        """The per-event `visible` sets predicate for the store's over-fetching reads. For a set
        of readers the store's channel scope is the union of theirs; no stored kind is both
        gated and in a channel, so that union and this one are the per-event union."""
        table = self._table

        def _accept(stored: StoredEvent) -> bool:
            return visible_by_sets(stored.event, reader, table)

        return _accept

    async def stored(self, filters: Sequence[Filter], reader: Reader) -> list[StoredEvent]:
        """Stored results in relay.md §6.4 order; every event passes `visible`. Live presence
        (relay.md §12.2 item 2) follows the stored rows of a request that asks for it."""
        started = time.perf_counter()
        results = await self._store.query(filters, reader, self.accept(reader), self._gates)
        if self.metrics is not None:
            self.metrics.store_query_seconds.observe(time.perf_counter() - started)
        if self.presence is not None:
            seen = {s.event.id for s in results}
            results += await presence_results(self.presence, self._access, filters, reader, seen)
        return results

    async def count(self, filters: Sequence[Filter], reader: Reader) -> int:
        # No predicate when no matching event can fail it (`sets_admit_all`): COUNT stays one
        # SQL statement instead of reading every matching row (docs/decisions.md 102).
        # Otherwise only the events of gated kinds are read one by one, at most
        # COUNT_EXACT_BUDGET of them (relay.md §7.7 item 3; store.CountTooBroad beyond).
        if sets_admit_all(filters, self._table):
            return await self._store.count(filters, reader)
        return await self._store.count(filters, reader, self.accept(reader), self._gates)

    async def history(
        self,
        kind: int,
        pubkey: str,
        d: str,
        reader: str,
        *,
        limit: int,
        before: tuple[int, str] | None = None,
    ) -> History:
        """The versions at `(kind, pubkey, d)` that `reader` may read, head and superseded, newest
        first, at most `limit` and HISTORY_MAX_BYTES of event JSON (`EventStore.history`).

        A reader the gate does not admit gets exactly what a coordinate with no versions gets
        (an empty answer), so the path never tells whether an address exists. Raises
        Restricted for a kind outside the history gate table.
        """
        if kind not in HISTORY_READERS:
            raise Restricted(HISTORY_KINDS_MESSAGE)

        def accept(stored: StoredEvent) -> bool:
            # History kinds are global-only; a channel-scoped row is never served here (fail closed).
            return stored.channel_id is None and history_visible(stored.event, reader)

        return await self._store.history(
            kind,
            pubkey,
            d,
            limit=limit,
            max_bytes=HISTORY_MAX_BYTES,
            before=before,
            accept=accept,
            readable_by=reader,  # the gate in SQL: a refused reader reads no version (item 12)
        )
