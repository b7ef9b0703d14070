"""What the relay tells its operator: log lines (`buzz.relay.operator.oplog`) and Prometheus metrics
(`buzz.relay.operator.metrics_prom`), behind one object the handlers call (`relay.telemetry`).

The hooks are called where an answer is decided (an OK, a CLOSED, an AUTH verdict, a closed
socket), each once per answer: metrics always count (cheap), INFO lines are written for what an
operator asks about (connections, refusals, admin actions), WARNING for slow consumers.
"""

from __future__ import annotations

import ipaddress
import itertools
import logging
from collections.abc import Callable

from buzz.core import kinds
from buzz.relay.operator import oplog
from buzz.relay.operator.metrics_prom import RelayMetrics, Snapshot
from buzz.relay.operator.ratelog import RepeatLog

log = logging.getLogger("buzz.relay.ops")

# relay.md §4.5: channel administration kinds; an accepted one is an admin action.
ADMIN_KINDS = frozenset(k for k in range(9000, 9010) if kinds.is_known(k))
WARN_CLOSE_REASONS = frozenset({"slow consumer", "ping timeout"})


def _hex64_or_none(value: object) -> str | None:
    return (
        value if isinstance(value, str) and len(value) == 64 and value.isascii() and value.isalnum() else None
    )


def forwarded_for(header: str | None) -> str | None:
    """The first address of an `X-Forwarded-For` header when it parses as an IP, else None
    (the header is client-controlled unless a proxy sets it: logged, never trusted)."""
    if not header:
        return None
    first = header.split(",", 1)[0].strip()
    try:
        return str(ipaddress.ip_address(first))
    except ValueError:
        return None


class Telemetry:
    """Log lines and metrics of one relay. `snapshot` reads the relay's gauges at each scrape
    (the composition root's `Relay.snapshot`): telemetry sees numbers, not the relay."""

    def __init__(self, snapshot: Callable[[], Snapshot]) -> None:
        self.metrics = RelayMetrics(snapshot)
        self.repeats = RepeatLog(log)
        self._ids = itertools.count(1)

    # -- connections ---------------------------------------------------------------------------
    def connection_label(self) -> str:
        return f"c{next(self._ids)}"

    def connection_opened(self, label: str, remote: str | None, via: str | None) -> None:
        oplog.line(log, logging.INFO, "connection opened", conn=label, remote=remote, forwarded_for=via)

    def connection_closed(
        self, label: str, remote: str | None, pubkey: str | None, duration_s: float, reason: str
    ) -> None:
        level = logging.WARNING if reason in WARN_CLOSE_REASONS else logging.INFO
        oplog.line(
            log,
            level,
            "connection closed",
            conn=label,
            remote=remote,
            pubkey=pubkey or "-",
            duration_s=duration_s,
            reason=oplog.reason_text(reason),
        )

    def dropped_message(self, pubkey: str | None) -> None:
        """A live message dropped on a full send queue (relay.md §7.9)."""
        self.repeats.warning(
            "slow-consumer-drop", "dropping live messages for slow consumer pubkey=%s", pubkey
        )

    # -- answers -------------------------------------------------------------------------------
    def event_answered(
        self, event_id: object, kind: object, author: object, accepted: bool, message: str, via: str = "ws"
    ) -> None:
        """One OK (WebSocket) or `POST /events` answer. Logs refusals and accepted admin kinds
        with id, kind and author only."""
        k = kind if isinstance(kind, int) and not isinstance(kind, bool) else -1
        self.metrics.event_answered(k, accepted, message)
        if not accepted:
            oplog.line(
                log,
                logging.INFO,
                "event refused",
                via=via,
                id=_hex64_or_none(event_id) or "?",
                kind=k,
                author=_hex64_or_none(author) or "?",
                reason=oplog.reason_text(message),
            )
        elif k in ADMIN_KINDS and message != "duplicate:":
            info = kinds.lookup(k)
            oplog.line(
                log,
                logging.INFO,
                "admin action",
                via=via,
                id=event_id,
                kind=k,
                action=info.name if info else None,
                by=author,
            )

    def req_answered(self, verb: str, sub_id: object, refusal: str | None) -> None:
        """One REQ / COUNT / bridge query: counted; a refusal is logged with its reason."""
        self.metrics.req_answered(verb, refusal)
        if refusal is not None:
            oplog.line(
                log,
                logging.INFO,
                "request refused",
                verb=verb,
                sub=oplog.client_text(sub_id) if sub_id is not None else None,
                reason=oplog.reason_text(refusal),
            )

    def auth_answered(self, pubkey: object, refusal: str | None) -> None:
        """One AUTH / NIP-98 verdict (relay.md §7.3, §15 item 1): admission after a verified
        event, or the event's own failure (then `pubkey` is only what it claims, or None)."""
        self.metrics.auth_answered(refusal)
        if refusal is not None:
            who = _hex64_or_none(pubkey) or "?"
            oplog.line(log, logging.INFO, "auth refused", pubkey=who, reason=oplog.reason_text(refusal))

    # -- shutdown ------------------------------------------------------------------------------
    def relay_stopping(self, signal_name: str, connections: int, huddle_sockets: int, drain: bool) -> None:
        """SIGINT/SIGTERM arrived: what is still open (Nostr connections, audio sockets), and
        whether huddles drain (BUZZ_MESH on, huddle.md §9.5) or are closed 1001 with the rest."""
        oplog.line(
            log,
            logging.INFO,
            "relay stopping",
            signal=signal_name,
            connections=connections,
            huddle_sockets=huddle_sockets,
            huddles="drain" if drain else "close",
        )

    def relay_stopped(self, duration_s: float) -> None:
        """Every socket closed, the store and the data-dir lock released: the process exits."""
        oplog.line(log, logging.INFO, "relay stopped", duration_s=duration_s)

    def huddle_drain_started(self, owned_rooms: int, remote_peers: int, sockets: int) -> None:
        """§9.5 drain begins: leases to release, other replicas' peers to send away, own sockets
        to close with 1012."""
        oplog.line(
            log,
            logging.INFO,
            "huddle drain started",
            owned_rooms=owned_rooms,
            remote_peers=remote_peers,
            sockets=sockets,
        )

    def huddle_drain_done(self, duration_s: float, sockets_left: int) -> None:
        """The drain's end; a WARNING when sockets were still open after the cleanup wait (their
        48102 or unregistration may be missing)."""
        level = logging.WARNING if sockets_left else logging.INFO
        oplog.line(log, level, "huddle drain done", duration_s=duration_s, sockets_left=sockets_left)
