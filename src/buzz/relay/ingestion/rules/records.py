"""Addressable records with ingest rules (relay.md §9 items 6, 7, 12; jobs spec §11): personas
30175 and team catalogs 30178 (the `shared` tag and their `d`), teams 30176 and managed agents
30177 (their `d`), the contents of all four (`buzz.jobs.records`: shapes, and no secrets),
event reminders 30300 (`d`, `not_before`, `expiration`) and workflow definitions 30620 (`d` a
UUID). Failures are `invalid: <reason>`.
"""

from __future__ import annotations

import re
import time
import unicodedata

from buzz.core.channel_id import is_channel_id
from buzz.core.errors import Invalid
from buzz.core.event import Event
from buzz.core.limits import MAX_NOT_BEFORE_DELTA_S
from buzz.jobs.records import check_record, record_id_problem
from buzz.jobs.text import is_hex64
from buzz.relay.auth.session import Session
from buzz.relay.ingestion.rules.base import KindRules, Plan, Validator

NOT_BEFORE_MAX = 2**53 - 1  # relay.md §17
PERSONA_D_MAX = 64
PERSONA_D = re.compile(r"[a-z0-9][a-z0-9_-]{0,63}")
_DECIMAL = re.compile(r"0|[1-9][0-9]*")


def _named(event: Event, name: str) -> list[tuple[str, ...]]:
    return [t for t in event.tags if t[0] == name]


def one_d(event: Event) -> str:
    """The value of the one non-empty `d` tag (relay.md §9 item 7 messages)."""
    tags = _named(event, "d")
    if not tags:
        raise Invalid("missing d tag")
    if len(tags) > 1:
        raise Invalid("duplicate d tag")
    if len(tags[0]) < 2 or not tags[0][1]:
        raise Invalid("empty d tag")
    return tags[0][1]


def check_shared(event: Event) -> None:
    """At most one `shared` tag, and it is exactly `["shared","true"]` (relay.md §9 item 6)."""
    tags = _named(event, "shared")
    if len(tags) > 1:
        raise Invalid("at most one shared tag is allowed")
    if tags and tags[0] != ("shared", "true"):
        raise Invalid('shared tag must be exactly ["shared","true"]')


async def persona(rules: KindRules, plan: Plan, session: Session) -> None:
    """30175: the shared rule; exactly one `d` matching `^[a-z0-9][a-z0-9_-]{0,63}$`."""
    event = plan.stored.event
    check_shared(event)
    if not PERSONA_D.fullmatch(one_d(event)):
        raise Invalid("persona d tag must match ^[a-z0-9][a-z0-9_-]{0,63}$")
    check_record(event.kind, event.content)


async def team(rules: KindRules, plan: Plan, session: Session) -> None:
    """30176: a stable id as `d` (as a catalog's), the team content."""
    event = plan.stored.event
    problem = record_id_problem(one_d(event))
    if problem is not None:
        raise Invalid(f"team {problem}")
    check_record(event.kind, event.content)


async def managed_agent(rules: KindRules, plan: Plan, session: Session) -> None:
    """30177: `d` is the agent's pubkey; the managed-agent content (policy fields)."""
    event = plan.stored.event
    if not is_hex64(one_d(event)):
        raise Invalid("managed agent d tag must be the agent's pubkey (64 lowercase hex)")
    check_record(event.kind, event.content)


def _plain(ch: str) -> bool:
    return not ch.isspace() and unicodedata.category(ch) != "Cc"


async def team_catalog(rules: KindRules, plan: Plan, session: Session) -> None:
    """30178: the shared rule; exactly one non-empty `d` of ≤ 64 characters without
    whitespace or control characters."""
    event = plan.stored.event
    check_shared(event)
    d = one_d(event)
    if len(d) > PERSONA_D_MAX or not all(_plain(ch) for ch in d):
        raise Invalid(
            "team catalog d tag must be at most 64 characters without whitespace or control characters"
        )
    check_record(event.kind, event.content)


def _decimal(value: str) -> int | None:
    return int(value) if _DECIMAL.fullmatch(value) else None


async def event_reminder(rules: KindRules, plan: Plan, session: Session) -> None:
    """30300: one non-empty `d`; one canonical `not_before` ≤ 2^53−1 and ≤ now + 1 year; every
    `expiration` greater than `not_before` (relay.md §9 item 7)."""
    event = plan.stored.event
    one_d(event)
    tags = _named(event, "not_before")
    not_before = _decimal(tags[0][1]) if len(tags) == 1 and len(tags[0]) >= 2 else None
    if not_before is None or not_before > NOT_BEFORE_MAX:
        raise Invalid("malformed not_before")
    if not_before > int(time.time()) + MAX_NOT_BEFORE_DELTA_S:
        raise Invalid("not_before too far in future")
    for tag in _named(event, "expiration"):
        expiration = _decimal(tag[1]) if len(tag) >= 2 else None
        if expiration is None or expiration <= not_before:
            raise Invalid("expiration before not_before")


async def workflow_definition(rules: KindRules, plan: Plan, session: Session) -> None:
    """30620: exactly one `d`, a canonical UUID (relay.md §9 item 12)."""
    tags = _named(plan.stored.event, "d")
    if len(tags) != 1 or len(tags[0]) < 2 or not is_channel_id(tags[0][1]):
        raise Invalid("workflow d tag must be a UUID")


VALIDATORS: dict[int, Validator] = {
    30175: persona,
    30176: team,
    30177: managed_agent,
    30178: team_catalog,
    30300: event_reminder,
}
