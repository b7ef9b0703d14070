"""The actions of workflows.md §8 as two calls: `build` (at step start: the exact events or
request, with `created_at = effect_at`, recorded with the step before anything happens) and
`perform` (the recorded effect, again identical after a crash: a repeated event is a
`duplicate`, a repeated webhook carries the same `Idempotency-Key`, §11.4).

`request_approval` and `delay` never get here: the engine and the state machine make them.
"""

from __future__ import annotations

import time
from typing import Any

from buzz.core.errors import BuzzError
from buzz.core.event import Event
from buzz.core.filters import Filter
from buzz.core.limits import MAX_THREAD_DEPTH
from buzz.core.stored import relay_signed
from buzz.store.base import SYSTEM, EventStore, InsertOutcome
from buzz.store.workflow_rows import LeaseLost, RunLease
from buzz.workflows import events as ev
from buzz.workflows import webhook_call
from buzz.workflows.host import Host, Settings
from buzz.workflows.machine import Dispatch, Input, Run, StepFailed, StepSucceeded, StepWaits
from buzz.workflows.mentions import mentioned, names_of, resolve_one
from buzz.workflows.resolve import StepFailure


def _fail(message: str, code: str = "action_failed") -> StepFailure:
    return StepFailure(code, message)


def _sent(now: int, event_id: str, channel_id: str) -> Input:
    """`send_message`'s outcome, whether its message was stored by `perform` or by `carry`."""
    return StepSucceeded(now, {"sent": True, "event_id": event_id, "channel_id": channel_id})


