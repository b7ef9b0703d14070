"""Answered-once claims on the relay (issue 14 item 4): the relay, not process memory, says
whether this agent already took an event.

Before an accepted event is queued the harness claims it with a kind 30078 (NIP-78 app data,
addressable, signed by the agent A) at the address `(30078, A, "buzz-agent-claim:<event id>")`.
The claim is deterministic: content `claimed`, tags `[["d", …], ["e", <event id>]]` and
`created_at` = the event's own `created_at` (or one second after the address's newest state),
so every harness process holding A's key builds the *same* event id. The relay stores an id
once: the first publisher gets `OK true`, every other one `OK true "duplicate:"` and knows
the event is taken. That covers both failure sequences of the issue: a restarted harness
(its catch-up re-reads an event it answered before) and two harness processes for one key
racing on every mention.

A graceful stop releases the claims of events it accepted but never finished (state
`released`, one second later); the next claim then builds on that state. A harness killed
mid-turn leaves its claim: that event is not answered again (docs/decisions.md).

`claim_state` and the builders are pure; `Claims` does the two relay round trips.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any

from buzz.client import PublishResult
from buzz.core.event import Event

log = logging.getLogger(__name__)

CLAIM_KIND = 30078
CLAIM_PREFIX = "buzz-agent-claim:"
CLAIMED, RELEASED = "claimed", "released"

Query = Callable[[Iterable[Mapping[str, Any]], float], Awaitable[list[Event]]]
Publish = Callable[[Event], Awaitable[PublishResult]]


def claim_address(event_id: str) -> str:
    return CLAIM_PREFIX + event_id


def claim_event(secret: str, event_id: str, created_at: int, state: str) -> Event:
    """The claim (or release) of `event_id` at `created_at`."""
    tags = [["d", claim_address(event_id)], ["e", event_id]]
    return Event.create(secret, CLAIM_KIND, state, tags, created_at=created_at)


def claim_state(events: Iterable[Event]) -> tuple[str, int] | None:
    """(state, created_at) of the newest claim event (ties: lowest id), or None."""
    newest: Event | None = None
    for ev in events:
        if newest is None or (ev.created_at, newest.id) > (newest.created_at, ev.id):
            newest = ev
    return None if newest is None else (newest.content, newest.created_at)


def next_claim_at(state: tuple[str, int] | None, event_created_at: int) -> int | None:
    """`created_at` of the claim to publish, or None when the event is already claimed."""
    if state is None:
        return event_created_at
    content, at = state
    return None if content != RELEASED else at + 1


def is_duplicate(result: PublishResult) -> bool:
    return result.accepted and result.message.startswith("duplicate")


class Claims:
    """Claims of agent `pubkey` through the relay link's query and publish."""

    def __init__(self, query: Query, publish: Publish, secret: str, pubkey: str) -> None:
        self._query = query
        self._publish = publish
        self._secret = secret
        self._pubkey = pubkey
        self.held: dict[str, int] = {}  # event id → created_at of our claim

    async def _state(self, event_id: str) -> tuple[str, int] | None:
        flt = {"kinds": [CLAIM_KIND], "authors": [self._pubkey], "#d": [claim_address(event_id)]}
        return claim_state(await self._query([flt], 10.0))

    async def claim(self, event: Event) -> bool:
        """True when this process now holds the claim on `event` (answer it); False when this
        agent already claimed it (here, in an earlier run or in another process). A relay that
        cannot be asked does not silence the agent: the claim is then assumed (logged)."""
        try:
            at = next_claim_at(await self._state(event.id), event.created_at)
            if at is None:
                return False
            result = await self._publish(claim_event(self._secret, event.id, at, CLAIMED))
        except Exception as exc:
            log.warning("could not claim %s (%s); answering it anyway", event.id[:12], exc)
            return True
        if is_duplicate(result):
            return False
        if not result.accepted:
            log.warning(
                "relay refused the claim on %s (%s); answering it anyway", event.id[:12], result.message
            )
            return True
        self.held[event.id] = at
        return True

    def done(self, event_id: str) -> None:
        """The event was answered (or dead-lettered): its claim stays on the relay."""
        self.held.pop(event_id, None)

    async def release_all(self) -> None:
        """Give back every claim on events not finished (graceful stop)."""
        for event_id, at in list(self.held.items()):
            try:
                await self._publish(claim_event(self._secret, event_id, at + 1, RELEASED))
            except Exception as exc:
                log.warning("could not release the claim on %s: %s", event_id[:12], exc)
            self.held.pop(event_id, None)
