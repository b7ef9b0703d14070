"""A step's action fields at run time: templates rendered, pure run-time checks applied (§7.5 item 3, §8).

`resolve(step, scope, ...)` returns the `Resolved` fields the runner turns into the step's
effect, or raises `StepFailure` with the error code of §7.6. Checks that need the store
(members for `@Name`, the thread parent, the channel's archived flag) are the runner's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from buzz.core.limits import text_too_long
from buzz.core.nip19 import parse_key_text
from buzz.workflows import definition as d
from buzz.workflows.approvals import parse_approver_spec
from buzz.workflows.limits import EMOJI_MAX_CHARS, MESSAGE_TEXT_MAX_BYTES, TOPIC_MAX_BYTES
from buzz.workflows.templates import Scope, TemplateError, render


class StepFailure(Exception):
    """A step fails with `code` (§7.6); `message` is the run's `error_message`."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message


@dataclass(frozen=True)
class Resolved:
    """The fields of one dispatch, JSON-ready (stored with the step's effect)."""

    action: str
    fields: dict[str, Any]


def idempotency_key(run_id: str, step_id: str) -> str:
    """`Idempotency-Key` of a `call_webhook` (§8.5 item 3): the same on every attempt and resume."""
    return f"{run_id}:{step_id}"


def _size(text: str) -> int:
    return len(text.encode("utf-8", "surrogatepass"))


def _text(value: str, what: str) -> str:
    if not value.strip():
        raise StepFailure("action_failed", f"{what} is empty")
    if _size(value) > MESSAGE_TEXT_MAX_BYTES:
        raise StepFailure("action_failed", f"{what} exceeds {MESSAGE_TEXT_MAX_BYTES} bytes")
    return value


def _pubkey(value: str, what: str) -> str:
    try:
        return parse_key_text(value, "npub")
    except ValueError:
        raise StepFailure("invalid_definition", f"{what} is not a pubkey") from None


def _fields(step: d.Step, r: Any, channel_id: str, owner: str, run_id: str) -> dict[str, Any]:
    a = step.action
    if isinstance(a, d.SendMessage):
        channel = r(a.channel) if a.channel is not None else ""
        if channel not in ("", channel_id):
            raise StepFailure("action_failed", "send_message may only post to the workflow's channel")
        return {"text": _text(r(a.text), "send_message text"), "reply_in_thread": a.reply_in_thread}
    if isinstance(a, d.SendDm):
        to = _pubkey(r(a.to).strip(), "send_dm to")
        if to == owner:
            raise StepFailure("action_failed", "send_dm cannot send to the workflow's owner")
        return {"to": to, "text": _text(r(a.text), "send_dm text")}
    if isinstance(a, d.SetChannelTopic):
        topic = r(a.topic)
        if _size(topic) > TOPIC_MAX_BYTES:
            raise StepFailure("action_failed", f"topic exceeds {TOPIC_MAX_BYTES} bytes")
        too_long = text_too_long("channel topic", topic)  # applied as a 9002 would be (decision 186)
        if too_long:
            raise StepFailure("action_failed", too_long)
        return {"topic": topic}
    if isinstance(a, d.AddReaction):
        emoji = r(a.emoji)
        if not 1 <= len(emoji) <= EMOJI_MAX_CHARS:
            raise StepFailure(
                "action_failed", f"add_reaction emoji must be 1 to {EMOJI_MAX_CHARS} characters"
            )
        return {"emoji": emoji}
    if isinstance(a, d.CallWebhook):
        headers = []
        for name, value in a.headers:
            resolved = r(value)
            if "\r" in resolved or "\n" in resolved:
                raise StepFailure("webhook_failed", f"header {name} contains a line break")
            headers.append([name, resolved])
        retry = {"max": a.retry.max, "backoff": a.retry.backoff} if a.retry else None
        return {"method": a.method, "url": r(a.url), "headers": headers,
                "body": r(a.body) if a.body is not None else None, "retry": retry,
                "idempotency_key": idempotency_key(run_id, step.id)}  # fmt: skip
    if isinstance(a, d.RequestApproval):
        spec = r(a.approvers)
        try:
            parse_approver_spec(spec)
        except ValueError as exc:
            raise StepFailure("invalid_definition", str(exc)) from None
        return {"approver_spec": spec, "message": r(a.message), "timeout": a.timeout}
    if isinstance(a, d.Delay):
        return {"duration": a.duration}
    assert isinstance(a, d.AskAgent)
    agent = r(a.agent).strip()
    target = (
        {"agent_name": agent[1:]}
        if agent.startswith("@") and len(agent) > 1
        else {"agent": _pubkey(agent, "agent")}
    )
    return {**target, "prompt": _text(r(a.prompt), "ask_agent prompt"), "timeout": a.timeout}


def resolve(step: d.Step, scope: Scope, *, channel_id: str, owner: str, run_id: str) -> Resolved:
    """Render and check one step's fields. Raises StepFailure."""

    def r(text: str) -> str:
        try:
            return render(text, scope)
        except TemplateError as exc:
            raise StepFailure("template_resolution_failed", str(exc)) from None

    return Resolved(step.action_name, _fields(step, r, channel_id, owner, run_id))
