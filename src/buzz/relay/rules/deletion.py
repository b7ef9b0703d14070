"""Kind 5 deletion (relay.md §10.1)."""

from __future__ import annotations

from buzz.core import kinds
from buzz.core.errors import Invalid
from buzz.relay.rules.base import KindRules, Plan, Validator, parse_address
from buzz.relay.session import Session
from buzz.store.base import DeleteAddress, SoftDelete


async def deletion(rules: KindRules, plan: Plan, session: Session) -> None:
    """Exactly one target; the actor is its effective author or that author's registered owner."""
    event = plan.stored.event
    e_tags, a_tags = event.tag_values("e"), event.tag_values("a")
    if len(e_tags) + len(a_tags) != 1:
        raise Invalid(
            "deletion events must reference exactly one target via e or a tag "
            f"(got e={len(e_tags)}, a={len(a_tags)})"
        )
    if e_tags:
        target = await rules.store.get(e_tags[0], include_deleted=True)
        if target is None:
            raise Invalid("target event not found")
        if not await rules.effective_author_or_owner(target, event.pubkey):
            raise Invalid("must be event author")
        plan.effects.append(SoftDelete(target.event.id))
        return
    address = parse_address(a_tags[0])
    if address is None:
        raise Invalid("malformed a tag (expected <kind>:<pubkey>:<d>)")
    kind, pubkey, d = address
    if pubkey != event.pubkey and (await rules.registered_owner(pubkey)) != event.pubkey:
        raise Invalid("must be event author")
    plan.effects.append(DeleteAddress(kind, pubkey, d, event.created_at))


VALIDATORS: dict[int, Validator] = {kinds.DELETION_KIND: deletion}
