"""Who may start a workflow's run, as one rule (workflows.md §6.5 item 2, §7.1): the facts are
read by the runner (one read per door, or three statements per scheduler batch) and judged here.
"""

from __future__ import annotations

from buzz.store.base import Channel, Member
from buzz.store.workflow_rows import WorkflowRow

ELEVATED_ROLES = frozenset({"owner", "admin"})  # what a `call_webhook` definition's owner must be


def switched_on(wf: WorkflowRow) -> bool:
    """The definition itself is live: not deleted, and enabled."""
    return wf.status == "active" and wf.enabled


def channel_open(channel: Channel | None) -> bool:
    return channel is not None and channel.archived_at is None


def member_qualifies(member: Member | None, elevated: bool) -> bool:
    """The owner is an active member of the channel, and its owner or admin when `elevated`.
    A ban on the owner is the other half of the rule (`banned_among`)."""
    if member is None or not member.active:
        return False
    return not elevated or member.role in ELEVATED_ROLES
