"""Which pubkeys are agents in a huddle channel (huddle.md §10.5 item 2, §10.6).

Agents are the members with role `bot` in the channel's relay-signed member list (kind 39002,
`#d` = channel id, limit 1; tags `["p", <hex>, "", <role>]`, relay.md §4.6). The list is cached,
refreshed on connect and at most every 15 s; a failed refresh keeps the previous list.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from buzz.core.event import Event
from buzz.core.huddle_wire import AGENT_REFRESH
from buzz.core.keys import is_hex

log = logging.getLogger(__name__)

GROUP_MEMBERS_KIND = 39002
BOT_ROLE = "bot"

Query = Callable[[Sequence[Mapping[str, Any]]], Awaitable[list[Event]]]


def bots_in(member_list: Event) -> frozenset[str]:
    """The `bot` pubkeys of one 39002 event (64 lowercase hex only)."""
    return frozenset(
        tag[1]
        for tag in member_list.tags
        if len(tag) >= 4 and tag[0] == "p" and tag[3] == BOT_ROLE and is_hex(tag[1], 64)
    )


class AgentDirectory:
    """The agents of one channel. `query` is the host's REQ (e.g. `RelayClient.query`)."""

    def __init__(
        self,
        query: Query,
        channel_id: str,
        *,
        refresh_s: float = AGENT_REFRESH,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._query = query
        self.channel_id = channel_id
        self.refresh_s = refresh_s
        self._clock = clock
        self._agents: frozenset[str] = frozenset()
        self._fetched_at: float | None = None

    @property
    def agents(self) -> frozenset[str]:
        """The cached list, without refreshing."""
        return self._agents

    async def refresh(self) -> frozenset[str]:
        """Fetch the list now; on failure keep (and return) the previous one."""
        try:
            events = await self._query([{"kinds": [GROUP_MEMBERS_KIND], "#d": [self.channel_id], "limit": 1}])
        except Exception as exc:
            log.warning("agent list refresh failed, keeping the previous list: %s", exc)
            return self._agents
        self._fetched_at = self._clock()
        newest = max(events, key=lambda e: (e.created_at, e.id), default=None)
        self._agents = bots_in(newest) if newest is not None else frozenset()
        return self._agents

    async def current(self) -> frozenset[str]:
        """The agents present now: the cache, refreshed when older than 15 s."""
        if self._fetched_at is None or self._clock() - self._fetched_at >= self.refresh_s:
            return await self.refresh()
        return self._agents
