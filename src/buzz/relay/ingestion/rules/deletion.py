"""Kind 5 deletion (relay.md §10.1; NIP-09 lists of targets, issue 25 item 6)."""

from __future__ import annotations

from buzz.core import kinds
from buzz.core.errors import Invalid
from buzz.relay.auth.session import Session
from buzz.relay.ingestion.rules import workflows
from buzz.relay.ingestion.rules.base import KindRules, Plan, Validator
from buzz.store.base import DeleteAddress, Effect, SoftDelete

WORKFLOW_KIND = 30620


async def deletion(rules: KindRules, plan: Plan, session: Session) -> None:
    """Every target (read while the channel was derived: `KindRules.deletion_targets`) is the
    actor's: its effective author, or that author's registered owner. All or nothing: one
    target that is not refuses the deletion, naming it when there are several."""
    event = plan.stored.event
    several = len(plan.targets) + len(plan.addresses) > 1
    effects: list[Effect] = []
    for target in plan.targets:
        if not await rules.effective_author_or_owner(target, event.pubkey):
            raise Invalid("must be event author" + (f" of {target.event.id}" if several else ""))
        effects.append(SoftDelete(target.event.id))
    for kind, pubkey, d in plan.addresses:
        if pubkey != event.pubkey and (await rules.registered_owner(pubkey)) != event.pubkey:
            if kind != WORKFLOW_KIND:
                raise Invalid("must be event author" + (f" of {kind}:{pubkey}:{d}" if several else ""))
            await workflows.check_moderator(rules, plan.stored.channel_id, event.pubkey)
        effects.append(DeleteAddress(kind, pubkey, d, event.created_at))
    plan.effects += effects
    workflows.deletion(rules, plan)


VALIDATORS: dict[int, Validator] = {kinds.DELETION_KIND: deletion}
