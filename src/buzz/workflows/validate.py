"""YAML text → `Definition`, or every problem with its path, line and column (§3.2, §3.8).

`validate(text, now=…)` collects all errors and warnings (what `POST /workflows/validate` and
the editor show); `parse_definition` raises `DefinitionError` whose `reason` is the one
`invalid:` line a relay answers: the first error, naming the field and its line.

The per-action rules are the table `ACTION_FIELDS` (field → reader); readers share one
`_Reader` that knows where every node of the document sits.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from buzz.core.limits import text_too_long
from buzz.core.nip19 import parse_key_text
from buzz.workflows import definition as d
from buzz.workflows.approvals import parse_approver_spec
from buzz.workflows.conditions import Condition, ConditionSyntaxError, compile_condition
from buzz.workflows.limits import (
    DEFAULT_STEP_TIMEOUT_S,
    DEFINITION_MAX_BYTES,
    DESCRIPTION_MAX_BYTES,
    DURATIONS,
    EMOJI_MAX_CHARS,
    MAX_CONCURRENT_PER_WORKFLOW,
    MAX_STEPS,
    MESSAGE_TEXT_MAX_BYTES,
    NAME_MAX_CHARS,
    STEP_TIMEOUT_MAX_S,
    TOPIC_MAX_BYTES,
    WEBHOOK_FORBIDDEN_HEADERS,
    WEBHOOK_METHODS,
    WEBHOOK_RETRY_MAX,
    WEBHOOK_URL_MAX_BYTES,
)
from buzz.workflows.schedule import (
    ScheduleError,
    is_more_than_hourly,
    numeric_day_of_week,
    parse_cron,
    parse_interval,
)
from buzz.workflows.templates import TemplateError, check, is_literal
from buzz.workflows.yaml_tree import Document, Path, YamlError, load

PARSE_ERROR = "workflow YAML parse error"
_STEP_ID = re.compile(r"[A-Za-z0-9_]{1,64}\Z")
_DURATION = re.compile(r"([0-9]+)([hms]?)\Z")
_TOKEN = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+\Z")
_CREDENTIAL = re.compile(r"(?i)^(authorization|cookie|.*-token|.*-key|.*secret.*)$")
_MENTION = re.compile(r"@\S.{0,255}\Z", re.S)
_TOP_KEYS = frozenset({"name", "description", "trigger", "steps", "enabled", "max_concurrent"})
_STEP_KEYS = frozenset({"id", "name", "if", "timeout_secs", "action"})
_BAD = object()  # a reader's "already reported" result


class DefinitionError(ValueError):
    """The definition is refused; `reason` is the relay's whole `invalid:` message."""

    def __init__(self, reason: str, problems: tuple[d.Problem, ...]) -> None:
        super().__init__(reason)
        self.reason = reason
        self.problems = problems


@dataclass
class Report:
    """Everything validation found; `definition` is set only when there are no errors."""

    definition: d.Definition | None
    errors: list[d.Problem] = field(default_factory=list)
    warnings: list[d.Problem] = field(default_factory=list)

    @property
    def reason(self) -> str | None:
        if not self.errors:
            return None
        first = self.errors[0]
        if first.path == "" and first.message.startswith("workflow definition exceeds"):
            return f"invalid: {first.message}"
        return f"invalid: {PARSE_ERROR}: {first}"


def path_text(path: Path) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def parse_duration(value: Any) -> int:
    """A YAML integer or `^[0-9]+[hms]?$` string → seconds (§3.5). Raises ValueError."""
    if type(value) is int:
        seconds = value
    elif isinstance(value, str) and (m := _DURATION.match(value)):
        seconds = int(m.group(1)) * {"h": 3600, "m": 60, "s": 1, "": 1}[m.group(2)]
    else:
        raise ValueError("must be a duration: whole seconds, or a number with h, m or s")
    if seconds >= 2**63:
        raise ValueError("duration overflows")
    return seconds


