"""Kind 30174 agent engram envelope (relay.md §9 item 5, engram.md §11.1).

Counting only tags with at least 2 elements: exactly one `d` and one `p`, each 64 lowercase
hex; the content a plausible NIP-44 v2 payload. Failures are `invalid: agent-engram <reason>`.
The author equals the authenticated pubkey by the general precheck (relay.md §8), with no
exception for 30174. The relay never decrypts, never checks the slug, never requires
`p ≠ author`, and stores other tags without meaning: 30174 is global-only (`h` ignored).
"""

from __future__ import annotations

from buzz.core.errors import Invalid
from buzz.core.event import Event
from buzz.core.kinds import ENGRAM_KIND
from buzz.core.nip44 import is_plausible_nip44_payload
from buzz.relay.auth.session import Session
from buzz.relay.ingestion.rules.base import KindRules, Plan, Validator

_HEX = frozenset("0123456789abcdef")


def _is_lower_hex64(value: str) -> bool:
    return len(value) == 64 and set(value) <= _HEX


def envelope_problem(event: Event) -> str | None:
    """The reason `event` fails the 30174 envelope check, or None when it passes.

    Pure; the reason is the text after `invalid: agent-engram `.
    """
    for name in ("d", "p"):
        values = [t[1] for t in event.tags if len(t) >= 2 and t[0] == name]
        if len(values) != 1:
            return f"requires exactly one {name} tag (got {len(values)})"
        if not _is_lower_hex64(values[0]):
            return f"{name} tag must be 64 lowercase hex characters"
    problem = is_plausible_nip44_payload(event.content)
    if problem is not None:
        return f"content is not a NIP-44 v2 payload: {problem}"
    return None


async def engram(rules: KindRules, plan: Plan, session: Session) -> None:
    """Raises Invalid("agent-engram <reason>") for an envelope that fails `envelope_problem`."""
    problem = envelope_problem(plan.stored.event)
    if problem is not None:
        raise Invalid(f"agent-engram {problem}")


VALIDATORS: dict[int, Validator] = {ENGRAM_KIND: engram}