class Actions:
    def __init__(self, store: EventStore, host: Host, secret_key: str, relay_pubkey: str, settings: Settings,
                 replica: str) -> None:  # fmt: skip
        self.replica = replica  # the lease every effect's insert must still hold (RunLease)
        self.store = store
        self.host = host
        self.secret_key = secret_key
        self.relay_pubkey = relay_pubkey
        self.settings = settings

    def sign(self, template: ev.EventTemplate) -> Event:
        return Event.create(
            self.secret_key, template.kind, template.content, template.tags, template.created_at
        )

    def _event(self, kind: int, content: str, tags: list[tuple[str, ...]], at: int) -> dict[str, Any]:
        return Event.create(self.secret_key, kind, content, tags, at).to_dict()

    # -- facts -----------------------------------------------------------------------------
    async def member_names(self, channel_id: str) -> dict[str, str]:
        members = await self.store.active_members(channel_id)
        keys = frozenset(m.pubkey for m in members)
        if not keys:
            return {}
        profiles = await self.store.query([Filter(kinds=frozenset({0}), authors=keys)], SYSTEM)
        return names_of((p.event.pubkey, p.event.content) for p in profiles)

    async def _open_channel(self, channel_id: str) -> None:
        channel = await self.store.get_channel(channel_id)
        if channel is None:
            raise _fail("the workflow's channel does not exist")
        if channel.archived_at is not None:
            raise _fail("the workflow's channel is archived")

    # -- build -----------------------------------------------------------------------------
    async def build(self, run: Run, d: Dispatch) -> dict[str, Any]:
        """The step's effect. Raises StepFailure (§7.6 codes)."""
        f = d.resolved.fields
        action = d.resolved.action
        ref = run.ref
        tail = list(ev.engine_tags(run.owner, run.workflow_id))
        if action == "send_message":
            await self._open_channel(run.channel_id)
            tags: list[tuple[str, ...]] = [("h", run.channel_id)]
            if f.get("reply_in_thread"):
                tags += await self._thread_tags(run)
            tags.append(("actor", run.owner))
            if "@" in f["text"]:  # no `@`, no mention: the members' names are not read
                tags += [("p", pk) for pk in mentioned(f["text"], await self.member_names(run.channel_id))]
            return {
                "events": [self._event(9, f["text"], tags + tail, d.effect_at)],
                "channel_id": run.channel_id,
            }
        if action == "send_dm":
            to = f["to"]
            member = await self.store.get_member(run.channel_id, to)
            if member is None or not member.active:
                raise _fail("send_dm recipient is not a member of the workflow's channel")
            try:
                dm = await self.host.open_dm(run.owner, to)
            except BuzzError as exc:
                raise _fail(f"send_dm could not open the DM: {exc}") from None
            tags = [("h", dm), ("actor", run.owner), ("p", to), *tail]
            return {"events": [self._event(9, f["text"], tags, d.effect_at)], "channel_id": dm, "to": to}
        if action == "set_channel_topic":
            await self._open_channel(run.channel_id)
            body = {"type": "topic_changed", "actor": run.owner, "topic": f["topic"], "workflow_id": run.workflow_id,
                    "run_id": run.id}  # fmt: skip
            tags = [("h", run.channel_id), ("actor", run.owner), *tail]
            return {"topic": f["topic"], "events": [self._event(40099, ev.compact(body), tags, d.effect_at)]}
        if action == "add_reaction":
            target = str(run.trigger.get("message_id") or "")
            stored = await self.store.get(target) if target else None
            if stored is None:
                raise _fail("add_reaction target message not found")
            existing = await self.store.query(
                [
                    Filter(
                        kinds=frozenset({7}),
                        authors=frozenset({self.relay_pubkey}),
                        tags={"e": frozenset({target})},
                    )
                ],
                SYSTEM,
            )
            same = next((s.event.id for s in existing if s.event.content == f["emoji"]), None)
            if same is not None:
                return {"existing": same, "target": target}
            tags = [("e", target), ("actor", run.owner), *tail]
            return {"events": [self._event(7, f["emoji"], tags, d.effect_at)], "target": target}
        if action == "call_webhook":
            return dict(f)
        if action == "ask_agent":
            agent = f.get("agent")
            names = await self.member_names(run.channel_id)
            if agent is None:
                agent = resolve_one(f["agent_name"], names)
                if agent is None:
                    raise _fail("ask_agent target is not an agent member of this channel")
            member = await self.store.get_member(run.channel_id, agent)
            if member is None or not member.active or await self.store.get_agent_owner(agent) is None:
                raise _fail("ask_agent target is not an agent member of this channel")
            deadline = d.effect_at + int(f["timeout"])
            job = ev.job_request(
                ref, d.effect_at, agent=agent, prompt=f["prompt"], deadline=deadline, step_id=d.step_id
            )
            return {"events": [self.sign(job).to_dict()], "agent": agent, "deadline": deadline}
        raise _fail(f"{action} is not dispatched here")

    async def _thread_tags(self, run: Run) -> list[tuple[str, ...]]:
        parent = str(run.trigger.get("message_id") or "")
        if not parent or await self.store.get(parent) is None:
            raise _fail("reply_in_thread parent message not found")
        position = await self.store.get_thread(parent)
        if position is None:
            return [("e", parent, "", "reply")]
        root, depth = position
        if depth + 1 > MAX_THREAD_DEPTH:
            raise _fail(f"thread depth exceeds {MAX_THREAD_DEPTH}")
        return [("e", root, "", "root"), ("e", parent, "", "reply")]

    # -- perform ---------------------------------------------------------------------------
    async def _publish_all(self, run: Run, effect: dict[str, Any], channel_id: str | None) -> list[str]:
        ids = []
        for obj in effect.get("events", ()):
            event = Event.from_json(obj)
            outcome = await self.host.publish(relay_signed(event, channel_id), RunLease(run.id, self.replica))
            if outcome not in (InsertOutcome.STORED, InsertOutcome.DUPLICATE):
                raise _fail(f"event {event.id} was not stored ({outcome.value})")
            ids.append(event.id)
        return ids

    async def carry(self, run: Run, d: Dispatch, effect: dict[str, Any]
                    ) -> tuple[tuple[tuple[Any, tuple[Any, ...]], ...], Input] | None:  # fmt: skip
        """A new run's first `send_message` stored with the run's creating write (decision
        383): its events as the relay's own path would insert them, and the step's outcome —
        what `perform` returns once they are stored. None for any other action."""
        if d.resolved.action != "send_message":
            return None
        planned = []
        try:
            for obj in effect.get("events", ()):
                planned.append(await self.host.plan(relay_signed(Event.from_json(obj), run.channel_id)))
        except BuzzError:
            return None  # performed as any step, which records why it failed
        return tuple(planned), _sent(int(time.time()), planned[0][0].event.id, run.channel_id)

    async def perform(self, run: Run, d: Dispatch, effect: dict[str, Any]) -> Input:
        action = d.resolved.action
        now = int(time.time())
        try:
            if action == "send_message":
                ids = await self._publish_all(run, effect, run.channel_id)
                return _sent(now, ids[0], run.channel_id)
            if action == "send_dm":
                ids = await self._publish_all(run, effect, effect["channel_id"])
                return StepSucceeded(now, {"sent": True, "event_id": ids[0], "channel_id": effect["channel_id"],
                                           "to": effect["to"]})  # fmt: skip
            if action == "set_channel_topic":
                await self._open_channel(run.channel_id)
                carrier = relay_signed(Event.from_json(effect["events"][0]), run.channel_id)
                try:
                    await self.host.set_topic(
                        carrier, run.owner, effect["topic"], RunLease(run.id, self.replica)
                    )
                except BuzzError as exc:
                    raise _fail(f"set_channel_topic refused: {exc}") from None
                return StepSucceeded(now, {"topic": effect["topic"], "event_id": carrier.event.id})
            if action == "add_reaction":
                if "existing" in effect:
                    return StepSucceeded(
                        now, {"added": False, "event_id": effect["existing"], "target": effect["target"]}
                    )
                ids = await self._publish_all(run, effect, run.channel_id)
                return StepSucceeded(now, {"added": True, "event_id": ids[0], "target": effect["target"]})
            if action == "call_webhook":
                if not await self.store.workflow_holds_lease(run.id, self.replica):  # type: ignore[attr-defined]
                    raise LeaseLost(run.id)  # cancelled (its workflow deleted) since the step started
                try:
                    out = await webhook_call.call(effect, run.workflow_id, run.id, self.settings.allow)
                except webhook_call.WebhookFailed as exc:
                    return StepFailed(int(time.time()), "webhook_failed", str(exc), exc.attempts)
                return StepSucceeded(int(time.time()), out, out["attempts"])
            if action == "ask_agent":
                ids = await self._publish_all(run, effect, run.channel_id)
                return StepWaits(now, ids[0], effect["agent"], int(effect["deadline"]))
        except StepFailure as exc:
            return StepFailed(now, exc.code, exc.message)
        return StepFailed(now, "action_failed", f"{action} cannot be performed")