class _Reader:
    def __init__(self, doc: Document, report: Report) -> None:
        self.doc = doc
        self.report = report

    def _problem(self, path: Path, message: str, on_key: bool) -> d.Problem:
        mark = (self.doc.key_marks.get(path) if on_key else None) or self.doc.mark(path)
        return d.Problem(path_text(path), message, mark.line if mark else None, mark.column if mark else None)

    def error(self, path: Path, message: str, on_key: bool = False) -> Any:
        self.report.errors.append(self._problem(path, message, on_key))
        return _BAD

    def warn(self, path: Path, message: str, on_key: bool = False) -> None:
        self.report.warnings.append(self._problem(path, message, on_key))

    def unknown_keys(self, m: dict[str, Any], path: Path, known: frozenset[str] | set[str]) -> None:
        for key in m:
            if key not in known:
                self.warn((*path, key), f"unknown key {key!r} is ignored", on_key=True)

    # -- scalar readers: each returns the value, the default, or _BAD (already reported) --
    def get(self, m: dict[str, Any], path: Path, key: str, required: bool) -> Any:
        if key not in m:
            return self.error((*path, key), "is required") if required else None
        return m[key]

    def string(self, m: dict, path: Path, key: str, *, required: bool = False, nullable: bool = True) -> Any:
        v = self.get(m, path, key, required)
        if v is None and key in m and not nullable:
            return self.error((*path, key), "must be a string")
        if v is None or v is _BAD:
            return v
        if not isinstance(v, str):
            return self.error((*path, key), "must be a string (quote it)")
        return v

    def boolean(self, m: dict, path: Path, key: str, default: bool) -> Any:
        v = m.get(key, default)
        if type(v) is not bool:
            return self.error((*path, key), "must be true or false")
        return v

    def integer(self, m: dict, path: Path, key: str, low: int, high: int, default: int | None) -> Any:
        if key not in m:
            return default
        v = m[key]
        if type(v) is not int:
            return self.error((*path, key), "must be a whole number")
        if not low <= v <= high:
            return self.error((*path, key), f"must be between {low} and {high}")
        return v

    def duration(self, m: dict, path: Path, key: str, table_key: str) -> Any:
        rng = DURATIONS[table_key]
        v = self.get(m, path, key, rng.default is None)
        if v is _BAD:
            return v
        if v is None:
            return rng.default
        try:
            seconds = parse_duration(v)
        except ValueError as exc:
            return self.error((*path, key), str(exc))
        if not rng.minimum <= seconds <= rng.maximum:
            return self.error((*path, key), f"must be between {rng.minimum} s and {rng.maximum} s")
        return seconds

    def template(self, m: dict, path: Path, key: str, *, required: bool = False) -> Any:
        v = self.string(m, path, key, required=required, nullable=not required)
        if isinstance(v, str):
            try:
                check(v)
            except TemplateError as exc:
                return self.error((*path, key), str(exc))
        return v

    def condition(self, m: dict, path: Path, key: str) -> Any:
        v = self.string(m, path, key)
        if not isinstance(v, str):
            return v
        try:
            return compile_condition(v)
        except ConditionSyntaxError as exc:
            return self.error((*path, key), f"condition: {exc}")


