"""Jobs addressed to this agent (jobs spec §6.1–§6.4, §6.7): subscriptions, claims, the gate,
the accept, the queue, and cancels.

Per served channel one REQ `jobs-<C>` with `{"kinds":[43001,43005],"#h":[C],"#p":[A]}`,
whatever `--subscribe` says. A 43001 is claimed exactly like a mention (`buzz.agent.claims`:
several harnesses for one key, a restart, a crash — one holder acts); the requester passes the
author gate of mentions; an admitted job gets its 43002 at once, 👀, and a solo place in its
channel's queue, where the dispatcher runs it as a job turn (`buzz.agent.job_turns`). A
requester who is not admitted gets one 43006 `declined` naming the owner to ask. A 43005
drops a queued job or cancels its running turn; nothing more is published for it.
On start (and when a channel is added) unfinished jobs of the last 7 days are taken up.

Two harnesses for one agent (an always-on standby) both get each live 43001; the one whose
claim loses watches it, and if the job still has no 43002 after the claims' accept grace (its
holder died between claim and accept) seizes the claim and accepts it at once (decision 371);
an accepted job whose holder died is taken over when its claim stops moving for a lease.
"""

from __future__ import annotations

import asyncio
import logging
import time

import orjson

from buzz.agent.claims import Claim
from buzz.agent.gates import Decision, SeenIds, author_decision, grant_command
from buzz.agent.job_turns import JobTicket, publish_lifecycle
from buzz.agent.queue import Item
from buzz.agent.runtime import Runtime
from buzz.agent.sessions import TurnEnd
from buzz.agent.status import EYES
from buzz.agent.turns import Dispatcher
from buzz.core.event import Event
from buzz.core.nip19 import npub
from buzz.jobs import build, machine
from buzz.jobs import limits as L

log = logging.getLogger(__name__)

JOBS_SUB_PREFIX = "jobs-"
DECLINED = "this agent does not take jobs from you"


def jobs_sub(channel: str) -> str:
    return JOBS_SUB_PREFIX + channel


def job_of(event: Event) -> str | None:
    return next((t[1] for t in event.tags if t[0] == "e" and len(t) >= 4 and t[3] == "reply"), None)


def requester_of(request: Event) -> str:
    """§3.1: the relay lets only a relay-signed 43001 carry `actor` (the workflow owner)."""
    return request.first_tag("actor") or request.pubkey


