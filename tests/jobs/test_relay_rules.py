"""Job kinds at the relay (jobs spec §5, checklist items 1–25): a real relay over WebSocket,
agents authenticated with their owner's NIP-OA tag (so the relay knows their owner), every
refusal with its exact text and the store unchanged."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass

import pytest

from buzz.client import RelayClient
from buzz.core.event import Event
from buzz.core.nip_oa import build_auth_tag
from buzz.core.stored import verify_stored
from buzz.jobs import build
from buzz.relay.ingestion.ratelimit import SlidingWindow
from buzz.relay.ingestion.rules.jobs import _WINDOWS, relay_signed
from buzz.store.base import InsertOutcome
from tests.jobs.support import result_manifest
from tests.support.deadline import scaled
from tests.support.relay import Identity, RunningRelay
from tests.workspace.helpers import accepted, create_channel, live, put_user, refused


@dataclass
class Team:
    running: RunningRelay
    channel: str
    asker: Identity  # channel owner and requester
    owner: Identity  # the agent's owner (a member)
    agent: Identity
    other: Identity  # a plain member
    clients: dict[str, RelayClient]

    def sign(self, who: Identity, t: build.Template, at: int | None = None) -> Event:
        return Event.create(who.secret, t.kind, t.content, t.tags, created_at=at)

    async def request(self, prompt: str | None = None, **kw: object) -> Event:
        prompt = prompt or f"fix the bug {next(_SERIAL)}"  # same second, same content: same id
        event = self.sign(
            self.asker, build.request(self.channel, self.agent.pubkey, prompt=prompt, created_at=_now(), **kw)
        )  # type: ignore[arg-type]
        await accepted(self.clients["asker"], event)
        return event

    async def refused(self, who: str, event: Event, message: str) -> None:
        await refused(self.running, self.clients[who], event, message)


_SERIAL = itertools.count()


def _now() -> int:
    return int(time.time())


@contextlib.asynccontextmanager
async def team(running: RunningRelay, visibility: str = "open") -> AsyncIterator[Team]:
    asker, owner, agent, other = (Identity.new() for _ in range(4))
    async with contextlib.AsyncExitStack() as stack:
        clients = {
            "asker": await stack.enter_async_context(running.client(asker)),
            "owner": await stack.enter_async_context(running.client(owner)),
            "agent": await stack.enter_async_context(
                running.client(agent, auth_tags=[build_auth_tag(owner.secret, agent.pubkey)])
            ),
            "other": await stack.enter_async_context(running.client(other)),
        }
        await clients["agent"].count([{"kinds": [1], "authors": [agent.pubkey]}])  # AUTH done: owner known
        channel = await create_channel(clients["asker"], asker, visibility)
        for who in (owner, agent, other):
            await put_user(clients["asker"], asker, channel, who.pubkey)
        yield Team(running, channel, asker, owner, agent, other, clients)


async def test_request_is_stored_and_delivered_to_the_assignee(sqlite_relay: RunningRelay) -> None:
    async with team(sqlite_relay) as t:
        sub = await live(t.clients["agent"], {"kinds": [43001], "#h": [t.channel], "#p": [t.agent.pubkey]})
        job = await t.request()
        got = await asyncio.wait_for(sub.queue.get(), scaled(5))
        assert got is not None and got.id == job.id
        row = await sqlite_relay.relay.store.get_job(job.id)
        assert row is not None and (row.state, row.requester, row.assignee) == (
            "requested",
            t.asker.pubkey,
            t.agent.pubkey,
        )


async def test_request_refusals(sqlite_relay: RunningRelay) -> None:
    async with team(sqlite_relay) as t:
        content = build.request(t.channel, t.agent.pubkey, prompt="x", created_at=_now()).content
        no_h = Event.create(t.asker.secret, 43001, content, [["p", t.agent.pubkey]])
        await t.refused("asker", no_h, "invalid: channel-scoped events must include an h tag")
        two_p = Event.create(
            t.asker.secret, 43001, content, [["h", t.channel], ["p", t.agent.pubkey], ["p", t.other.pubkey]]
        )
        await t.refused(
            "asker", two_p, "invalid: job request: exactly one p tag naming the assignee is required (got 2)"
        )
        human = t.sign(t.asker, build.request(t.channel, t.other.pubkey, prompt="x", created_at=_now()))
        await t.refused("asker", human, "invalid: job request: target is not an agent member of this channel")
        self_request = t.sign(
            t.agent, build.request(t.channel, t.agent.pubkey, prompt="x", created_at=_now())
        )
        await t.refused(
            "agent", self_request, "invalid: job request: an agent cannot request a job from itself"
        )
        no_outcome = Event.create(
            t.asker.secret, 43001, json.dumps({"schemaVersion": 1}), [["h", t.channel], ["p", t.agent.pubkey]]
        )
        await t.refused("asker", no_outcome, "invalid: job request: requestedOutcome is required")
        late = Event.create(
            t.asker.secret,
            43001,
            json.dumps({"schemaVersion": 1, "requestedOutcome": "x", "deadline": 5}),
            [["h", t.channel], ["p", t.agent.pubkey]],
        )
        await t.refused("asker", late, "invalid: job request: deadline must be an integer after created_at")


async def test_agent_outside_the_channel_and_parent_chain(sqlite_relay: RunningRelay) -> None:
    async with team(sqlite_relay) as t:
        stranger_agent = Identity.new()
        async with sqlite_relay.client(
            stranger_agent, auth_tags=[build_auth_tag(t.owner.secret, stranger_agent.pubkey)]
        ) as c:
            await c.count([{"kinds": [1], "authors": [stranger_agent.pubkey]}])
        outside = t.sign(
            t.asker, build.request(t.channel, stranger_agent.pubkey, prompt="x", created_at=_now())
        )
        await t.refused(
            "asker", outside, "invalid: job request: target is not an agent member of this channel"
        )
        orphan = t.sign(
            t.asker, build.request(t.channel, t.agent.pubkey, prompt="x", created_at=_now(), parent="ab" * 32)
        )
        await t.refused("asker", orphan, "invalid: job request: parent job not found")
        chain: list[Event] = []
        for _ in range(8):  # a chain of eight jobs is the deepest allowed
            chain.append(await t.request(parent=chain[-1].id if chain else None))
        ninth = t.sign(
            t.asker,
            build.request(t.channel, t.agent.pubkey, prompt="x", created_at=_now(), parent=chain[-1].id),
        )
        await t.refused("asker", ninth, "invalid: job request: delegation too deep")


async def test_lifecycle_signers_and_states(sqlite_relay: RunningRelay) -> None:
    # the relay's 1/s window made an hour long: the rate refusal below does not depend on how
    # fast this machine publishes two events
    _WINDOWS[sqlite_relay.relay.rules] = SlidingWindow(1, 3600.0)
    async with team(sqlite_relay) as t:
        job = await t.request()
        J, C = job.id, t.channel
        await t.refused(
            "other",
            t.sign(t.other, build.accepted(C, J)),
            "restricted: only the assigned agent may update this job",
        )
        await t.refused("agent", t.sign(t.agent, build.accepted(C, "cd" * 32)), "invalid: job not found")
        await t.refused(
            "agent",
            t.sign(t.agent, build.progress(C, J, seq=1, message="early")),
            "invalid: job not accepted",
        )
        await accepted(t.clients["agent"], t.sign(t.agent, build.accepted(C, J)))
        await t.refused(
            "agent", t.sign(t.agent, build.accepted(C, J, message="again")), "invalid: job already accepted"
        )
        await accepted(t.clients["agent"], t.sign(t.agent, build.progress(C, J, seq=1, message="one")))
        await t.refused(
            "agent",
            t.sign(t.agent, build.progress(C, J, seq=1, message="same")),
            "invalid: job progress: seq must increase",
        )
        await t.refused(
            "agent",
            t.sign(t.agent, build.progress(C, J, seq=2, message="two")),
            "rate-limited: job progress rate exceeded (1/sec per job)",
        )
        wrong_p = t.sign(t.agent, build.result(C, J, t.other.pubkey, result_manifest(J)))
        await t.refused("agent", wrong_p, "invalid: job result: p tag must name the requester")
        no_artifact = t.sign(
            t.agent,
            build.Template(
                43004,
                build.result(C, J, t.asker.pubkey, result_manifest(J)).tags,
                json.dumps(result_manifest(J, artifacts=[])),
            ),
        )
        await t.refused(
            "agent", no_artifact, "invalid: job result: disposition completed requires at least one artifact"
        )
        local = result_manifest(J, artifacts=[{"kind": "file", "label": "x", "reference": "/home/u/x"}])
        local_event = t.sign(
            t.agent,
            build.Template(
                43004, build.result(C, J, t.asker.pubkey, result_manifest(J)).tags, json.dumps(local)
            ),
        )
        await t.refused("agent", local_event, "invalid: job result: artifact 1 reference is a local path")
        await accepted(
            t.clients["agent"], t.sign(t.agent, build.result(C, J, t.asker.pubkey, result_manifest(J)))
        )
        row = await sqlite_relay.relay.store.get_job(J)
        assert row is not None and (row.state, row.disposition, row.last_seq) == ("completed", "completed", 1)
        later = [
            ("agent", build.progress(C, J, seq=5, message="late")),
            ("agent", build.result(C, J, t.asker.pubkey, result_manifest(J, outcome="again"))),
            ("asker", build.cancel(C, J, t.agent.pubkey)),
            ("agent", build.failed(C, J, t.asker.pubkey, code="agent_error", message="x")),
        ]
        who = {"agent": t.agent, "asker": t.asker}
        for name, template in later:
            await t.refused(name, t.sign(who[name], template), "invalid: job is completed")
        # the lifecycle events are depth-1 replies of the request
        replies = await t.clients["asker"].query([{"kinds": [43002, 43003, 43004], "#e": [J]}])
        assert len(replies) == 3


async def test_decline_and_cancels(sqlite_relay: RunningRelay) -> None:
    async with team(sqlite_relay) as t:
        C = t.channel
        declined = await t.request()
        await accepted(
            t.clients["agent"],
            t.sign(t.agent, build.failed(C, declined.id, t.asker.pubkey, code="declined", message="no")),
        )
        assert (await sqlite_relay.relay.store.get_job(declined.id)).state == "failed"  # type: ignore[union-attr]
        unknown_code = Event.create(
            t.agent.secret,
            43006,
            json.dumps({"schemaVersion": 1, "code": "nope", "message": "x"}),
            [["h", C], ["e", (await t.request()).id, "", "reply"], ["p", t.asker.pubkey]],
        )
        await t.refused(
            "agent",
            unknown_code,
            "invalid: job failure: code must be one of declined, agent_error, timeout, unavailable, invalid_request",
        )
        by = {"asker": t.asker, "owner": t.owner}
        for name in ("asker", "owner"):
            job = await t.request()
            await accepted(t.clients[name], t.sign(by[name], build.cancel(C, job.id, t.agent.pubkey)))
        job = await t.request()
        await t.refused(
            "other",
            t.sign(t.other, build.cancel(C, job.id, t.agent.pubkey)),
            "restricted: not allowed to cancel this job",
        )
        await put_user(t.clients["asker"], t.asker, C, t.other.pubkey, "admin")
        await accepted(t.clients["other"], t.sign(t.other, build.cancel(C, job.id, t.agent.pubkey)))
        await t.refused(
            "agent",
            t.sign(t.agent, build.result(C, job.id, t.asker.pubkey, result_manifest(job.id))),
            "invalid: job is cancelled",
        )


async def test_concurrent_accepts_yield_one(relay: RunningRelay) -> None:
    """Checklist 25: on both backends, two 43002 racing for one job — one acceptance."""
    async with team(relay) as t:
        second = RelayClient(
            relay.url, t.agent.secret, auth_tags=[build_auth_tag(t.owner.secret, t.agent.pubkey)]
        )
        async with second:
            for round_ in range(5):
                job = await t.request(prompt=f"race {round_}")
                a = t.sign(t.agent, build.accepted(t.channel, job.id, message="a"))
                b = t.sign(t.agent, build.accepted(t.channel, job.id, message="b"))
                results = await asyncio.gather(t.clients["agent"].publish(a), second.publish(b))
                assert sorted(r.accepted for r in results) == [False, True]
                assert [r.message for r in results if not r.accepted] == ["invalid: job already accepted"]
                stored = await t.clients["asker"].query([{"kinds": [43002], "#e": [job.id]}])
                assert len(stored) == 1


async def test_private_job_is_hidden_from_non_members(sqlite_relay: RunningRelay) -> None:
    async with team(sqlite_relay, "private") as t:
        job = await t.request()
        outsider = Identity.new()
        async with sqlite_relay.client(outsider) as c:
            assert await c.query([{"ids": [job.id]}]) == []
        assert [e.id for e in await t.clients["other"].query([{"ids": [job.id]}])] == [job.id]


@pytest.mark.parametrize("kind", [43002, 43004])
async def test_bad_tags_are_refused(sqlite_relay: RunningRelay, kind: int) -> None:
    async with team(sqlite_relay) as t:
        job = await t.request()
        two_e = Event.create(
            t.agent.secret,
            kind,
            "{}",
            [["h", t.channel], ["e", job.id, "", "reply"], ["e", job.id, "", "reply"]],
        )
        what = {43002: "accept", 43004: "result"}[kind]
        await t.refused(
            "agent", two_e, f"invalid: job {what}: exactly one e tag naming the job is required (got 2)"
        )


async def _relay_job(running: RunningRelay, t: Team, actor: str, template: build.Template) -> Event:
    """A job event the relay signs (a workflow's ask_agent), through the relay's internal path."""
    relay = running.relay
    tags = (*template.tags, ("actor", actor)) if template.kind == 43001 else template.tags
    event = Event.create(relay.secret_key, template.kind, template.content, tags)
    plan = await relay_signed(relay.rules, verify_stored(event))
    assert await relay.store.insert(plan.stored, plan.effects) is InsertOutcome.STORED
    return event


async def test_a_relay_signed_request_belongs_to_its_actor(sqlite_relay: RunningRelay) -> None:
    """Checklist 24: the workflow owner (`actor`) is the requester: it may cancel, and results name it."""
    async with team(sqlite_relay) as t:
        C = t.channel
        t1 = build.request(C, t.agent.pubkey, prompt="from a workflow", created_at=_now())
        job = await _relay_job(sqlite_relay, t, t.asker.pubkey, t1)
        row = await sqlite_relay.relay.store.get_job(job.id)
        assert row is not None and (row.requester, row.assignee) == (t.asker.pubkey, t.agent.pubkey)
        await t.refused(
            "agent",
            t.sign(t.agent, build.result(C, job.id, sqlite_relay.relay.pubkey, result_manifest(job.id))),
            "invalid: job result: p tag must name the requester",
        )
        await accepted(
            t.clients["agent"],
            t.sign(t.agent, build.result(C, job.id, t.asker.pubkey, result_manifest(job.id))),
        )
        second = await _relay_job(
            sqlite_relay,
            t,
            t.asker.pubkey,
            build.request(C, t.agent.pubkey, prompt="second", created_at=_now()),
        )
        await accepted(t.clients["asker"], t.sign(t.asker, build.cancel(C, second.id, t.agent.pubkey)))
        third = await _relay_job(
            sqlite_relay,
            t,
            t.asker.pubkey,
            build.request(C, t.agent.pubkey, prompt="third", created_at=_now()),
        )
        await _relay_job(
            sqlite_relay, t, t.asker.pubkey, build.cancel(C, third.id, t.agent.pubkey)
        )  # the relay stops it
        assert (await sqlite_relay.relay.store.get_job(third.id)).state == "cancelled"  # type: ignore[union-attr]
        # a client cannot claim a workflow's authority
        forged = Event.create(t.other.secret, 43001, t1.content, (*t1.tags, ("actor", t.asker.pubkey)))
        await t.refused(
            "other", forged, "invalid: job request: only a relay-signed request carries an actor tag"
        )
