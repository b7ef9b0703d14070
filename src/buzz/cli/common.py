"""Shared plumbing of the workspace commands (agents.md §2.1): identity, the bridge session,
failures with their category and exit code, and the one place that runs a command.

A command body is `async def body(ws: Workspace) -> <JSON value>`; `run(ctx, body)` resolves
the identity, opens the HTTP bridge client, runs the body, prints its result as the one JSON
document on stdout, and turns every failure into one JSON line on stderr plus its exit code:

| Exit | Categories | From |
|---|---|---|
| 1 | `user_error`, `not_found` | bad values, missing events or channels |
| 2 | `network_error`, `relay_error` | no HTTP answer; HTTP status without a relay verdict |
| 3 | `auth_error`, `key_error` | missing/invalid key or auth tag; HTTP 401/403 |
| 4 | `error` | relay refusal (`OK false`, refused read), non-JSON answer |
| 5 | `conflict` | refusal with `duplicate:` |
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NoReturn

import click
import orjson

from buzz.cli.identity import IdentityError, parse_pubkey, parse_secret_key, resolve_auth_tag
from buzz.cli.output import EXIT_CODES, Context, emit
from buzz.client.http_bridge import BridgeClient, BridgeError
from buzz.client.relay_client import PublishResult, RelayError
from buzz.core.channel_id import is_channel_id
from buzz.core.event import Event
from buzz.core.keys import is_hex, public_key


@dataclass
class CliFailure(Exception):
    """A failed command: `category` decides the exit code (`EXIT_CODES`)."""

    category: str
    message: str
    retryable: bool = False
    relay_message: str | None = None

    def __str__(self) -> str:
        return self.message


def user_error(message: str) -> CliFailure:
    return CliFailure("user_error", message)


def not_found(message: str) -> CliFailure:
    return CliFailure("not_found", message)


def failure_object(failure: CliFailure) -> dict[str, Any]:
    """The CLI error object (agents.md §2.1 item 2):
    {"error", "message", "retryable"[, "relay_message"]}."""
    payload: dict[str, Any] = {
        "error": failure.category,
        "message": failure.message,
        "retryable": failure.retryable,
    }
    if failure.relay_message is not None:
        payload["relay_message"] = failure.relay_message
    return payload


def report(failure: CliFailure) -> NoReturn:
    """One JSON line on stderr, then exit with the category's code (agents.md §2.1 item 2)."""
    payload = failure_object(failure)
    sys.stderr.write(orjson.dumps(payload).decode() + "\n")
    sys.stderr.flush()
    raise SystemExit(EXIT_CODES[failure.category])


def from_bridge_error(exc: BridgeError) -> CliFailure:
    """Classify a bridge failure: no answer → network; 401/403 → auth; a relay verdict →
    `error` (`conflict` for `duplicate:`); a non-JSON success → `error`; else `relay_error`."""
    if exc.status is None:
        return CliFailure("network_error", exc.message, True)
    if exc.status in (401, 403):
        return CliFailure("auth_error", exc.message, False, exc.relay_message)
    if exc.relay_message is not None:
        category = "conflict" if exc.relay_message.startswith("duplicate:") else "error"
        return CliFailure(category, exc.relay_message, exc.retryable, exc.relay_message)
    if exc.malformed:
        return CliFailure("error", exc.message, False)
    return CliFailure("relay_error", exc.message, exc.retryable)


def refused(result: PublishResult) -> CliFailure:
    """An `OK false` verdict (agents.md §2.1 exit 4, or 5 for `duplicate:`)."""
    category = "conflict" if result.message.startswith("duplicate:") else "error"
    return CliFailure(category, f"relay refused the event: {result.message}", False, result.message)


# -- argument values -------------------------------------------------------------------------
def channel_arg(value: str) -> str:
    """A channel id as given: canonical lowercase UUID (relay.md §4.1 item 1), else user_error."""
    text = value.strip().lower()
    if not is_channel_id(text):
        raise user_error(f"invalid channel id {value!r}: expected a canonical UUID (8-4-4-4-12 hex)")
    return text


def event_id_arg(value: str, what: str = "event id") -> str:
    """A 64-hex event id (any case) → lowercase, else user_error."""
    text = value.strip().lower()
    if not is_hex(text, 64):
        raise user_error(f"invalid {what} {value!r}: expected 64 hex characters")
    return text


def pubkey_arg(value: str, what: str = "pubkey") -> str:
    """hex or npub → 64 lowercase hex, else user_error."""
    try:
        return parse_pubkey(value, what)
    except IdentityError as exc:
        raise CliFailure(exc.category, exc.message) from None


def first_channel(event: Event) -> str | None:
    """The first `h` value that is a canonical channel id (agents.md §3.1)."""
    return next((h for h in event.tag_values("h") if is_channel_id(h)), None)