class JobDesk:
    def __init__(self, runtime: Runtime, dispatcher: Dispatcher) -> None:
        self.rt = runtime
        self.dispatcher = dispatcher
        self.seen = SeenIds()
        self.accepting = True
        self.watching: dict[str, asyncio.Task[None]] = {}

    @property
    def enabled(self) -> bool:
        return not self.rt.config.no_jobs

    # -- subscriptions (§6.1) -------------------------------------------------------------------
    async def open_channel(self, channel: str, since: int) -> None:
        if not self.enabled:
            return
        flt = {
            "kinds": [L.KIND_JOB_REQUEST, L.KIND_JOB_CANCEL],
            "#h": [channel],
            "#p": [self.rt.identity.pubkey],
        }
        await self.rt.link.subscribe(jobs_sub(channel), flt, since)

    async def close_channel(self, channel: str) -> None:
        await self.rt.link.unsubscribe(jobs_sub(channel))
        for job_id, task in list(self.watching.items()):
            task.cancel()
            self.watching.pop(job_id, None)

    async def catch_up(self, channel: str, now: int) -> int:
        """Take up the unfinished jobs of the last 7 days (§6.1 item 2), oldest first."""
        if not self.enabled:
            return 0
        agent = self.rt.identity.pubkey
        requests = await self.rt.link.query(
            [
                {
                    "kinds": [L.KIND_JOB_REQUEST],
                    "#h": [channel],
                    "#p": [agent],
                    "since": now - L.JOB_CATCH_UP_S,
                    "limit": 500,
                }
            ]
        )
        for request in sorted(requests, key=lambda e: (e.created_at, e.id)):
            await self.request(channel, request)
        return len(requests)

    async def route(self, sub_id: str, event: Event) -> None:
        channel = sub_id[len(JOBS_SUB_PREFIX) :]
        if event.kind == L.KIND_JOB_REQUEST:
            await self.request(channel, event, fresh=True)
        elif event.kind == L.KIND_JOB_CANCEL:
            await self.cancel(channel, event)

    # -- a request (§6.2–§6.4) ------------------------------------------------------------------
    async def _state(self, request: Event, channel: str) -> machine.Job:
        events = await self.rt.link.query(
            [{"kinds": sorted(L.LIFECYCLE_KINDS), "#e": [request.id], "#h": [channel], "limit": 500}]
        )
        return machine.fold(request, channel, events)

    async def request(self, channel: str, event: Event, fresh: bool = False) -> None:
        """A 43001 for this agent. `fresh`: delivered live, so nothing can have happened to it
        but a claim (which `claims` checks); caught-up and taken-over jobs are read first."""
        rt = self.rt
        agent = rt.identity.pubkey
        if not self.accepting or not self.seen.add(event.id) or event.pubkey == agent:
            return
        if agent not in event.tag_values("p"):
            return
        claim = await rt.claims.claim(event, fresh=fresh)
        if claim is Claim.SETTLED:
            return
        if claim is Claim.HELD:
            self._watch(channel, event)
            return
        await self._take(channel, event, fresh)

    async def _take(self, channel: str, event: Event, fresh: bool = False, seized: bool = False) -> bool:
        """We hold the claim: check the job is still open, gate, accept, queue. False when a
        `seized` job's 43002 was refused (its holder was alive and accepted it meanwhile)."""
        rt = self.rt
        job = machine.opened(event, channel) if fresh else await self._state(event, channel)
        if job.terminal:
            await rt.claims.done(event.id)
            return True
        requester = requester_of(event)
        if not await self._admitted(channel, requester):
            log.info(
                "job %s in %s declined: requester %s not admitted", event.id[:12], channel, requester[:12]
            )
            await publish_lifecycle(
                rt,
                build.failed(
                    channel,
                    event.id,
                    requester,
                    code="declined",
                    message=await self._declined_text(requester),
                ),
                f"job {event.id[:12]} decline",
            )
            await rt.claims.done(event.id)
            return True
        if job.state is machine.State.REQUESTED:
            accepted = await publish_lifecycle(
                rt, build.accepted(channel, event.id), f"job {event.id[:12]} accept"
            )
            if seized and not accepted:
                rt.claims.forget(event.id)
                return False
        try:
            body = orjson.loads(event.content)
        except orjson.JSONDecodeError:
            body = {}
        ticket = JobTicket(
            id=event.id,
            channel=channel,
            requester=requester,
            requested_outcome=job.requested_outcome,
            prompt=str(body.get("prompt") or "") if isinstance(body, dict) else "",
            deadline=job.deadline,
            progress_seq=job.last_seq,
        )
        item = Item(event, channel, time.monotonic(), meta={"job": ticket}, solo=True)
        await rt.status.react([item], EYES)
        log.info("job %s queued in %s", event.id[:12], channel)
        evicted = rt.queue.push(item)
        if evicted is not None:
            await rt.claims.done(evicted.event.id)
            await rt.status.unreact([evicted])
        self.dispatcher.wake()
        return True

    async def _admitted(self, channel: str, requester: str) -> bool:
        rt = self.rt
        agent, owner = rt.identity.pubkey, rt.identity.owner
        info = rt.channel(channel)
        decision = author_decision(
            rt.policy.respond_to, info.type, requester, agent, owner, rt.policy.allowlist
        )
        if decision is Decision.CHECK_MEMBER:
            return await rt.members.is_member(channel, requester) or (
                owner is not None and await rt.profiles.is_sibling(requester, agent, owner)
            )
        if decision is Decision.CHECK_SIBLING:
            return owner is not None and await rt.profiles.is_sibling(requester, agent, owner)
        return decision is Decision.ADMIT

    async def _declined_text(self, requester: str) -> str:
        rt = self.rt
        owner = rt.identity.owner
        if owner is None:
            return f"{DECLINED}: it has no owner to grant access"
        name = (await rt.profiles.get(owner)).display_name or npub(owner)
        command = grant_command(rt.policy.respond_to, npub(rt.identity.pubkey), npub(requester))
        return f"{DECLINED}; ask its owner {name} to let you in (the Directory's Answers, or `{command}`)"

    def _watch(self, channel: str, event: Event) -> None:
        if event.id not in self.watching:
            self.watching[event.id] = asyncio.create_task(
                self._watch_claim(channel, event), name="job-claim-watch"
            )

    async def _watch_claim(self, channel: str, event: Event) -> None:
        """Another process holds the job: seize it when it has no acceptance after the accept
        grace (a holder accepts within moments of its claim), else take it over when its claim
        stops moving."""
        try:
            await asyncio.sleep(self.rt.claims.accept_grace_s)
            if not self.accepting or await self._seize_unaccepted(channel, event):
                return
            if await self.rt.claims.await_takeover(event, lambda: self.accepting):
                log.info("took over job %s", event.id[:12])
                await self._take(channel, event)
        finally:
            self.watching.pop(event.id, None)

    async def _seize_unaccepted(self, channel: str, event: Event) -> bool:
        """True when the job needs no more watching: it ended, or it had no acceptance and is
        ours now. False: its holder accepted it (watch its claim's lease)."""
        try:
            job = await self._state(event, channel)
        except Exception as exc:
            log.warning("could not read job %s: %s", event.id[:12], exc)
            return False
        if job.terminal:
            return True
        if job.state is not machine.State.REQUESTED:
            return False
        claim = await self.rt.claims.seize(event)
        if claim is not Claim.TAKEN:
            return claim is Claim.SETTLED
        log.info(
            "seized job %s: claimed but not accepted after %.1f s",
            event.id[:12],
            self.rt.claims.accept_grace_s,
        )
        return await self._take(channel, event, seized=True)

    def stop_watching(self) -> None:
        for task in list(self.watching.values()):
            task.cancel()

    # -- a cancel (§6.7) --------------------------------------------------------------------------
    async def cancel(self, channel: str, event: Event) -> None:
        rt = self.rt
        job_id = job_of(event)
        if job_id is None or not self.seen.add(event.id):
            return
        removed = rt.queue.remove(channel, job_id)
        if removed is not None:
            log.info("job %s cancelled while queued", job_id[:12])
            await rt.status.unreact([removed])
            await rt.claims.done(job_id)
            return
        turn = self.dispatcher.in_flight(channel)
        if turn is not None and turn.job == job_id:
            log.info("job %s cancelled while running", job_id[:12])
            await self.dispatcher.request_end(channel, TurnEnd.JOB_CANCELLED)
        watcher = self.watching.pop(job_id, None)
        if watcher is not None:
            watcher.cancel()
