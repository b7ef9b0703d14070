"""Kinds whose workspace rules have not landed yet: refused rather than stored without effects."""

from __future__ import annotations

from buzz.core.errors import Restricted
from buzz.relay.rules.base import KindRules, Plan, Validator
from buzz.relay.session import Session


async def not_yet(rules: KindRules, plan: Plan, session: Session) -> None:
    raise Restricted(f"kind {plan.stored.event.kind} is not supported by this relay yet")


PENDING_KINDS = (9000, 9001, 9002, 9005, 9007, 9008, 9021, 9022, 40003, 41010, 41011, 41012)
VALIDATORS: dict[int, Validator] = dict.fromkeys(PENDING_KINDS, not_yet)
