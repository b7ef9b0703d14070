"""Kind 0 profile (relay.md §9 item 2)."""

from __future__ import annotations

import orjson

from buzz.core.errors import Invalid
from buzz.relay.rules.base import KindRules, Plan, Validator
from buzz.relay.session import Session


async def profile(rules: KindRules, plan: Plan, session: Session) -> None:
    try:
        body = orjson.loads(plan.stored.event.content)
    except orjson.JSONDecodeError:
        body = None
    if not isinstance(body, dict):
        raise Invalid("profile content must be a JSON object")


VALIDATORS: dict[int, Validator] = {0: profile}