# -- the session a command body works with ---------------------------------------------------
@dataclass
class Workspace:
    """The CLI identity and its bridge client; every signed event uses `secret` (§2.1 item 4)."""

    ctx: Context
    secret: str
    bridge: BridgeClient
    auth_tag: list[str] | None = None
    _relay_pubkey: str | None = field(default=None, repr=False)

    @property
    def pubkey(self) -> str:
        return public_key(self.secret)

    def sign(
        self, kind: int, content: str = "", tags: Iterable[Sequence[str]] = (), created_at: int | None = None
    ) -> Event:
        return Event.create(self.secret, kind, content, tags, created_at)

    async def publish(self, event: Event) -> PublishResult:
        """`POST /events`; an accepted answer (`duplicate:` included) is returned, a refusal
        raises CliFailure."""
        try:
            result = await self.bridge.publish(event)
        except BridgeError as exc:
            raise from_bridge_error(exc) from None
        if not result.accepted:
            raise refused(result)
        return result

    async def query(self, filters: Iterable[Mapping[str, Any]]) -> list[Event]:
        try:
            return await self.bridge.query(filters)
        except BridgeError as exc:
            raise from_bridge_error(exc) from None

    async def get_event(self, event_id: str) -> Event:
        """One stored event visible to me, else not_found."""
        found = await self.query([{"ids": [event_id]}])
        if not found:
            raise not_found(f"event not found: {event_id}")
        return found[0]


def run(
    ctx: Context, body: Callable[[Workspace], Awaitable[Any]], render: Callable[[Any], None] | None = None
) -> None:
    """Resolve the identity, run `body` against the bridge, emit its result (or hand it to
    `render`, e.g. a table) or report a failure."""
    try:
        secret = parse_secret_key(ctx.private_key)
        auth_tag = resolve_auth_tag(ctx.auth_tag, secret)
    except IdentityError as exc:
        report(CliFailure(exc.category, exc.message))

    async def main() -> Any:
        try:
            bridge = BridgeClient(ctx.relay_url, secret, auth_tag=auth_tag)
        except ValueError as exc:
            raise user_error(str(exc)) from None
        async with bridge:
            return await body(Workspace(ctx, secret, bridge, auth_tag))

    try:
        result = asyncio.run(main())
    except CliFailure as failure:
        report(failure)
    except BridgeError as exc:
        report(from_bridge_error(exc))
    except RelayError as exc:  # WebSocket paths (presence)
        report(CliFailure("error", exc.message, False, exc.message))
    except UnicodeEncodeError:  # an argument that is not valid UTF-8 (e.g. `--content $'\xff'`)
        report(user_error("an argument is not valid UTF-8 text"))
    except Exception as exc:  # agents.md §2.1: "anything else" is `error`, exit 4
        report(CliFailure("error", f"unexpected failure: {type(exc).__name__}: {exc}"))
    if render is not None:
        render(result)
    else:
        emit(ctx, result)


@contextlib.contextmanager
def _parser_errors(group: str) -> Iterator[None]:
    try:
        yield
    except click.exceptions.NoArgsIsHelpError:
        where = "buzz" if group in ("", "buzz") else f"buzz {group}"
        report(user_error(f"missing command (see {where} --help)"))
    except click.UsageError as exc:
        report(user_error(exc.format_message()))


class CommandGroup(click.Group):
    """A command group whose argument-parser errors are a JSON `user_error` with exit 1, never
    click's exit 2, which means "network" here (agents.md §2.1 item 2)."""

    def make_context(
        self, info_name: str | None, args: list[str], parent: click.Context | None = None, **extra: Any
    ) -> click.Context:
        with _parser_errors(self.name or ""):
            return super().make_context(info_name, args, parent, **extra)

    def invoke(self, ctx: click.Context) -> Any:
        with _parser_errors(self.name or ""):
            return super().invoke(ctx)


def read_text(value: str, what: str = "content", max_bytes: int | None = None, *, stdin: bool = True) -> str:
    """`-` reads all of stdin (UTF-8); otherwise the value itself. Empty → user_error; more than
    `max_bytes` UTF-8 bytes → user_error (agents.md §2.3 item 1). With `stdin=False` (the MCP
    server, whose stdin is the protocol) `-` is literal text."""
    if stdin and value == "-":
        raw = sys.stdin.buffer.read()
        try:
            value = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise user_error(f"{what} from stdin is not valid UTF-8") from None
    if not value:
        raise user_error(f"{what} is empty")
    size = len(value.encode("utf-8"))
    if max_bytes is not None and size > max_bytes:
        raise user_error(f"{what} is {size} bytes; the limit is {max_bytes}")
    return value
