"""The messages model (relay.md §9 items 3, 4, 11, §10.2; agents.md §3): mentions, reactions
(7), edits (40003), channel-moderation deletion (9005) and agent-signed system messages (40099).

Thread ancestry for every needs-h kind lives in `buzz.relay.ingestion.rules.threads`.
"""

from __future__ import annotations

import orjson

from buzz.core.channel_id import is_channel_id
from buzz.core.errors import Duplicate, Invalid, Refusal, Restricted
from buzz.core.event import Event
from buzz.core.keys import is_hex
from buzz.core.limits import REACTION_MAX_CHARS
from buzz.core.stored import StoredEvent
from buzz.relay.auth.session import Session
from buzz.relay.ingestion.rules import workflows
from buzz.relay.ingestion.rules.base import KindRules, Plan, Validator, effective_author
from buzz.relay.ingestion.rules.membership import active_member, is_elevated
from buzz.store.base import PutReaction, SoftDelete

MAX_MENTIONS = 50  # agents.md §2.3 item 4, §3.2: at most 50 distinct `p` tags per message
MENTION_KINDS = (9, 40002, 45001, 45003)  # message-like kinds whose `p` tags are mentions
# agents.md §4.5: the control outcomes an agent may sign as kind 40099.
CONTROL_OUTCOMES = frozenset(
    {
        "agent_shutdown",
        "agent_turn_cancelled",
        "agent_cancel_noop",
        "agent_session_rotated",
        "agent_rotate_noop",
    }
)

EDIT_REFUSED = Refusal(Invalid, "must be event author to edit")
MODERATION_REFUSED = Refusal(Invalid, "must be event author or channel owner/admin")
SYSTEM_REFUSED = Refusal(Restricted, "system messages are relay-signed")


async def mentions(rules: KindRules, plan: Plan, session: Session) -> None:
    """At most 50 distinct mentioned pubkeys (`p` values) per message."""
    if len(set(plan.stored.event.tag_values("p"))) > MAX_MENTIONS:
        raise Invalid(f"too many mentions (max {MAX_MENTIONS})")


async def _author_may_write(rules: KindRules, target: StoredEvent, actor: str, channel_id: str) -> bool:
    """`actor` is the target's effective author still allowed to write to the channel (§4.3 item 2)."""
    return actor == effective_author(target, rules.relay_pubkey) and await rules.access.writable(
        channel_id, actor
    )


async def _is_owner_of_author(rules: KindRules, target: StoredEvent, actor: str) -> bool:
    return await rules.registered_owner(effective_author(target, rules.relay_pubkey)) == actor


# -- 7 reaction -------------------------------------------------------------------------------------
def reaction_target(event: Event) -> str | None:
    """The last `e` value that is 64 hex (relay.md §4.2 item 1)."""
    return next((v for v in reversed(event.tag_values("e")) if is_hex(v, 64)), None)


async def reaction(rules: KindRules, plan: Plan, session: Session) -> None:
    """At most 64 code points; at most one active reaction per (author, target, content)."""
    event = plan.stored.event
    if len(event.content) > REACTION_MAX_CHARS:
        raise Invalid(f"reaction content too long (max {REACTION_MAX_CHARS})")
    target_id = reaction_target(event)
    assert target_id is not None  # channel derivation refused a reaction without target (§4.2)
    if await rules.store.has_reaction(event.pubkey, target_id, event.content):
        raise Duplicate("reaction already exists")
    plan.effects.append(PutReaction(event.id, event.pubkey, target_id, event.content))


# -- 40003 edit -------------------------------------------------------------------------------------
async def edit(rules: KindRules, plan: Plan, session: Session) -> None:
    """The `e` target is stored in the same channel; the actor is its effective author still
    allowed to write there, or that author's registered owner (relay.md §9 item 4)."""
    event, channel_id = plan.stored.event, plan.stored.channel_id
    target_id = event.first_tag("e")
    target = await rules.store.get(target_id) if target_id is not None and is_hex(target_id, 64) else None
    if target is None or channel_id is None or target.channel_id != channel_id:
        raise EDIT_REFUSED()
    actor = event.pubkey
    if not (
        await _author_may_write(rules, target, actor, channel_id)
        or await _is_owner_of_author(rules, target, actor)
    ):
        raise EDIT_REFUSED()
    await mentions(rules, plan, session)


# -- 9005 moderation deletion -----------------------------------------------------------------------
async def moderation_delete(rules: KindRules, plan: Plan, session: Session) -> None:
    """relay.md §10.2: one `e` target in the same channel, deleted by its author, an elevated
    member or the author's registered owner."""
    event, channel_id = plan.stored.event, plan.stored.channel_id
    e_tags, a_tags = event.tag_values("e"), event.tag_values("a")
    if len(e_tags) != 1 or a_tags:
        raise Invalid(
            "deletion events must reference exactly one target via e or a tag "
            f"(got e={len(e_tags)}, a={len(a_tags)})"
        )
    action_id = event.first_tag("action_id")
    if action_id is not None and not is_channel_id(action_id):
        raise Invalid("invalid action_id tag")
    target = await rules.store.get(e_tags[0]) if is_hex(e_tags[0], 64) else None
    if target is None:
        raise Invalid("target event not found")
    if target.channel_id is None:
        raise Invalid("target event has no channel")
    if target.channel_id != channel_id:
        raise Invalid("target event belongs to a different channel")
    actor = event.pubkey
    allowed = (
        await _author_may_write(rules, target, actor, channel_id)
        or is_elevated(await active_member(rules, channel_id, actor))
        or await _is_owner_of_author(rules, target, actor)
    )
    if not allowed:
        raise MODERATION_REFUSED()
    plan.effects.append(SoftDelete(target.event.id))
    workflows.deletion(rules, plan, (target,))  # a workflow's head: the workflow goes too (§6.6 item 3)


# -- 40099 from a client ----------------------------------------------------------------------------
def _control_outcome(content: str) -> bool:
    try:
        body = orjson.loads(content)
    except orjson.JSONDecodeError:
        return False
    return isinstance(body, dict) and body.get("type") in CONTROL_OUTCOMES


async def system_message(rules: KindRules, plan: Plan, session: Session) -> None:
    """relay.md §9 item 11: only an agent with a registered owner, as a control outcome."""
    event = plan.stored.event
    if not _control_outcome(event.content) or await rules.registered_owner(event.pubkey) is None:
        raise SYSTEM_REFUSED()


VALIDATORS: dict[int, Validator] = {
    **dict.fromkeys(MENTION_KINDS, mentions),
    7: reaction,
    40003: edit,
    9005: moderation_delete,
    40099: system_message,
}
