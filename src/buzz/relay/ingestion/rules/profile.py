"""Kind 0 profile (relay.md §9 item 2), with the name caps of core.limits.TEXT_CAPS."""

from __future__ import annotations

import orjson

from buzz.core.errors import Invalid
from buzz.core.limits import text_too_long
from buzz.relay.auth.session import Session
from buzz.relay.ingestion.rules.base import KindRules, Plan, Validator

CAPPED_FIELDS = ("name", "display_name")  # each capped by TEXT_CAPS["profile <field>"]


async def profile(rules: KindRules, plan: Plan, session: Session) -> None:
    try:
        body = orjson.loads(plan.stored.event.content)
    except orjson.JSONDecodeError:
        body = None
    if not isinstance(body, dict):
        raise Invalid("profile content must be a JSON object")
    for key in CAPPED_FIELDS:
        value = body.get(key)
        if isinstance(value, str) and (reason := text_too_long(f"profile {key}", value)) is not None:
            raise Invalid(reason)


VALIDATORS: dict[int, Validator] = {0: profile}
