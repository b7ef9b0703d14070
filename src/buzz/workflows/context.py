"""Trigger contexts and what conditions and templates read from them (§4.3, §5.1, §7.1–§7.2).

A run stores its trigger context (a JSON object of strings and one boolean) when it is
created; every later step builds its condition variables and template scope from that
context and the outputs of the steps completed so far — never from memory (§11.3 item 3).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from buzz.core.errors import Invalid
from buzz.core.event import Event
from buzz.workflows import definition as d
from buzz.workflows.conditions import Budget, ConditionError, Value, evaluate
from buzz.workflows.limits import (
    INPUT_KEY_MAX_CHARS,
    INPUT_MAX_KEYS,
    INT64_MAX,
    INT64_MIN,
    MANUAL_INPUT_MAX_BYTES,
)
from buzz.workflows.templates import Scope

STANDARD_FIELDS = ("text", "author", "channel_id", "timestamp", "emoji", "message_id", "is_reply")
_VARIABLE_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}\Z")
_HEX64 = re.compile(r"[0-9a-f]{64}\Z")

# Kinds that never start a run, whatever their channel (§7.1); plus the loop-guard tag.
NEVER_TRIGGER_KINDS = frozenset({*range(46001, 46013), 30620, 41010, 41011, 41012, 46020, 46030, 46031, 1059})
LOOP_GUARD_TAG = ("buzz:workflow", "true")


def _base(channel_id: str, timestamp: int) -> dict[str, Any]:
    return {"text": "", "author": "", "channel_id": channel_id, "timestamp": str(timestamp), "emoji": "",
            "message_id": "", "is_reply": False}  # fmt: skip


def is_engine_event(event: Event) -> bool:
    """True for an event that must never start a run (§7.1's list and the loop guard)."""
    return event.kind in NEVER_TRIGGER_KINDS or any(tuple(t[:2]) == LOOP_GUARD_TAG for t in event.tags)


def _is_reply(event: Event) -> bool:
    return any(len(t) >= 4 and t[0] == "e" and t[3] == "reply" for t in event.tags)


def reaction_target(event: Event) -> str:
    """The message a reaction names: its last 64-hex `e` tag (§3.3), or ""."""
    targets = [t[1] for t in event.tags if len(t) >= 2 and t[0] == "e" and _HEX64.match(t[1])]
    return targets[-1] if targets else ""


def channel_event_context(event: Event, channel_id: str) -> dict[str, Any]:
    """§7.2 item 1: the context of a stored kind 9, 7 or 40008. `author` is the signer, not `actor`."""
    ctx = _base(channel_id, event.created_at)
    ctx.update(author=event.pubkey, event_id=event.id, is_reply=_is_reply(event), text=event.content)
    if event.kind == 7:
        ctx.update(emoji=event.content, message_id=reaction_target(event))
    else:
        ctx["message_id"] = event.id
    return ctx


def schedule_context(channel_id: str, instant: int) -> dict[str, Any]:
    """§7.2 item 2."""
    return _base(channel_id, instant)


def _stringify(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _with_inputs(ctx: dict[str, Any], inputs: Mapping[str, Any], door_sets: frozenset[str]) -> dict[str, Any]:
    kept = 0
    for key, value in inputs.items():
        if kept >= INPUT_MAX_KEYS:
            break
        if len(key) > INPUT_KEY_MAX_CHARS or key.startswith(("trigger_", "steps_")) or key in door_sets:
            continue
        ctx[key] = _stringify(value)
        kept += 1
    return ctx


def webhook_context(channel_id: str, received_at: int, body: Mapping[str, Any] | None) -> dict[str, Any]:
    """§7.2 item 3 for `POST /hooks/<W>`; `body` is the parsed JSON object (None when empty)."""
    return _with_inputs(_base(channel_id, received_at), body or {}, frozenset({"channel_id", "timestamp"}))


def parse_manual_inputs(content: str) -> dict[str, Any]:
    """A 46020's content: empty or a JSON object (§13 item 2.6). Raises Invalid."""
    if len(content.encode("utf-8", "surrogatepass")) > MANUAL_INPUT_MAX_BYTES:
        raise Invalid(f"trigger inputs exceed {MANUAL_INPUT_MAX_BYTES} bytes")
    if not content.strip():
        return {}
    try:
        inputs = json.loads(content)
    except ValueError:
        raise Invalid("trigger inputs must be a JSON object") from None
    if not isinstance(inputs, dict):
        raise Invalid("trigger inputs must be a JSON object")
    return inputs


def manual_context(
    channel_id: str, received_at: int, author: str, inputs: Mapping[str, Any]
) -> dict[str, Any]:
    """§7.2 item 3 for an accepted 46020: its signer is `author`."""
    ctx = _base(channel_id, received_at)
    ctx["author"] = author
    return _with_inputs(ctx, inputs, frozenset({"channel_id", "timestamp", "author"}))


def _typed(value: Any) -> Value | None:
    if value is None:
        return None
    if isinstance(value, bool | str | float):
        return value
    if isinstance(value, int):
        return value if INT64_MIN <= value <= INT64_MAX else float(value)
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def condition_variables(
    trigger: Mapping[str, Any], outputs: Mapping[str, Mapping[str, Any]]
) -> dict[str, Value]:
    """The variables of §4.3: `trigger_<field>` and `steps_<id>_output_<field>` of completed steps."""
    env: dict[str, Value] = {}
    for key, value in trigger.items():
        if key in STANDARD_FIELDS or _VARIABLE_KEY.match(key):
            typed = _typed(value)
            if typed is not None:
                env[f"trigger_{key}"] = typed
    for step_id, output in outputs.items():
        for key, value in output.items():
            typed = _typed(value)
            if typed is not None:
                env[f"steps_{step_id}_output_{key}"] = typed
    return env


def template_scope(trigger: Mapping[str, Any], outputs: Mapping[str, Mapping[str, Any]]) -> Scope:
    return Scope(trigger, outputs)


def fires(
    trigger: d.Trigger, event: Event, context: Mapping[str, Any], budget: Budget | None = None
) -> tuple[bool, str | None]:
    """The channel-event door's checks (§7.1): kind, loop guard, emoji, filter.

    Returns (fires, filter error). A filter that errors does not fire; the caller logs the
    error with the workflow's id (§4.5 item 3). The caller has already checked that the
    event's derived channel is the workflow's.
    """
    if d.TRIGGER_KINDS.get(event.kind) != trigger.on or is_engine_event(event):
        return False, None
    if isinstance(trigger, d.ReactionAdded) and trigger.emoji is not None and event.content != trigger.emoji:
        return False, None
    condition = getattr(trigger, "filter", None)
    if condition is None:
        return True, None
    try:
        return evaluate(condition, condition_variables(context, {}), budget), None
    except ConditionError as exc:
        return False, str(exc)
