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


Gate = Callable[[Session, Event, PrecheckContext], None]

NOT_AUTHENTICATED = Refusal(AuthRequired, "not authenticated")


def _session(session: Session, event: Event, ctx: PrecheckContext) -> None:
    if session.pubkey is None:
        raise NOT_AUTHENTICATED()


def _not_auth_kind(session: Session, event: Event, ctx: PrecheckContext) -> None:
    if event.kind == kinds.AUTH_KIND:
        raise Invalid("AUTH events cannot be submitted via EVENT")


def _pubkey_matches(session: Session, event: Event, ctx: PrecheckContext) -> None:
    if event.kind != 1059 and event.pubkey != session.pubkey:  # gift wraps carry a throwaway key
        raise Invalid("event pubkey does not match authenticated identity")


def _transport(session: Session, event: Event, ctx: PrecheckContext) -> None:
    if session.transport == "http" and (event.kind == 1059 or kinds.is_ephemeral(event.kind)):
        raise Invalid(f"kind {event.kind} is only accepted via WebSocket")


def _kind_class(session: Session, event: Event, ctx: PrecheckContext) -> None:
    if event.kind in kinds.MEMBERSHIP_NOTICE_KINDS:
        raise Invalid("membership notifications are relay-signed only")
    if event.kind in kinds.RELAY_ONLY_KINDS:
        raise Restricted("relay-only kind")
    if not kinds.is_known(event.kind):
        raise Restricted("unknown event kind")


# Kinds with their own fixed clock window, both sides, in seconds (relay.md §8 item 7).
FIXED_CLOCK_WINDOWS: dict[int, int] = {24200: limits.OBSERVER_CLOCK_DRIFT_S}


def _clock(session: Session, event: Event, ctx: PrecheckContext) -> None:
    fixed = FIXED_CLOCK_WINDOWS.get(event.kind)
    future = limits.MAX_CLOCK_DRIFT_S if fixed is None else fixed
    past = ctx.max_past_drift_s if fixed is None else fixed
    delta = event.created_at - ctx.now
    if delta > future or (past and -delta > past):
        raise Invalid("event timestamp too far from server time")


def _size(session: Session, event: Event, ctx: PrecheckContext) -> None:
    n = len(event.content.encode("utf-8"))
    if n > limits.MAX_CONTENT_BYTES:
        raise Invalid(f"content exceeds maximum size of {limits.MAX_CONTENT_BYTES} bytes (got {n})")


PRECHECKS: tuple[Gate, ...] = (
    _session,
    _not_auth_kind,
    _pubkey_matches,
    _transport,
    _kind_class,
    _clock,
    _size,
)


def run_prechecks(session: Session, event: Event, ctx: PrecheckContext) -> None:
    """Raise the first BuzzError of relay.md §8 items 2–8, in order."""
    for gate in PRECHECKS:
        gate(session, event, ctx)


__all__ = ["NOT_AUTHENTICATED", "PRECHECKS", "BuzzError", "PrecheckContext", "run_prechecks"]