# -- triggers ----------------------------------------------------------------------------------
def _trigger(r: _Reader, m: Any, now: int) -> Any:
    path: Path = ("trigger",)
    if m is _BAD or m is None:
        return _BAD
    if not isinstance(m, dict):
        return r.error(path, "must be a mapping with an 'on' key")
    on = r.string(m, path, "on", required=True, nullable=False)
    if on is _BAD:
        return _BAD
    if on not in d.TRIGGERS:
        return r.error((*path, "on"), f"unknown trigger {on!r} (one of {', '.join(d.TRIGGERS)})")
    known = {"on", "filter"} | ({"emoji"} if on == "reaction_added" else set())
    if on == "message_posted":
        r.unknown_keys(m, path, known)
        f = r.condition(m, path, "filter")
        return _BAD if f is _BAD else d.MessagePosted(f)
    if on == "diff_posted":
        r.unknown_keys(m, path, known)
        f = r.condition(m, path, "filter")
        return _BAD if f is _BAD else d.DiffPosted(f)
    if on == "reaction_added":
        r.unknown_keys(m, path, known)
        emoji, f = r.string(m, path, "emoji"), r.condition(m, path, "filter")
        if isinstance(emoji, str) and not 1 <= len(emoji) <= EMOJI_MAX_CHARS:
            emoji = r.error((*path, "emoji"), f"must be 1 to {EMOJI_MAX_CHARS} characters")
        return _BAD if _BAD in (emoji, f) else d.ReactionAdded(emoji, f)
    if on == "webhook":
        r.unknown_keys(m, path, {"on"})
        return d.Webhook()
    r.unknown_keys(m, path, {"on", "cron", "interval"})
    if ("cron" in m) == ("interval" in m):
        return r.error(path, "schedule needs exactly one of 'cron' and 'interval'")
    if "interval" in m:
        seconds = r.duration(m, path, "interval", "trigger.interval")
        return _BAD if seconds is _BAD else d.ScheduleTrigger(parse_interval(seconds))
    expr = r.string(m, path, "cron", required=True, nullable=False)
    if expr is _BAD:
        return _BAD
    try:
        cron = parse_cron(expr, now)
    except ScheduleError as exc:
        return r.error((*path, "cron"), str(exc))
    if numeric_day_of_week(expr):
        r.warn(
            (*path, "cron"), "day of week counts 1 = Sunday … 7 = Saturday here; names (MON-FRI) are clearer"
        )
    if is_more_than_hourly(cron, now):
        r.warn((*path, "cron"), "this schedule fires more often than hourly")
    return d.ScheduleTrigger(cron)


# -- actions: one reader per action ------------------------------------------------------------
@dataclass(frozen=True)
class _Ctx:
    reader: _Reader
    path: Path
    message_based: bool
    channel_id: str | None


def _literal_text(ctx: _Ctx, key: str, value: Any, max_bytes: int, what: str) -> None:
    if isinstance(value, str) and is_literal(value):
        if not value.strip():
            ctx.reader.error((*ctx.path, key), f"{what} is empty")
        elif len(value.encode("utf-8", "surrogatepass")) > max_bytes:
            ctx.reader.error((*ctx.path, key), f"{what} exceeds {max_bytes} bytes")


def _pubkey_literal(ctx: _Ctx, key: str, value: Any, allow_mention: bool) -> None:
    if not isinstance(value, str) or not is_literal(value):
        return
    if allow_mention and _MENTION.match(value):
        return
    try:
        parse_key_text(value, "npub")
    except ValueError:
        ctx.reader.error(
            (*ctx.path, key), "must be a 64-hex pubkey or npub" + (" or @Name" if allow_mention else "")
        )


def _send_message(ctx: _Ctx, m: dict) -> Any:
    r, p = ctx.reader, ctx.path
    text, channel = r.template(m, p, "text", required=True), r.template(m, p, "channel")
    thread = r.boolean(m, p, "reply_in_thread", False)
    _literal_text(ctx, "text", text, MESSAGE_TEXT_MAX_BYTES, "send_message text")
    if isinstance(channel, str) and is_literal(channel) and channel not in ("", ctx.channel_id or channel):
        r.error((*p, "channel"), "send_message may only post to the workflow's channel")
    if thread is True and not ctx.message_based:
        r.error((*p, "reply_in_thread"), "reply_in_thread requires a message-based trigger")
    return d.SendMessage(text, channel or None, thread)


