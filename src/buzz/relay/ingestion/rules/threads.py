"""Thread ancestry (relay.md §9 item 1; agents.md §3.3) for every needs-h kind.

An event is a reply iff it has an `e` tag whose 4th element is `reply`; that tag names the
parent. The parent must be stored, not deleted, and in the same channel; the declared root
(the `e` tag marked `root`, else the parent itself) must be the parent's root; depth = the
parent's depth + 1 ≤ 100 (top-level events have depth 0). The relay stores root and depth
with each reply (`RecordThread`). Unmarked `e` tags are never thread links.
"""

from __future__ import annotations

from buzz.core.errors import Invalid
from buzz.core.event import Event
from buzz.core.limits import MAX_THREAD_DEPTH
from buzz.relay.auth.session import Session
from buzz.relay.ingestion.rules.base import KindRules, Plan, Validator
from buzz.store.base import RecordThread


def marked(event: Event, marker: str) -> str | None:
    """The id of the first `e` tag carrying `marker` as its 4th element, or None."""
    return next((t[1] for t in event.tags if len(t) >= 4 and t[0] == "e" and t[3] == marker), None)


async def thread(rules: KindRules, plan: Plan, session: Session) -> None:
    """Check a reply's ancestry and record its root and depth; top-level events pass."""
    event = plan.stored.event
    parent_id = marked(event, "reply")
    if parent_id is None:
        return
    parent = await rules.store.get(parent_id)
    if parent is None or parent.channel_id is None or parent.channel_id != plan.stored.channel_id:
        raise Invalid("reply parent not found in this channel")
    position = await rules.store.get_thread(parent_id)
    root, parent_depth = position if position is not None else (parent_id, 0)
    if (marked(event, "root") or parent_id) != root:
        raise Invalid("thread root does not match parent")
    depth = parent_depth + 1
    if depth > MAX_THREAD_DEPTH:
        raise Invalid(f"thread depth exceeds {MAX_THREAD_DEPTH}")
    plan.effects.append(RecordThread(event.id, root, parent_id, depth))


def with_thread_rules(validator: Validator | None) -> Validator:
    """`thread`, then the kind's own validator (if any): the rule for a needs-h kind."""

    async def both(rules: KindRules, plan: Plan, session: Session) -> None:
        await thread(rules, plan, session)
        if validator is not None:
            await validator(rules, plan, session)

    return both
