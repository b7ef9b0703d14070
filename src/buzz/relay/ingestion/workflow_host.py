"""The relay's side of the workflow engine (`buzz.workflows.host.Host`): its own internal path
for relay-signed events, and channel changes applied as the matching command would apply them.

Thin glue: the engine never sees the relay's parts, only these five calls. An action's event
is stored as the relay stores its own (`store.insert` with the effects ingest would add: the
thread row of a reply, the reaction index of a kind 7), then fanned out.
"""

from __future__ import annotations

import logging

from buzz.core.errors import Invalid
from buzz.core.event import Event
from buzz.core.stored import StoredEvent, relay_signed
from buzz.relay.delivery.fanout import FanOut
from buzz.relay.ingestion.emit import ChannelChange, Emitter
from buzz.relay.ingestion.rules import dms
from buzz.relay.ingestion.rules import jobs as job_rules
from buzz.relay.ingestion.rules.base import KindRules, Plan
from buzz.relay.ingestion.rules.messages import reaction_target
from buzz.relay.ingestion.rules.threads import thread
from buzz.relay.operator import crash_hook
from buzz.store.base import EventStore, InsertOutcome, PutReaction, UpdateChannel
from buzz.store.workflow_rows import RunLease

log = logging.getLogger(__name__)
DM_CREATED = 41001


class WorkflowHost:
    def __init__(
        self, store: EventStore, fanout: FanOut, rules: KindRules, emitter: Emitter, secret_key: str
    ) -> None:
        self._store = store
        self._fanout = fanout
        self._rules = rules
        self._emitter = emitter
        self._secret_key = secret_key
        self.on_invalidate: list = []  # replicas' trigger caches (the bus, when there is one)

    async def publish(self, stored: StoredEvent, lease: RunLease | None = None) -> InsertOutcome:
        plan = await self._plan(stored)
        if lease is not None:
            plan.effects.append(lease)
        outcome = await self._store.insert(plan.stored, plan.effects)
        if outcome is InsertOutcome.STORED:
            crash_hook.after_commit(stored.event.kind)
            await self._fanout.publish(plan.stored)
        return outcome

    async def plan(self, stored: StoredEvent) -> tuple[StoredEvent, tuple[object, ...]]:
        plan = await self._plan(stored)
        return plan.stored, tuple(plan.effects)

    async def _plan(self, stored: StoredEvent) -> Plan:
        plan = Plan(stored)
        event = stored.event
        if event.kind in job_rules.VALIDATORS:  # ask_agent's 43001 is a job: its row opens too
            plan = await job_rules.relay_signed(self._rules, stored)
        elif event.kind == 7:
            target = reaction_target(event)
            parent = await self._store.get(target) if target else None
            if parent is None:
                raise Invalid("reaction target event not found")
            plan.stored = stored.with_channel(parent.channel_id)
            plan.effects.append(PutReaction(event.id, event.pubkey, target, event.content))
        else:
            await thread(self._rules, plan, None)  # type: ignore[arg-type]  # the thread rule reads no session
        return plan

    async def fanout(self, stored: StoredEvent) -> None:
        crash_hook.after_commit(stored.event.kind)  # called only once the engine's write committed
        try:
            await self._fanout.publish(stored)
        except Exception:  # stored: readers still find it (workflows.md §11.1 item 2)
            log.exception("fan-out of workflow event %s failed", stored.event.id)

    async def set_topic(self, carrier: StoredEvent, actor: str, topic: str, lease: RunLease | None = None
                        ) -> InsertOutcome:  # fmt: skip
        """As a 9002 from `actor` with `["topic", topic]` (relay.md §4.5): the row changes with
        the step's 40099 `carrier` in one transaction, then 39000 follows."""
        channel_id = carrier.channel_id
        assert channel_id is not None
        effects = (UpdateChannel(channel_id, (("topic", topic),)), *((lease,) if lease is not None else ()))
        outcome = await self._store.insert(carrier, effects)
        if outcome is InsertOutcome.STORED:
            await self._fanout.publish(carrier)
            await self._emitter.apply(ChannelChange(channel_id, actor))
        return outcome

    async def open_dm(self, owner: str, to: str) -> str:
        """As a 41010 from `owner` naming `to` (relay.md §4.8 item 2): reuse or create the DM."""
        participants = frozenset({owner, to})
        carrier = relay_signed(Event.create(self._secret_key, DM_CREATED, "", [["p", owner], ["p", to]]))
        plan = Plan(carrier)
        channel_id, _ = await dms.open_dm(self._rules, plan, participants, owner)
        if plan.effects:
            plan.stored = carrier.with_channel(channel_id)
            await self._store.insert(plan.stored, plan.effects)
            for follow_up in plan.after_commit:
                await follow_up()
        return channel_id

    def invalidate(self, channel_id: str) -> None:
        for hook in self.on_invalidate:
            hook(channel_id)