def _send_dm(ctx: _Ctx, m: dict) -> Any:
    r, p = ctx.reader, ctx.path
    to, text = r.template(m, p, "to", required=True), r.template(m, p, "text", required=True)
    _pubkey_literal(ctx, "to", to, allow_mention=False)
    _literal_text(ctx, "text", text, MESSAGE_TEXT_MAX_BYTES, "send_dm text")
    return d.SendDm(to, text)


def _set_channel_topic(ctx: _Ctx, m: dict) -> Any:
    topic = ctx.reader.template(m, ctx.path, "topic", required=True)
    if isinstance(topic, str) and is_literal(topic):
        if len(topic.encode()) > TOPIC_MAX_BYTES:
            ctx.reader.error((*ctx.path, "topic"), f"topic exceeds {TOPIC_MAX_BYTES} bytes")
        elif too_long := text_too_long("channel topic", topic):
            ctx.reader.error((*ctx.path, "topic"), too_long)
    return d.SetChannelTopic(topic)


def _add_reaction(ctx: _Ctx, m: dict) -> Any:
    emoji = ctx.reader.template(m, ctx.path, "emoji", required=True)
    if isinstance(emoji, str) and is_literal(emoji) and not 1 <= len(emoji) <= EMOJI_MAX_CHARS:
        ctx.reader.error((*ctx.path, "emoji"), f"must be 1 to {EMOJI_MAX_CHARS} characters")
    if not ctx.message_based:
        ctx.reader.error((*ctx.path, "action"), "add_reaction requires a message-based trigger")
    return d.AddReaction(emoji)


def _url_problem(url: str) -> str | None:
    if len(url.encode()) > WEBHOOK_URL_MAX_BYTES:
        return f"URL exceeds {WEBHOOK_URL_MAX_BYTES} bytes"
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 (raises on a bad port)
    except ValueError:
        return "is not a valid URL"
    if parts.scheme.lower() not in ("https", "http"):
        return "URL must be https (http only for hosts the operator allows)"
    if not parts.hostname:
        return "URL needs a host"
    if parts.username is not None or parts.password is not None:
        return "URL must not carry user info"
    return None


def _call_webhook(ctx: _Ctx, m: dict) -> Any:
    r, p = ctx.reader, ctx.path
    url, body = r.template(m, p, "url", required=True), r.template(m, p, "body")
    if isinstance(url, str) and is_literal(url) and (problem := _url_problem(url)):
        r.error((*p, "url"), problem)
    method = r.string(m, p, "method") or "POST"
    if isinstance(method, str) and method.upper() not in WEBHOOK_METHODS:
        method = r.error((*p, "method"), f"must be one of {', '.join(WEBHOOK_METHODS)}")
    headers: list[tuple[str, str]] = []
    raw = m.get("headers")
    if raw is not None and not isinstance(raw, dict):
        r.error((*p, "headers"), "must be a mapping of header names to values")
    for name, value in (raw or {}).items() if isinstance(raw, dict) else ():
        hp = (*p, "headers", name)
        if not _TOKEN.match(name):
            r.error(hp, f"header name {name!r} is not a valid token", on_key=True)
        elif name.lower() in WEBHOOK_FORBIDDEN_HEADERS:
            r.error(hp, f"header {name} is set by the engine", on_key=True)
        elif _CREDENTIAL.match(name):
            r.warn(hp, "readers of the channel can read this definition, and this header looks like a credential",
                   on_key=True)  # fmt: skip
        value = r.template(raw, (*p, "headers"), name, required=True)
        if isinstance(value, str):
            headers.append((name, value))
    retry = _retry(r, m, p)
    if _BAD in (method, retry):
        return _BAD
    return d.CallWebhook(url, method.upper(), tuple(headers), body, retry)


