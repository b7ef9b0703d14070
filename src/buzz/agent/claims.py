"""Answered-once claims with a lease on the relay (issue 14 item 4): the relay, not process
memory, says whether this agent already took an event, and whether whoever took it is alive.

Before an accepted event is queued the harness claims it with a kind 30078 (NIP-78 app data,
addressable, signed by the agent A) at the address `(30078, A, "buzz-agent-claim:<event id>")`.
The first claim is deterministic: content `claimed`, tags `[["d", …], ["e", <event id>]]` and
`created_at` = the event's own `created_at` (or one second after the address's newest state),
so every harness process holding A's key builds the *same* event id. The relay stores an id
once: the first publisher gets `OK true`, every other one `OK true "duplicate:"` (or, once the
holder's heartbeat replaced it, `OK false "duplicate: have a newer version"`) and knows the
event is taken.

A live-delivered event is claimed without reading the address first (`fresh`): whatever is
there makes the relay answer `duplicate:` anyway (docs/decisions.md 370).

The lease: while a claim is held (queued or in a turn) the holder republishes `claimed` every
`lease / 4` seconds with a newer `created_at` (the heartbeat), and at once after claiming when
the claim is older than that (a caught-up event). Another process (a replica, or
this harness restarted after a crash) that finds the claim taken does not forget the event: it
watches the address, and when the claim has not moved for a whole lease it takes it over with
the deterministic claim one second after the stale state (so racing watchers still build one
id) — unless the agent's answer is already on the relay (a reply of A tagging the event).
Staleness is judged by what the watcher saw not change, never by comparing `created_at` to its
own clock, so a claim on an old event (catch-up) is not stale at birth.

A job claim whose job has no acceptance (43002) after `accept_grace_s` is `seize`d by a
watcher at once (docs/decisions.md 371): its holder accepts within milliseconds of claiming,
so a claim without an acceptance that long is a holder that died between the two; the relay's
job machine admits one acceptance and one end per job, so a holder that was only slow costs a
refused 43002, never a second job.

States: `claimed` (held, alive while it moves), `released` (a graceful stop gave it back; the
next claim builds on it at once), `done` (answered or given up; never taken again).

`claim_state` and the builders are pure; `Claims` does the relay round trips.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from enum import Enum
from typing import Any

from buzz.agent.event_view import is_notice
from buzz.client import PublishResult
from buzz.core.event import Event

log = logging.getLogger(__name__)

CLAIM_KIND = 30078
CLAIM_PREFIX = "buzz-agent-claim:"
CLAIMED, RELEASED, DONE = "claimed", "released", "done"
DEFAULT_LEASE_S = 30
ACCEPT_GRACE_MAX_S = 5.0  # a job claim with no acceptance this long (or a heartbeat period) is seized
ANSWER_KIND = 9  # the agent replies with a channel message (examples/README.md)
PRIVATE_DM_KIND = 14  # a NIP-17 rumor: its answer is a private DM too

Query = Callable[[Iterable[Mapping[str, Any]], float], Awaitable[list[Event]]]
Publish = Callable[[Event], Awaitable[PublishResult]]
State = tuple[str, int]  # (content, created_at) of an address's newest claim event


class Claim(Enum):
    """What `Claims.claim` / `Claims.retake` found."""

    TAKEN = "taken"  # this process holds the claim now: answer the event
    HELD = "held"  # a live claim of another process (or an earlier run): watch it
    SETTLED = "settled"  # answered or given up already: nothing to do


def claim_address(event_id: str) -> str:
    return CLAIM_PREFIX + event_id


def claim_event(secret: str, event_id: str, created_at: int, state: str) -> Event:
    """The claim (heartbeat, release or done mark) of `event_id` at `created_at`."""
    tags = [["d", claim_address(event_id)], ["e", event_id]]
    return Event.create(secret, CLAIM_KIND, state, tags, created_at=created_at)


def claim_state(events: Iterable[Event]) -> State | None:
    """(state, created_at) of the newest claim event (ties: lowest id), or None."""
    newest: Event | None = None
    for ev in events:
        if newest is None or (ev.created_at, newest.id) > (newest.created_at, ev.id):
            newest = ev
    return None if newest is None else (newest.content, newest.created_at)


def next_claim_at(state: State | None, event_created_at: int, stale: State | None = None) -> int | None:
    """`created_at` of the claim to publish, or None when the event is taken. `stale` is the
    state a watcher saw a whole lease ago: a `claimed` state still equal to it is taken over."""
    if state is None:
        return event_created_at
    content, at = state
    if content == RELEASED or (content == CLAIMED and state == stale):
        return at + 1
    return None


def is_duplicate(result: PublishResult) -> bool:
    """The claim is someone else's: the same claim event again (`OK true "duplicate:"`) or a
    version that lost to a newer one (`OK false "duplicate: have a newer version"`)."""
    return result.message.startswith("duplicate")


class Claims:
    """Claims of agent `pubkey` through the relay link's query and publish. `lease` in
    seconds (≥ 4): a claim that does not move for that long is taken over by a watcher."""

    def __init__(
        self, query: Query, publish: Publish, secret: str, pubkey: str, lease: int = DEFAULT_LEASE_S
    ) -> None:
        self._query = query
        self._publish = publish
        self._secret = secret
        self._pubkey = pubkey
        self.lease = lease
        self.held: dict[str, int] = {}  # event id → created_at of our newest claim
        # whether a private DM (kind 14 rumor) has our answer: in wraps, not findable by `#e`
        self.private_answered: Callable[[Event], Awaitable[bool]] | None = None
        self.seen: dict[str, State | None] = {}  # event id → state watched, not ours

    @property
    def heartbeat_s(self) -> float:
        return self.lease / 4

    @property
    def accept_grace_s(self) -> float:
        return min(self.heartbeat_s, ACCEPT_GRACE_MAX_S)

    async def _state(self, event_id: str) -> State | None:
        flt = {"kinds": [CLAIM_KIND], "authors": [self._pubkey], "#d": [claim_address(event_id)]}
        return claim_state(await self._query([flt], 10.0))

    async def _answered(self, event: Event) -> bool:
        """True when the relay holds a reply of this agent tagging `event` (an answer posted
        by a process that died before it could mark the claim done); harness notices
        (retrying, failure) are not answers. A private DM's answer is looked for in the
        agent's own gift-wrapped copies (`private_answered`)."""
        if event.kind == PRIVATE_DM_KIND and self.private_answered is not None:
            return await self.private_answered(event)
        flt = {"kinds": [ANSWER_KIND], "authors": [self._pubkey], "#e": [event.id], "limit": 20}
        return any(not is_notice(e) for e in await self._query([flt], 10.0))

    async def claim(self, event: Event, fresh: bool = False) -> Claim:
        """Try to take `event`. TAKEN: answer it; HELD: another live claim, call `retake`
        after a lease; SETTLED: already answered. A relay that cannot be asked does not
        silence the agent: the claim is then assumed (logged).

        `fresh`: the event was just delivered live, so its address almost surely holds nothing
        yet: the deterministic first claim is published without reading the address first
        (one relay round trip instead of two before the agent may acknowledge). Whatever is
        there already makes the relay answer `duplicate:` (the same claim, or a newer state),
        which is HELD: the watcher reads the address a lease later and settles (`done`) or
        takes over (`released`, or a holder that stopped beating) by the usual rules."""
        if fresh:
            return await self._publish_claim(event, event.created_at, stale=None)
        return await self._take(event, stale=None)

    async def retake(self, event: Event) -> Claim:
        """Look again at an event `claim` found HELD: TAKEN when its claim did not move since
        the last look (its holder is gone) or was released, and no answer is on the relay."""
        return await self._take(event, stale=self.seen.get(event.id))

    async def seize(self, event: Event) -> Claim:
        """Take the claim on `event` now, however recently it moved (the caller knows its
        holder is gone: a job claimed and not accepted after `accept_grace_s`). SETTLED when
        it is `done`; HELD when another watcher seized it first."""
        return await self._take(event, stale=None, force=True)

    def forget(self, event_id: str) -> None:
        """Stop holding (and beating) `event_id` without publishing anything: a live holder
        turned out to have it after all."""
        self.held.pop(event_id, None)

    async def await_takeover(self, event: Event, watching: Callable[[], bool]) -> bool:
        """Look again at a HELD claim once a lease while `watching()`: True once it is taken
        over (its holder died or released it), False when the event was answered or the
        watch stopped. A look that fails is logged and tried again a lease later."""
        while watching():
            await asyncio.sleep(self.lease)
            try:
                claim = await self.retake(event)
            except Exception as exc:
                log.warning("could not look at the claim on %s: %s", event.id[:12], exc)
                continue
            if claim is Claim.SETTLED:
                return False
            if claim is Claim.TAKEN:
                return True
        return False

    async def _take(self, event: Event, stale: State | None, force: bool = False) -> Claim:
        try:
            state = await self._state(event.id)
            if force:
                stale = state
            if state is not None and state[0] == DONE:
                self.seen.pop(event.id, None)
                return Claim.SETTLED
            at = next_claim_at(state, event.created_at, stale)
            if at is None:
                self.seen[event.id] = state
                return Claim.HELD
            if state is not None and state[0] == CLAIMED and await self._answered(event):
                self.seen.pop(event.id, None)
                log.info("claim on %s went stale after its answer was posted; not again", event.id[:12])
                return Claim.SETTLED
        except Exception as exc:
            log.warning("could not claim %s (%s); answering it anyway", event.id[:12], exc)
            self.seen.pop(event.id, None)
            return Claim.TAKEN
        return await self._publish_claim(event, at, stale)

    async def _publish_claim(self, event: Event, at: int, stale: State | None) -> Claim:
        try:
            result = await self._publish(claim_event(self._secret, event.id, at, CLAIMED))
        except Exception as exc:
            log.warning("could not claim %s (%s); answering it anyway", event.id[:12], exc)
            self.seen.pop(event.id, None)
            return Claim.TAKEN
        if is_duplicate(result):  # a racing process built the same claim first
            self.seen[event.id] = (CLAIMED, at)
            return Claim.HELD
        self.seen.pop(event.id, None)
        if not result.accepted:
            log.warning(
                "relay refused the claim on %s (%s); answering it anyway", event.id[:12], result.message
            )
            return Claim.TAKEN
        if stale is not None:
            log.info("took over the stale claim on %s", event.id[:12])
        self.held[event.id] = at
        if time.time() - at >= self.heartbeat_s:
            # a claim on an old event must look alive at once; a recent one already does, and
            # the heartbeat refreshes it within `heartbeat_s` (its age stays under half a lease),
            # so the agent's acknowledgement does not wait for a second round trip
            await self._beat(event.id)
        return Claim.TAKEN

    async def _beat(self, event_id: str) -> None:
        at = self.held.get(event_id)
        if at is None:
            return
        now = max(int(time.time()), at + 1)
        # reserved before the round trip: a `done` or `released` sent meanwhile builds above
        # this beat, never in its second (a tie would go to the lower event id)
        self.held[event_id] = now
        try:
            result = await self._publish(claim_event(self._secret, event_id, now, CLAIMED))
        except Exception as exc:
            log.warning("could not refresh the claim on %s: %s", event_id[:12], exc)
            return
        if is_duplicate(result) and event_id in self.held:
            log.warning("the claim on %s was taken over by another process", event_id[:12])
            self.held.pop(event_id, None)

    async def heartbeat(self) -> None:
        """Refresh every held claim each `heartbeat_s` seconds (runs until cancelled)."""
        while True:
            await asyncio.sleep(self.heartbeat_s)
            for event_id in list(self.held):
                await self._beat(event_id)

    async def done(self, event_id: str) -> None:
        """The event was answered (or dead-lettered): mark its claim `done` for good."""
        at = self.held.pop(event_id, None)
        if at is None:
            return
        with contextlib.suppress(Exception):
            await self._publish(claim_event(self._secret, event_id, max(int(time.time()), at + 1), DONE))

    async def release(self, event_id: str) -> None:
        """Give back the claim on `event_id` (not answered by this process)."""
        at = self.held.pop(event_id, None)
        if at is None:
            return
        try:
            await self._publish(claim_event(self._secret, event_id, at + 1, RELEASED))
        except Exception as exc:
            log.warning("could not release the claim on %s: %s", event_id[:12], exc)

    async def release_all(self) -> None:
        """Give back every claim on events not finished (graceful stop)."""
        for event_id in list(self.held):
            await self.release(event_id)
