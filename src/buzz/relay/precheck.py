"""Ingest steps 2–8 of relay.md §8: cheap checks that run before signature verification.

An ordered table of gate functions `(session, event, ctx) -> None` that raise a BuzzError;
the first failure wins. Adding a rule means adding a row here, not a branch in a handler.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from buzz.core import kinds, limits
from buzz.core.errors import AuthRequired, BuzzError, Invalid, Refusal, Restricted
from buzz.core.event import Event
from buzz.relay.session import Session


@dataclass(frozen=True, slots=True)
class PrecheckContext:
    now: int
    max_past_drift_s: int  # 0 disables the past side (relay.md §8 item 7)
    table: kinds.KindTable = kinds.BUILTIN  # the relay's kinds, with the operator's opened ones


Gate = Callable[[Session, Event, PrecheckContext], None]

NOT_AUTHENTICATED = Refusal(AuthRequired, "not authenticated")


def _session(session: Session, event: Event, ctx: PrecheckContext) -> None:
    if session.pubkey is None:
        raise NOT_AUTHENTICATED()


# Authorization tokens are answered to the relay or an HTTP server, never published: a token
# relayed to subscribers could be replayed by any of them (issue 25, docs/decisions.md 170).
TOKEN_REFUSALS: dict[int, str] = {
    kinds.AUTH_KIND: "AUTH events cannot be submitted via EVENT",
    kinds.HTTP_AUTH_KIND: "NIP-98 HTTP auth events are sent in an Authorization header, never published",
    24242: "Blossom auth events are sent in an Authorization header, never published",
}


def _not_auth_kind(session: Session, event: Event, ctx: PrecheckContext) -> None:
    refusal = TOKEN_REFUSALS.get(event.kind)
    if refusal is not None:
        raise Invalid(refusal)


def _pubkey_matches(session: Session, event: Event, ctx: PrecheckContext) -> None:
    # Gift wraps carry a throwaway key; any key the connection authenticated may sign (NIP-42).
    if event.kind != kinds.GIFT_WRAP_KIND and not session.signs_as(event.pubkey):
        raise Invalid("event pubkey does not match authenticated identity")


def _transport(session: Session, event: Event, ctx: PrecheckContext) -> None:
    if session.transport == "http" and (event.kind == 1059 or kinds.is_ephemeral(event.kind)):
        raise Invalid(f"kind {event.kind} is only accepted via WebSocket")


def _kind_class(session: Session, event: Event, ctx: PrecheckContext) -> None:
    if event.kind in kinds.MEMBERSHIP_NOTICE_KINDS:
        raise Invalid("membership notifications are relay-signed only")
    if event.kind in kinds.RELAY_ONLY_KINDS:
        raise Restricted("relay-only kind")
    if not ctx.table.is_known(event.kind):
        raise Restricted("unknown event kind")


# Kinds with a fixed clock window of their own, (future, past) in seconds (relay.md §8 item 7).
FIXED_CLOCK_WINDOWS: dict[int, tuple[int, int]] = {
    24200: (limits.OBSERVER_CLOCK_DRIFT_S, limits.OBSERVER_CLOCK_DRIFT_S),
}
# Kinds whose past side is at least this wide, whatever BUZZ_MAX_PAST_DRIFT_S says (0 still
# disables it): NIP-59 dates gift wraps up to two days back so that their time says nothing.
WIDER_PAST_WINDOWS: dict[int, int] = {kinds.GIFT_WRAP_KIND: limits.GIFT_WRAP_PAST_DRIFT_S}


def _clock(session: Session, event: Event, ctx: PrecheckContext) -> None:
    fixed = FIXED_CLOCK_WINDOWS.get(event.kind)
    if fixed is not None:
        future, past = fixed
    else:
        future, past = limits.MAX_CLOCK_DRIFT_S, ctx.max_past_drift_s
        if past:
            past = max(past, WIDER_PAST_WINDOWS.get(event.kind, 0))
    delta = event.created_at - ctx.now
    if delta > future or (past and -delta > past):
        raise Invalid("event timestamp too far from server time")


def _size(session: Session, event: Event, ctx: PrecheckContext) -> None:
    content = event.content
    if len(content) <= limits.MAX_CONTENT_BYTES // 4:  # ≤ 4 UTF-8 bytes a character (decision 358)
        return
    n = len(content.encode("utf-8"))
    if n > limits.MAX_CONTENT_BYTES:
        raise Invalid(f"content exceeds maximum size of {limits.MAX_CONTENT_BYTES} bytes (got {n})")


def _tag_count(session: Session, event: Event, ctx: PrecheckContext) -> None:
    cap = ctx.table.max_tags(event.kind)
    if len(event.tags) > cap:
        raise Invalid(f"too many tags ({len(event.tags)}, max {cap} for kind {event.kind})")


PRECHECKS: tuple[Gate, ...] = (
    _session,
    _not_auth_kind,
    _pubkey_matches,
    _transport,
    _kind_class,
    _clock,
    _size,
    _tag_count,
)


def run_prechecks(session: Session, event: Event, ctx: PrecheckContext) -> None:
    """Raise the first BuzzError of relay.md §8 items 2–8, in order."""
    for gate in PRECHECKS:
        gate(session, event, ctx)


__all__ = ["NOT_AUTHENTICATED", "PRECHECKS", "BuzzError", "PrecheckContext", "run_prechecks"]
