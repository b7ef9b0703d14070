"""Turn metrics, kind 44200 (NIP-AM; agents.md §5.1), built on the harness side.

One regular event per completed turn (cancelled and failed turns included) when an owner is
known and the agent reported usage:

    {"kind": 44200, "pubkey": A, "tags": [["p", O], ["agent", A]], "content": NIP-44(payload)}

Exactly one `p` (the owner) and one `agent` tag, no `h`. The payload carries no conversation
content, tool calls or protocol frames. Usage sources (ACP):

- the `session/prompt` result's `usage` (this turn's `inputTokens`, `outputTokens`,
  `totalTokens`, `cachedReadTokens`, `cachedWriteTokens`) → `turn`;
- `usage_update` notifications' cumulative session `cost` (USD only) → `cumulative.costUsd`, and
  `turn.costUsd` as the delta from the previous turn's cumulative value (a new session starts at
  0). Unknown stays null, is never summed as zero, and `totalTokens` is never computed; a
  negative delta becomes null with `deltaReliable: false`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import orjson

from buzz.core import nip44
from buzz.core.event import Event
from buzz.core.keys import public_key

KIND_TURN_METRIC = 44200
HARNESS_NAME = "buzz-agent-harness"
MAX_PLAINTEXT = 65_535

# ACP stop reason → metric stopReason (§5.1 item 4); anything else is "unknown".
STOP_REASON_MAP: dict[str, str] = {
    "end_turn": "end_turn",
    "max_tokens": "max_tokens",
    "cancelled": "cancelled",
}
STOP_ERROR = "error"  # timeouts, crashes and errors

# ACP `Usage` field → metric field.
_TOKEN_FIELDS: tuple[tuple[str, str], ...] = (
    ("inputTokens", "inputTokens"),
    ("outputTokens", "outputTokens"),
    ("totalTokens", "totalTokens"),
    ("cachedReadTokens", "cacheReadTokens"),
    ("cachedWriteTokens", "cacheWriteTokens"),
)
_NUMERIC = ("inputTokens", "outputTokens", "totalTokens", "costUsd", "cacheReadTokens", "cacheWriteTokens")


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def _cost(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) and value >= 0 else None


@dataclass
class TurnUsage:
    """Usage reported during one turn. `reported` is True once any usage arrived."""

    tokens: dict[str, int | None] = field(default_factory=dict)
    cumulative_cost_usd: float | None = None
    reported: bool = False

    def add_prompt_usage(self, usage: Mapping[str, Any] | None) -> None:
        """The `usage` object of a `session/prompt` result (camelCase keys)."""
        if not isinstance(usage, Mapping):
            return
        self.reported = True
        for acp_name, name in _TOKEN_FIELDS:
            if acp_name in usage:
                self.tokens[name] = _count(usage[acp_name])

    def add_usage_update(self, update: Mapping[str, Any]) -> None:
        """A `usage_update` session update: `{used, size, cost?: {amount, currency}}`."""
        self.reported = True
        cost = update.get("cost")
        if isinstance(cost, Mapping) and str(cost.get("currency", "")).upper() == "USD":
            amount = _cost(cost.get("amount"))
            if amount is not None:
                self.cumulative_cost_usd = amount


def map_stop_reason(stop_reason: str | None, failed: bool = False) -> str:
    """§5.1 item 4: end_turn, max_tokens and cancelled map to themselves; errors and timeouts
    to `error`; anything else to `unknown`."""
    if failed:
        return STOP_ERROR
    return STOP_REASON_MAP.get(stop_reason or "", "unknown")


def rfc3339_ms(ts: float) -> str:
    """Unix seconds → RFC 3339 UTC with milliseconds, e.g. `2025-01-01T00:00:00.123Z`."""
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def build_payload(
    usage: TurnUsage,
    baseline: dict[str, Any],
    *,
    timestamp: float,
    model: str | None,
    channel_id: str | None,
    session_id: str | None,
    turn_id: str | None,
    stop_reason: str,
) -> dict[str, Any]:
    """The decrypted §5.1 payload for one turn. `baseline` is the session's metric state
    (`{"turnSeq": int, "costUsd": float | None, "known": bool}`), updated in place: a fresh
    session starts with cost 0 known."""
    seq = int(baseline.get("turnSeq", 0)) + 1
    baseline["turnSeq"] = seq
    previous = baseline.get("costUsd", 0.0)
    previous_known = baseline.get("known", True)
    reliable = True
    turn_cost: float | None = None
    current = usage.cumulative_cost_usd
    if current is not None:
        if previous_known and previous is not None:
            delta = current - previous
            if delta >= 0:
                turn_cost = delta
            else:
                reliable = False
        else:
            reliable = False
        baseline["costUsd"], baseline["known"] = current, True
    elif usage.reported:
        baseline["known"] = False  # a turn without a cost report breaks the chain
    turn: dict[str, Any] = {
        "inputTokens": usage.tokens.get("inputTokens"),
        "outputTokens": usage.tokens.get("outputTokens"),
        "totalTokens": usage.tokens.get("totalTokens"),
        "costUsd": turn_cost,
    }
    for optional in ("cacheReadTokens", "cacheWriteTokens"):
        if usage.tokens.get(optional) is not None:
            turn[optional] = usage.tokens[optional]
    cumulative = {"inputTokens": None, "outputTokens": None, "totalTokens": None, "costUsd": current}
    return {
        "harness": HARNESS_NAME,
        "model": model,
        "channelId": channel_id,
        "sessionId": session_id,
        "turnId": turn_id,
        "turnSeq": seq,
        "timestamp": rfc3339_ms(timestamp),
        "turn": turn,
        "cumulative": cumulative,
        "deltaReliable": reliable,
        "stopReason": stop_reason,
    }


def is_all_null(payload: Mapping[str, Any]) -> bool:
    """True when no usage number is known in `turn` or `cumulative` (never published, §5.1)."""
    for part in ("turn", "cumulative"):
        values = payload.get(part) or {}
        if any(values.get(name) is not None for name in _NUMERIC):
            return False
    return True


def build_metric_event(agent_secret: str, owner: str, payload: Mapping[str, Any], created_at: int) -> Event:
    """Sign the 44200: tags exactly `[["p", O], ["agent", A]]`, content NIP-44 v2 under the
    (agent secret, owner pubkey) conversation key. Raises ValueError when the plaintext
    exceeds 65 535 bytes."""
    plaintext = orjson.dumps(payload).decode()
    if len(plaintext.encode()) > MAX_PLAINTEXT:
        raise ValueError("turn metric plaintext exceeds 65535 bytes")
    key = nip44.get_conversation_key(agent_secret, owner)
    agent = public_key(agent_secret)
    content = nip44.encrypt(plaintext, key)
    return Event.create(agent_secret, KIND_TURN_METRIC, content, [["p", owner], ["agent", agent]], created_at)
