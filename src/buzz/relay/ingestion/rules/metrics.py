"""Kind 44200 agent turn metrics at ingest (relay.md §9 item 8, agents.md §5.1 items 5–6).

In order, the first failure wins:

1. no `h` tag: `invalid: agent-turn-metric must not carry an h tag`;
2. exactly one `p` and one `agent` tag (counting tags with ≥ 2 elements), each 64 lowercase
   hex: `invalid: agent-turn-metric requires exactly one <name> tag (got <n>)` /
   `invalid: agent-turn-metric <name> tag must be 64 lowercase hex characters`;
3. `agent == pubkey`: `invalid: agent-turn-metric agent tag must equal the event pubkey`;
4. content a plausible NIP-44 v2 payload (item 5 of §9):
   `invalid: agent-turn-metric content is not a NIP-44 v2 payload: <reason>`;
5. `p` is the registered owner of `pubkey` (recorded at AUTH, §7.3 item 4), else
   `restricted: agent-turn-metric p tag must be the registered owner of this agent`;
6. at most 60 accepted metrics per 60 s per agent (sliding window, in memory, per relay):
   `rate-limited: agent-turn-metric rate exceeded (60/min per agent)`.

The kind is global (Place G), so the event is stored with channel NULL; reads are p-gated and
result-gated by `buzz.core.visibility`, and search never indexes it (§11).
"""

from __future__ import annotations

import weakref

from buzz.core.errors import Invalid, RateLimited, Refusal, Restricted
from buzz.core.event import Event
from buzz.core.nip44 import is_plausible_nip44_payload
from buzz.relay.auth.session import Session
from buzz.relay.ingestion.ratelimit import SlidingWindow
from buzz.relay.ingestion.rules.base import KindRules, Plan, Validator

TURN_METRIC_KIND = 44200
TURN_METRIC_RATE = 60  # relay.md §17 TURN_METRIC_RATE: per agent per window
TURN_METRIC_WINDOW_S = 60.0
NOT_OWNER = Refusal(Restricted, "agent-turn-metric p tag must be the registered owner of this agent")
RATE_EXCEEDED = Refusal(RateLimited, f"agent-turn-metric rate exceeded ({TURN_METRIC_RATE}/min per agent)")

_HEX = frozenset("0123456789abcdef")


def _is_lower_hex64(value: str) -> bool:
    return len(value) == 64 and set(value) <= _HEX


def envelope_problem(event: Event) -> str | None:
    """The reason `event` fails the 44200 envelope (steps 1–4 above), or None. Pure.

    The reason is the text after `invalid: agent-turn-metric `.
    """
    if any(t[0] == "h" for t in event.tags):
        return "must not carry an h tag"
    for name in ("p", "agent"):
        values = [t[1] for t in event.tags if len(t) >= 2 and t[0] == name]
        if len(values) != 1:
            return f"requires exactly one {name} tag (got {len(values)})"
        if not _is_lower_hex64(values[0]):
            return f"{name} tag must be 64 lowercase hex characters"
    if event.first_tag("agent") != event.pubkey:
        return "agent tag must equal the event pubkey"
    problem = is_plausible_nip44_payload(event.content)
    if problem is not None:
        return f"content is not a NIP-44 v2 payload: {problem}"
    return None


# One window per relay (KindRules instance), dropped with it.
_WINDOWS: weakref.WeakKeyDictionary[KindRules, SlidingWindow] = weakref.WeakKeyDictionary()


def window_for(rules: KindRules) -> SlidingWindow:
    """The 44200 rate window of the relay that owns `rules`."""
    window = _WINDOWS.get(rules)
    if window is None:
        window = _WINDOWS[rules] = SlidingWindow(TURN_METRIC_RATE, TURN_METRIC_WINDOW_S)
    return window


async def turn_metric(rules: KindRules, plan: Plan, session: Session) -> None:
    """Raises Invalid / Restricted / RateLimited per the module docstring; a store failure
    while looking up the owner propagates (fail closed)."""
    event = plan.stored.event
    problem = envelope_problem(event)
    if problem is not None:
        raise Invalid(f"agent-turn-metric {problem}")
    owner = await rules.registered_owner(event.pubkey)
    if owner is None or owner != event.first_tag("p"):
        raise NOT_OWNER()
    if not window_for(rules).allow(event.pubkey):
        raise RATE_EXCEEDED()


VALIDATORS: dict[int, Validator] = {TURN_METRIC_KIND: turn_metric}
