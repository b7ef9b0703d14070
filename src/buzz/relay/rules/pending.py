"""Kinds whose workspace rules have not landed yet: refused rather than stored without effects."""

from __future__ import annotations

from buzz.core.errors import Restricted
from buzz.relay.rules.base import KindRules, Plan, Validator
from buzz.relay.session import Session


async def not_yet(rules: KindRules, plan: Plan, session: Session) -> None:
    raise Restricted(f"kind {plan.stored.event.kind} is not supported by this relay yet")


# Every kind of the first-release registry now has its rules; a future kind whose effects are
# not implemented yet is listed here so it is refused instead of stored without them.
PENDING_KINDS: tuple[int, ...] = ()
VALIDATORS: dict[int, Validator] = dict.fromkeys(PENDING_KINDS, not_yet)
