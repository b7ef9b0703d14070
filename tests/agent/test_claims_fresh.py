"""A live-delivered job is claimed in one relay round trip (docs/decisions.md 370): the agent's
43002 waited behind a read of the claim address and an immediate heartbeat, two round trips
that a fresh event does not need. Exactly once is kept: whatever already sits at the address
makes the relay answer `duplicate:` and the event is watched as before."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable, Mapping
from typing import Any

from buzz.agent.claims import (
    CLAIM_KIND,
    CLAIMED,
    DONE,
    Claim,
    Claims,
    claim_address,
    claim_event,
    claim_state,
)
from buzz.client import PublishResult, RelayClient
from buzz.core.event import Event
from tests.agent.support import Workspace, message, publish

LEASE = 4


class Counted:
    """The claims' relay calls over a real connection, recorded in order."""

    def __init__(self, client: RelayClient) -> None:
        self.client = client
        self.calls: list[str] = []

    async def query(self, filters: Iterable[Mapping[str, Any]], timeout: float) -> list[Event]:
        self.calls.append("query")
        return await self.client.query(list(filters))

    async def publish(self, event: Event) -> PublishResult:
        self.calls.append(f"publish {event.content}")
        return await self.client.publish(event)


def claims_over(ws: Workspace, link: Counted, lease: int = LEASE) -> Claims:
    return Claims(link.query, link.publish, ws.agent.secret, ws.agent.pubkey, lease)


async def state_of(client: RelayClient, ws: Workspace, event: Event) -> tuple[str, int] | None:
    flt = {"kinds": [CLAIM_KIND], "authors": [ws.agent.pubkey], "#d": [claim_address(event.id)]}
    return claim_state(await client.query([flt]))


async def test_a_fresh_event_is_claimed_with_one_publish_and_no_read(ws: Workspace) -> None:
    job = message(ws.owner, ws.channel, "a job, delivered live")
    async with ws.relay.client(ws.agent, auth_tags=[ws.auth_tag]) as agent:
        link = Counted(agent)
        # fresh: younger than a heartbeat period. With LEASE's 1 s period a loaded box's connect
        # alone can age the event past it, and then the immediate beat is right (decision 370).
        claims = claims_over(ws, link, lease=240)
        assert await claims.claim(job, fresh=True) is Claim.TAKEN
        assert link.calls == [f"publish {CLAIMED}"]
        assert await state_of(agent, ws, job) == (CLAIMED, job.created_at)
        assert claims.held == {job.id: job.created_at}


async def test_two_processes_claiming_one_fresh_event_take_it_once(ws: Workspace) -> None:
    job = message(ws.owner, ws.channel, "a job both replicas see")
    async with (
        ws.relay.client(ws.agent, auth_tags=[ws.auth_tag]) as one,
        ws.relay.client(ws.agent, auth_tags=[ws.auth_tag]) as two,
    ):
        first, second = claims_over(ws, Counted(one)), claims_over(ws, Counted(two))
        outcomes = await asyncio.gather(first.claim(job, fresh=True), second.claim(job, fresh=True))
        assert sorted(o.value for o in outcomes) == [Claim.HELD.value, Claim.TAKEN.value]


async def test_a_fresh_event_already_answered_elsewhere_is_watched_then_settled(ws: Workspace) -> None:
    """A replica took the job and finished it before this process saw it (a re-delivery after a
    reconnect): the deterministic claim loses to the newer `done`, and the watcher's next look
    finds the job settled."""
    job = message(ws.owner, ws.channel, "a job a replica already did")
    async with ws.relay.client(ws.agent, auth_tags=[ws.auth_tag]) as agent:
        await publish(agent, claim_event(ws.agent.secret, job.id, job.created_at, CLAIMED))
        await publish(agent, claim_event(ws.agent.secret, job.id, job.created_at + 1, DONE))
        claims = claims_over(ws, Counted(agent))
        assert await claims.claim(job, fresh=True) is Claim.HELD
        assert await claims.retake(job) is Claim.SETTLED
        assert claims.held == {}


async def test_a_claim_on_an_old_event_beats_at_once(ws: Workspace) -> None:
    """A caught-up event carries its old `created_at`: its claim is refreshed before the agent
    works on it, so it never looks a lease old to anyone reading the address."""
    old = message(ws.owner, ws.channel, "a request from minutes ago")
    # within the relay's past clock window (15 min), far older than a heartbeat (lease / 4)
    old = Event.create(ws.owner.secret, old.kind, old.content, old.tags, created_at=int(time.time()) - 300)
    async with ws.relay.client(ws.agent, auth_tags=[ws.auth_tag]) as agent:
        link = Counted(agent)
        claims = claims_over(ws, link)
        before = int(time.time())
        assert await claims.claim(old) is Claim.TAKEN
        assert link.calls == ["query", f"publish {CLAIMED}", f"publish {CLAIMED}"]
        state = await state_of(agent, ws, old)
        assert state is not None and state[0] == CLAIMED and state[1] >= before
