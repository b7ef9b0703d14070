"""Inbound relay events → the gate chain → the queue (agents.md §4.3–§4.8).

`Intake.channel_event` applies the chain of `buzz.agent.gates` in its order: duplicates and
own events, owner control commands (consumed, answered with a kind 40099), the author gate
(with the sibling lookup), the rule match, then enqueue with 👀 and the §4.8 action when the
channel has a turn in flight. `Intake.membership` applies 44100/44101 (de-duplicated, and
ignored when older than the newest notification applied for that channel).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from buzz.agent import stops
from buzz.agent.claims import Claim
from buzz.agent.directory import channel_info, fetch_channel
from buzz.agent.event_view import is_notice, mentions, reply_anchor, thread_refs
from buzz.agent.gates import (
    DM_LIKE_TYPES,
    VOICE_GUIDELINES_KIND,
    Command,
    Decision,
    NoticeLimiter,
    SeenIds,
    author_decision,
    channel_filter,
    control_command,
    describe_policy,
    match_rule,
    not_admitted_text,
    stop_request,
)
from buzz.agent.prompts import ChannelInfo, is_private
from buzz.agent.queue import Item
from buzz.agent.runtime import Runtime
from buzz.agent.sessions import Arrival, TurnEnd, arrival_action
from buzz.agent.status import (
    ASKER_TAG,
    EYES,
    NOTICE_NOT_ADMITTED,
    OUTCOME_ROTATE_NOOP,
    OUTCOME_ROTATED,
    OUTCOME_SHUTDOWN,
)
from buzz.agent.turns import Dispatcher
from buzz.core.event import Event
from buzz.core.nip19 import npub

if TYPE_CHECKING:
    from buzz.agent.jobs import JobDesk

if TYPE_CHECKING:
    from buzz.agent.private_inbox import PrivateInbox

log = logging.getLogger(__name__)
PRIVATE_SUB = "nip17-inbox"  # the gift wraps of the agent (buzz.agent.private_inbox)

MEMBERSHIP_SUB = "membership-notif"
CHANNEL_STATE_SUB = "channel-state"  # 39000 metadata: a channel archived or unarchived
CHANNEL_SUB_PREFIX = "ch-"
REVOKED = "restricted: channel access revoked"


def channel_sub(channel: str) -> str:
    return CHANNEL_SUB_PREFIX + channel


class Intake:
    """Applies the gate chain and membership changes. `on_shutdown` is called once for
    `!shutdown` after its control outcome is published."""

    def __init__(
        self, runtime: Runtime, dispatcher: Dispatcher, on_shutdown: Callable[[], Awaitable[None]]
    ) -> None:
        self.rt = runtime
        self.dispatcher = dispatcher
        self.on_shutdown = on_shutdown
        self.seen = SeenIds()
        self.seen_membership = SeenIds()
        self.membership_applied: dict[str, int] = {}
        self.archived: set[str] = set()  # member channels left unserved while archived
        self.state_applied: dict[str, int] = {}  # channel → created_at of the newest 39000 applied
        self.accepting = True
        self.last_accepted = time.monotonic()
        self.notices = NoticeLimiter()
        self.watching: dict[str, tuple[str, asyncio.Task[None]]] = {}  # event id → (channel, watcher)
        self.jobs: JobDesk | None = None  # set by the harness: the channel's job subscription follows it
        self.private: PrivateInbox | None = None  # end-to-end encrypted DMs (set by the harness)

    # -- subscriptions -----------------------------------------------------------------------
    async def open_channel(self, channel: str, since: int, catch_up: bool = False) -> bool:
        """Subscribe `ch-<C>` from `since` with the filter of the rules covering C. With
        `catch_up` the link resumes it from the reconnect time and reports the gap, which
        `catch_up` then answers (issue 14 item 5)."""
        flt = channel_filter(self.rt.rules, channel, self.rt.identity.pubkey, since)
        if flt is None:
            return False
        await self.rt.link.subscribe(channel_sub(channel), flt, since, catch_up=catch_up)
        return True

    async def catch_up(self, channel: str, since: int, until: int) -> int:
        """Feed the channel's events of [since, until] through the gate chain, oldest first,
        each as a batch of its own (`Item.solo`); already-seen and already-claimed events are
        skipped. Returns how many were queried. Raises what the query raises."""
        flt = channel_filter(self.rt.rules, channel, self.rt.identity.pubkey, since)
        if flt is None or until < since:
            return 0
        events = await self.rt.link.query([{**flt, "until": until}])
        for event in sorted(events, key=lambda e: (e.created_at, e.id)):
            await self.channel_event(channel, event, solo=True)
        return len(events)

    async def route(self, sub_id: str, event: Event) -> None:
        if sub_id == MEMBERSHIP_SUB:
            await self.membership(event)
        elif sub_id == CHANNEL_STATE_SUB:
            await self.channel_state(event)
        elif sub_id == PRIVATE_SUB:
            if self.private is not None and self.accepting:
                await self.private.wrap(event)
        elif sub_id.startswith(CHANNEL_SUB_PREFIX):
            await self.channel_event(sub_id[len(CHANNEL_SUB_PREFIX) :], event)

    async def closed(self, sub_id: str, reason: str) -> None:
        """A CLOSED from the relay; access revocation is handled like 44101 (§4.3 item 3)."""
        if sub_id.startswith(CHANNEL_SUB_PREFIX) and reason.startswith(REVOKED):
            await self.remove_channel(sub_id[len(CHANNEL_SUB_PREFIX) :])

    # -- the gate chain (§4.5) -----------------------------------------------------------------
    async def channel_event(self, channel: str, event: Event, solo: bool = False) -> None:
        rt = self.rt
        agent, owner = rt.identity.pubkey, rt.identity.owner
        if not self.accepting or not self.seen.add(event.id):
            return
        if event.pubkey == agent and not rt.config.no_ignore_self:
            return
        if is_notice(event):
            return  # another harness's retrying / failure / not-admitted notice (item 6)
        if event.kind == VOICE_GUIDELINES_KIND:  # the channel is a voice huddle: prompt context only
            rt.note_voice_guidelines(channel, event)
            return
        names = [rt.agent_name] if rt.agent_name else []
        command = control_command(event, agent, owner, names)
        if command is not None:
            if solo:  # caught up: a command sent while the agent was away is stale, never replayed
                log.info("intake: owner command %s from before the start not run", command.value)
                return
            await self.control(command, channel, event)
            return
        if (
            not solo
            and stop_request(event, agent, names)
            and stops.may_stop(self.dispatcher.in_flight(channel), event.pubkey)
        ):
            await stops.stop(rt, self.dispatcher, channel, event)  # the requester stops its own turn
            return
        info = rt.channel(channel)
        author = rt.author_of(event)  # a workflow's post is weighed as its owner's
        decision = author_decision(rt.policy.respond_to, info.type, author, agent, owner, rt.policy.allowlist)
        if decision is Decision.CHECK_MEMBER:
            admitted = await rt.members.is_member(channel, author) or (
                owner is not None and await rt.profiles.is_sibling(author, agent, owner)
            )
            decision = Decision.ADMIT if admitted else Decision.DROP
        elif decision is Decision.CHECK_SIBLING:
            admitted = owner is not None and await rt.profiles.is_sibling(author, agent, owner)
            decision = Decision.ADMIT if admitted else Decision.DROP
        if decision is Decision.DROP:
            log.info("dropped %s in %s: author %s not admitted", event.id[:12], channel, author[:12])
            await self.not_admitted(channel, info.type, event)
            return
        rule = match_rule(rt.rules, channel, event, agent)
        if rule is None:
            return
        claim = await rt.claims.claim(event)
        if claim is Claim.SETTLED:
            log.info("skipped %s in %s: this agent already answered it", event.id[:12], channel)
            return
        if claim is Claim.HELD:
            log.info("%s in %s is taken by another process; watching its claim", event.id[:12], channel)
            self.watch(channel, event, rule.prompt_tag)
            return
        await self.accept(channel, event, rule.prompt_tag, solo)

    def watch(self, channel: str, event: Event, prompt_tag: str) -> None:
        if event.id not in self.watching:
            task = asyncio.create_task(self._watch_claim(channel, event, prompt_tag), name="claim-watch")
            self.watching[event.id] = (channel, task)

    async def _watch_claim(self, channel: str, event: Event, prompt_tag: str) -> None:
        """Look at a claim held elsewhere once a lease: take the event over when its holder
        died (the asker is never left in silence), stop when it was answered."""
        claims = self.rt.claims
        try:
            if await claims.await_takeover(event, lambda: self.accepting):
                sub = PRIVATE_SUB if is_private(channel) else channel_sub(channel)
                if self.accepting and self.rt.link.subscribed(sub):
                    await self.accept(channel, event, prompt_tag, solo=True)
                else:
                    await claims.release(event.id)
        finally:
            self.watching.pop(event.id, None)

    def stop_watching(self, channel: str | None = None) -> None:
        """Cancel the claim watchers (of one channel, or all of them)."""
        for _, (ch, task) in list(self.watching.items()):
            if channel is None or ch == channel:
                task.cancel()

    async def accept(self, channel: str, event: Event, prompt_tag: str, solo: bool) -> None:
        """Queue a claimed event with 👀; the §4.8 action when its channel has a turn."""
        rt = self.rt
        owner = rt.identity.owner
        item = Item(event, channel, time.monotonic(), meta={"prompt_tag": prompt_tag}, solo=solo)
        await rt.status.react([item], EYES)
        evicted = rt.queue.push(item)
        self.last_accepted = time.monotonic()
        if evicted is not None:
            log.warning("queue of %s is full; dropped the oldest event %s", channel, evicted.event.id[:12])
            await rt.claims.done(evicted.event.id)
            await rt.status.unreact([evicted])
        turn = self.dispatcher.in_flight(channel)
        if turn is not None and turn.job is None and not solo:  # a job is never steered (jobs spec §6.4)
            action = arrival_action(rt.config.multiple_event_handling, event.pubkey, owner)
            if action is Arrival.STEER:
                await self.dispatcher.steer(channel)
            elif action is Arrival.INTERRUPT:
                await self.dispatcher.request_end(channel, TurnEnd.SUPERSEDED)
        self.dispatcher.wake()

    async def not_admitted(self, channel: str, channel_type: str, event: Event) -> None:
        """Issue 14 item 1: a mention the author gate refused gets a short visible reply in its
        thread, once per author and channel per hour; DMs stay silent (the DM rule)."""
        rt = self.rt
        agent = rt.identity.pubkey
        if channel_type in DM_LIKE_TYPES or not mentions(event, agent):
            return
        if match_rule(rt.rules, channel, event, agent) is None:
            return
        asker_key = rt.author_of(event)
        if not self.notices.allow(asker_key, channel, time.monotonic()):
            return
        mode, owner = rt.policy.respond_to, rt.identity.owner
        if owner is None:
            text = f"I only answer {describe_policy(mode)}, and I have no owner to grant access."
        else:
            owner_name = (await rt.profiles.get(owner)).display_name or npub(owner)
            text = not_admitted_text(mode, owner_name, npub(agent), npub(asker_key))
        asker = (ASKER_TAG, asker_key, mode)
        await rt.status.notice(channel, reply_anchor(event), NOTICE_NOT_ADMITTED, text, [asker])

    # -- owner commands (§4.5 step 3) ----------------------------------------------------------
    async def control(self, command: Command, channel: str, event: Event) -> None:
        rt = self.rt
        owner, agent = rt.identity.owner, rt.identity.pubkey
        assert owner is not None
        root = thread_refs(event).root
        log.info("owner command %s in %s", command.value, channel)
        if command is Command.SHUTDOWN:
            self.accepting = False
            await rt.status.outcome(channel, OUTCOME_SHUTDOWN, owner, agent, root)
            await self.on_shutdown()
            return
        if command is Command.CANCEL:
            await stops.stop(rt, self.dispatcher, channel, event)
            return
        busy = await self.dispatcher.request_end(channel, TurnEnd.OWNER_ROTATE)
        if busy:
            outcome = OUTCOME_ROTATED
        else:
            dropped = rt.sessions.drop_channel(channel)
            await self.dispatcher.retire(dropped)
            outcome = OUTCOME_ROTATED if dropped else OUTCOME_ROTATE_NOOP
        await rt.status.outcome(channel, outcome, owner, agent, root)

    # -- membership (§4.3 items 3–4) -----------------------------------------------------------
    async def membership(self, event: Event) -> None:
        if not self.seen_membership.add(event.id) or event.kind not in (44100, 44101):
            return
        channel = event.first_tag("h")
        if channel is None or self.rt.identity.pubkey not in event.tag_values("p"):
            return
        newest = self.membership_applied.get(channel)
        if newest is not None and event.created_at < newest:
            return
        self.membership_applied[channel] = event.created_at
        if event.kind == 44101:
            self.archived.discard(channel)
            await self.remove_channel(channel)
            await self.watch_state(event.created_at)
            return
        allowed = self.rt.config.channels
        if allowed is not None and channel not in allowed:
            return
        if self.rt.link.subscribed(channel_sub(channel)):
            return  # already served (the notification predates our subscription)
        try:
            info = await fetch_channel(self.rt.link.query, channel)
        except Exception as exc:
            log.warning("could not fetch metadata of %s: %s", channel, exc)
            info = None
        if info is not None and info.archived:
            self.archived.add(channel)  # served once it is unarchived
        else:
            await self.serve(channel, info, event.created_at)
            log.info("added to channel %s", channel)
        await self.watch_state(event.created_at)

    async def serve(self, channel: str, info: ChannelInfo | None, since: int) -> None:
        """Start serving `channel` from `since`: its subscription, its jobs, its work status."""
        if info is not None:
            self.rt.channels[channel] = info
        self.rt.work.open(channel)
        if await self.open_channel(channel, since, catch_up=self.rt.config.catch_up > 0):
            log.info("subscribed to channel %s", channel)
        if self.jobs is not None:
            await self.jobs.open_channel(channel, since)
            await self.jobs.catch_up(channel, int(time.time()))

    # -- archiving (decision 386) -------------------------------------------------------------
    async def watch_state(self, since: int) -> None:
        """(Re)open the 39000 subscription over every member channel, served or archived: the
        relay fans a channel's events out to the subscriptions that name it in `#h`."""
        channels = sorted(set(self.rt.channels) | self.archived)
        if channels:
            await self.rt.link.subscribe(CHANNEL_STATE_SUB, {"kinds": [39000], "#h": channels}, since)
        else:
            await self.rt.link.unsubscribe(CHANNEL_STATE_SUB)

    async def channel_state(self, event: Event) -> None:
        """A channel's 39000 from the relay. Archived while served: the channel is let go as on
        a removal (nothing can be posted there any more). Unarchived while this agent is a
        member: it is served again, as when added, without a restart."""
        channel = event.d_tag
        if event.kind != 39000 or not channel or event.pubkey != self.rt.relay_pubkey:
            return
        newest = self.state_applied.get(channel)
        if newest is not None and event.created_at < newest:
            return
        self.state_applied[channel] = event.created_at
        info = channel_info(event)
        if info.archived and channel in self.rt.channels:
            self.archived.add(channel)
            await self.remove_channel(channel, "archived; no longer serving channel")
        elif not info.archived and channel in self.archived:
            self.archived.discard(channel)
            allowed = self.rt.config.channels
            if allowed is None or channel in allowed:
                # Not from the 39000's own time: the relay moves a channel's state events past
                # the one before, so after quick changes it can be seconds ahead of the clock.
                await self.serve(channel, info, min(event.created_at, int(time.time())))
                log.info("channel %s unarchived; served again", channel)

    async def remove_channel(self, channel: str, why: str = "removed from channel") -> None:
        """44101, revoked access or archived (`why`, for the log): close `ch-C`, drain C's queue
        (removing 👀) and invalidate C's sessions; an in-flight turn finishes and its session is
        dropped when it returns."""
        rt = self.rt
        rt.work.close_channel(channel)
        await rt.link.unsubscribe(channel_sub(channel))
        if self.jobs is not None:
            await self.jobs.close_channel(channel)
        drained = rt.queue.drain(channel)
        self.stop_watching(channel)
        for item in drained:
            await rt.claims.done(item.event.id)
        await rt.status.unreact(drained)
        turn = self.dispatcher.in_flight(channel)
        busy_worker = None
        if turn is not None:
            turn.drop_session = True
            busy_worker = turn.worker
        retired = []
        for state in rt.sessions.drop_channel(channel):
            if state.worker == busy_worker:
                rt.sessions.put(state)  # dropped when the turn returns
            else:
                retired.append(state)
        await self.dispatcher.retire(retired)
        rt.channels.pop(channel, None)
        log.info("%s %s", why, channel)
