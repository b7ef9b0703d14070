"""Workflow kinds at ingest (workflows.md §6.2, §9.4, §13): thin glue over
`buzz.workflows.commands`, which runs the checks and returns the engine's write; the write
commits with the event (an effect), and its follow-up fans out and starts the run.

46020 / 46030 / 46031 are `OPT_H` in the kind table: their channel is the workflow's or the
approval's, derived here (a present `h` must name it), and then the write gate of that channel.
"""

from __future__ import annotations

from buzz.core.errors import Invalid, Restricted
from buzz.core.stored import StoredEvent
from buzz.relay.auth.session import Session
from buzz.relay.ingestion.rules.base import KindRules, Plan
from buzz.relay.ingestion.rules.records import workflow_definition
from buzz.workflows import commands
from buzz.workflows.authority import ELEVATED_ROLES
from buzz.workflows.engine import Engine


def _engine(rules: KindRules) -> Engine:
    engine = rules.workflows
    if engine is None:
        raise Restricted("workflows are disabled on this relay")
    return engine


async def _gate(rules: KindRules, channel_id: str, pubkey: str) -> None:
    try:
        await rules.write_gate(channel_id, pubkey)
    except Restricted:
        raise Restricted("not a channel member") from None


async def definition(rules: KindRules, plan: Plan, session: Session) -> None:
    """30620 (§6.2): the `d` rule, then the engine's checks; the row commits with the event."""
    await workflow_definition(rules, plan, session)
    engine = rules.workflows
    if engine is None:
        return
    saved = await commands.save_definition(engine, plan.stored)
    if saved.write is not None:
        plan.effects.append(saved.write)
        channel_id = plan.stored.channel_id

        async def invalidate() -> None:
            if saved.write is not None and saved.write.workflow is not None:
                engine.warm(saved.write.workflow)
            if channel_id is not None:
                engine.invalidate(channel_id)
                engine.host.invalidate(channel_id)

        plan.after_commit.append(invalidate)
    plan.response = saved.response


async def manual_trigger(rules: KindRules, plan: Plan, session: Session) -> None:
    """46020 (§13): stored in the workflow's channel with its new run, one transaction."""
    engine = _engine(rules)
    channel_id, prepared = await commands.manual_trigger(engine, plan.stored, lambda c, p: _gate(rules, c, p))
    plan.stored = plan.stored.with_channel(channel_id)
    plan.effects.append(prepared.write)
    plan.response = commands.manual_response(prepared, prepared.write.runs[0].workflow_id)

    async def start() -> None:
        await engine.created(prepared)

    plan.after_commit.append(start)


async def approval_answer(rules: KindRules, plan: Plan, session: Session) -> None:
    """46030 / 46031 (§9.4): the decision, the run's change and 46011/46012 commit with it."""
    engine = _engine(rules)
    answered = await commands.answer_approval(engine, plan.stored, lambda c, p: _gate(rules, c, p))
    if plan.stored.channel_id not in (None, answered.channel_id):
        raise Invalid("approval belongs to a different channel")
    plan.stored = plan.stored.with_channel(answered.channel_id)
    plan.effects.append(answered.write)
    write = answered.write

    async def resume() -> None:
        for stored in write.events:
            await engine.host.fanout(stored)
        if write.runs:
            engine.kick(answered.run_id)

    plan.after_commit.append(resume)


async def check_moderator(rules: KindRules, channel_id: str | None, pubkey: str) -> None:
    """§6.6 item 1's extension: an active owner or admin of the workflow's channel may delete
    another member's workflow; anyone else is refused (decision 320)."""
    member = await rules.store.get_member(channel_id, pubkey) if channel_id is not None else None
    if member is None or not member.active or member.role not in ELEVATED_ROLES:
        raise Restricted("only the workflow's owner or a channel owner or admin may delete a workflow")


def deletion(rules: KindRules, plan: Plan, targets: tuple[StoredEvent, ...] | None = None) -> None:
    """A deletion that removes a workflow's live head deletes the workflow in the same
    transaction (§6.6 items 3–4): a kind 5's targets and addresses, or a 9005's `targets`.
    After the commit its runs' 46007s fan out and trigger caches forget it."""
    engine = rules.workflows
    if engine is not None:
        heads = commands.deleted_heads(plan.targets if targets is None else targets,
                                       plan.addresses if targets is None else ())  # fmt: skip
        _delete(engine, plan, heads, whatever_the_head=False)


async def channel_deleted(rules: KindRules, plan: Plan, channel_id: str) -> None:
    """9008: every workflow of the channel is deleted with it (§6.6 item 3)."""
    engine = rules.workflows
    if engine is None:
        return
    heads, after = [], ""
    while True:
        page = await engine.store.workflows(channel_id=channel_id, after_id=after, limit=500)
        heads += [(wf.id, wf.owner) for wf in page]
        if len(page) < 500:
            break
        after = page[-1].id
    _delete(engine, plan, heads, whatever_the_head=True)


def _delete(engine: Engine, plan: Plan, heads: list[tuple[str, str]], *, whatever_the_head: bool) -> None:
    if not heads:
        return
    by = plan.stored.event.pubkey
    produced: list[list[StoredEvent]] = []
    for workflow_id, owner in heads:
        effect, events = commands.deletion(engine, workflow_id, owner, by, whatever_the_head)
        plan.effects.append(effect)
        produced.append(events)
    channel_id = plan.stored.channel_id

    async def after() -> None:
        if channel_id is not None:
            engine.invalidate(channel_id)
            engine.host.invalidate(channel_id)
        for events in produced:
            for stored in events:
                await engine.host.fanout(stored)

    plan.after_commit.append(after)


VALIDATORS = {
    30620: definition,
    46020: manual_trigger,
    46030: approval_answer,
    46031: approval_answer,
}