def _retry(r: _Reader, m: dict, p: Path) -> Any:
    raw = m.get("retry")
    if raw is None:
        return None
    if not isinstance(raw, dict):
        return r.error((*p, "retry"), "must be a mapping {max, backoff}")
    rp = (*p, "retry")
    r.unknown_keys(raw, rp, {"max", "backoff"})
    count = r.integer(raw, rp, "max", 0, WEBHOOK_RETRY_MAX, 0)
    backoff = r.duration(raw, rp, "backoff", "call_webhook.retry.backoff")
    return _BAD if _BAD in (count, backoff) else d.Retry(count, backoff)


def _request_approval(ctx: _Ctx, m: dict) -> Any:
    r, p = ctx.reader, ctx.path
    raw = m.get("from")
    if isinstance(raw, list):
        if not all(isinstance(x, str) for x in raw):
            return r.error((*p, "from"), "must be a string or a list of strings")
        spec = ",".join(raw)
        try:
            check(spec)
        except TemplateError as exc:
            return r.error((*p, "from"), str(exc))
    else:
        spec = r.template(m, p, "from", required=True)
    if isinstance(spec, str) and is_literal(spec):
        try:
            parse_approver_spec(spec)
        except ValueError as exc:
            r.error((*p, "from"), str(exc))
    message = r.template(m, p, "message") or ""
    timeout = r.duration(m, p, "timeout", "request_approval.timeout")
    return d.RequestApproval(spec, message, timeout)


def _delay(ctx: _Ctx, m: dict) -> Any:
    return d.Delay(ctx.reader.duration(m, ctx.path, "duration", "delay.duration"))


def _ask_agent(ctx: _Ctx, m: dict) -> Any:
    r, p = ctx.reader, ctx.path
    agent, prompt = r.template(m, p, "agent", required=True), r.template(m, p, "prompt", required=True)
    _pubkey_literal(ctx, "agent", agent, allow_mention=True)
    _literal_text(ctx, "prompt", prompt, MESSAGE_TEXT_MAX_BYTES, "ask_agent prompt")
    return d.AskAgent(agent, prompt, r.duration(m, p, "timeout", "ask_agent.timeout"))


# action → (its field names, its reader)
ACTION_FIELDS: dict[str, tuple[frozenset[str], Callable[[_Ctx, dict], Any]]] = {
    "send_message": (frozenset({"text", "channel", "reply_in_thread"}), _send_message),
    "send_dm": (frozenset({"to", "text"}), _send_dm),
    "set_channel_topic": (frozenset({"topic"}), _set_channel_topic),
    "add_reaction": (frozenset({"emoji"}), _add_reaction),
    "call_webhook": (frozenset({"url", "method", "headers", "body", "retry"}), _call_webhook),
    "request_approval": (frozenset({"from", "message", "timeout"}), _request_approval),
    "delay": (frozenset({"duration"}), _delay),
    "ask_agent": (frozenset({"agent", "prompt", "timeout"}), _ask_agent),
}
assert set(ACTION_FIELDS) == set(d.ACTIONS)


def _step(r: _Reader, m: Any, index: int, seen: set[str], message_based: bool, channel_id: str | None) -> Any:
    path: Path = ("steps", index)
    if not isinstance(m, dict):
        return r.error(path, "each step must be a mapping")
    sid = r.string(m, path, "id", required=True, nullable=False)
    if isinstance(sid, str):
        if not _STEP_ID.match(sid):
            sid = r.error((*path, "id"), "step id must be 1 to 64 characters of A-Z, a-z, 0-9 and _")
        elif "_output_" in sid:
            sid = r.error((*path, "id"), "step id must not contain '_output_'")
        elif sid in seen:
            sid = r.error((*path, "id"), f"duplicate step id {sid!r}")
        else:
            seen.add(sid)
    name = r.string(m, path, "name")
    cond = r.condition(m, path, "if")
    timeout = r.integer(m, path, "timeout_secs", 1, STEP_TIMEOUT_MAX_S, DEFAULT_STEP_TIMEOUT_S)
    action = r.string(m, path, "action", required=True, nullable=False)
    if action is _BAD:
        return _BAD
    if action not in ACTION_FIELDS:
        return r.error((*path, "action"), f"unknown action {action!r} (one of {', '.join(ACTION_FIELDS)})")
    fields, read = ACTION_FIELDS[action]
    r.unknown_keys(m, path, _STEP_KEYS | fields)
    before = len(r.report.errors)
    act = read(_Ctx(r, path, message_based, channel_id), m)
    if act is _BAD or len(r.report.errors) > before or _BAD in (sid, name, cond, timeout):
        return _BAD
    return d.Step(sid, act, name, cond, timeout)


def _top(r: _Reader, tree: dict[str, Any], now: int, channel_id: str | None) -> d.Definition | None:
    r.unknown_keys(tree, (), _TOP_KEYS)
    name = r.string(tree, (), "name", required=True, nullable=False)
    if isinstance(name, str) and not 1 <= len(name.strip()) <= NAME_MAX_CHARS:
        name = r.error(("name",), f"must be 1 to {NAME_MAX_CHARS} characters")
    description = r.string(tree, (), "description")
    if isinstance(description, str) and len(description.encode()) > DESCRIPTION_MAX_BYTES:
        description = r.error(("description",), f"exceeds {DESCRIPTION_MAX_BYTES} bytes")
    enabled = r.boolean(tree, (), "enabled", True)
    cap = r.integer(tree, (), "max_concurrent", 1, MAX_CONCURRENT_PER_WORKFLOW, None)
    trigger = _trigger(r, r.get(tree, (), "trigger", True), now)
    raw_steps = r.get(tree, (), "steps", True)
    steps: list[Any] = []
    if isinstance(raw_steps, list):
        if not 1 <= len(raw_steps) <= MAX_STEPS:
            r.error(("steps",), f"must list 1 to {MAX_STEPS} steps")
        message_based = getattr(trigger, "on", None) in d.MESSAGE_BASED
        seen: set[str] = set()
        for i, raw in enumerate(raw_steps[: MAX_STEPS + 1]):
            steps.append(_step(r, raw, i, seen, message_based, channel_id))
    elif raw_steps is not _BAD:
        r.error(("steps",), "must be a list of steps")
    if r.report.errors or _BAD in (name, description, enabled, cap, trigger) or _BAD in steps:
        return None
    canonical = json.dumps(tree, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return d.Definition(
        name=name.strip(),
        trigger=trigger,
        steps=tuple(steps),
        description=description,
        enabled=enabled,
        max_concurrent=cap,
        canonical=canonical,
        definition_hash=hashlib.sha256(canonical.encode("utf-8")).hexdigest(),
        warnings=tuple(r.report.warnings),
    )


def validate(text: str, *, now: int, channel_id: str | None = None) -> Report:
    """Every error and warning of a definition text. `now` anchors the cron checks; a
    `channel_id` lets a literal `send_message.channel` be checked (None skips that check)."""
    report = Report(None)
    if len(text.encode("utf-8", "surrogatepass")) > DEFINITION_MAX_BYTES:
        report.errors.append(d.Problem("", f"workflow definition exceeds {DEFINITION_MAX_BYTES} bytes"))
        return report
    try:
        doc = load(text)
    except YamlError as exc:
        mark = exc.mark
        report.errors.append(
            d.Problem("", exc.message, mark.line if mark else None, mark.column if mark else None)
        )
        return report
    report.definition = _top(_Reader(doc, report), doc.value, now, channel_id)
    return report


def parse_definition(text: str, *, now: int, channel_id: str | None = None) -> d.Definition:
    """A valid definition, or DefinitionError carrying the relay's one `invalid:` reason."""
    report = validate(text, now=now, channel_id=channel_id)
    if report.definition is None:
        assert report.reason is not None
        raise DefinitionError(report.reason, tuple(report.errors))
    return report.definition


def condition_of(trigger: d.Trigger) -> Condition | None:
    return getattr(trigger, "filter", None)
