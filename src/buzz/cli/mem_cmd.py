"""`buzz mem`: the agent's persistent, encrypted memory (engram.md §12).

Commands: `ls`, `get`, `hash` (reads; `--agent` lets an owner read its agent's memory) and
`set`, `patch`, `rm` (writes, by the agent only). The CLI identity is `--private-key` /
`BUZZ_PRIVATE_KEY`; the owner is `--owner` or element 1 of the verified `BUZZ_AUTH_TAG`.
The relay is reached over WebSocket with NIP-42 AUTH (carrying the NIP-OA tag when one is
configured). Output: `get` prints the raw value with no newline, `hash` its SHA-256, `ls` one
compact JSON array; progress lines go to stderr. Errors are one JSON line on stderr,
`{"error", "message", "retryable"[, "relay_message"]}`, with the exit codes of §12.2:

    0 ok · 1 user_error, not_found (argument-parser errors included) · 2 network_error ·
    3 auth_error, key_error · 4 error (OK false, build failure, stdin not UTF-8) ·
    5 conflict (base-hash mismatch, `duplicate:` answer, clock-poisoned head)
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import hashlib
import os
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass
from typing import Any, NoReturn

import click
import orjson

from buzz.agent.memory import Listing, Memory, Pair, QueryFailed, connect, is_duplicate, relay_max_limit
from buzz.cli.identity import IdentityError, parse_secret_key, resolve_auth_tag
from buzz.cli.output import EXIT_CODES, Context
from buzz.core import engram
from buzz.core.engram_patch import MalformedDiff, MultiFilePatch, NoOpPatch, PatchError, apply_patch
from buzz.core.event import Event
from buzz.core.keys import is_hex, public_key

_QUERY_FAILURE_CATEGORY = {"network": "network_error", "auth": "auth_error", "relay": "error"}
INPUT_MAX = engram.PLAINTEXT_MAX  # bytes of stdin / patch input; one more byte is refused
RELAY_TIMEOUT_S = 10.0


# -- errors -----------------------------------------------------------------------------------
class MemError(Exception):
    """A `buzz mem` failure: `category` (engram.md §12.1) decides the exit code (§12.2)."""

    def __init__(self, category: str, message: str, relay_message: str | None = None) -> None:
        super().__init__(message)
        self.category = category
        self.message = message
        self.relay_message = relay_message

    @classmethod
    def of_query(cls, exc: QueryFailed) -> MemError:
        return cls(_QUERY_FAILURE_CATEGORY[exc.cause], exc.message, exc.relay_message)


def error_object(exc: MemError) -> dict[str, Any]:
    """The JSON error object of §12.1: {"error", "message", "retryable"[, "relay_message"]}."""
    payload: dict[str, Any] = {
        "error": exc.category,
        "message": exc.message,
        "retryable": exc.category == "network_error",
    }
    if exc.relay_message is not None:
        payload["relay_message"] = exc.relay_message
    return payload


def as_mem_error(exc: Exception) -> MemError | None:
    """The MemError a `buzz mem` command reports for `exc` (MemError, IdentityError or
    QueryFailed), or None for any other exception."""
    if isinstance(exc, MemError):
        return exc
    if isinstance(exc, IdentityError):
        return MemError(exc.category, exc.message)
    if isinstance(exc, QueryFailed):
        return MemError.of_query(exc)
    return None


def _fail(exc: MemError) -> NoReturn:
    payload = error_object(exc)
    sys.stdout.flush()
    sys.stderr.write(orjson.dumps(payload).decode() + "\n")
    sys.stderr.flush()
    raise SystemExit(EXIT_CODES[exc.category])


def _user_error(message: str) -> MemError:
    return MemError("user_error", message)


@contextlib.contextmanager
def _parser_errors_exit_1() -> Iterator[None]:
    """Argument-parser errors are `user_error`, exit 1, never click's 2 (§12.2)."""
    try:
        yield
    except click.exceptions.NoArgsIsHelpError:
        _fail(_user_error("missing command: one of ls, get, hash, set, patch, rm (see buzz mem --help)"))
    except click.UsageError as exc:
        _fail(_user_error(exc.format_message()))


class _MemGroup(click.Group):
    def make_context(self, *args: Any, **kwargs: Any) -> click.Context:
        with _parser_errors_exit_1():
            return super().make_context(*args, **kwargs)

    def invoke(self, ctx: click.Context) -> Any:
        with _parser_errors_exit_1():
            return super().invoke(ctx)


def _command(fn: Callable[..., Awaitable[None]]) -> Callable[..., None]:
    """Run an async command body; turn every expected failure into its JSON error and exit."""

    @functools.wraps(fn)
    def run(*args: Any, **kwargs: Any) -> None:
        try:
            asyncio.run(fn(*args, **kwargs))
        except MemError as exc:
            _fail(exc)
        except IdentityError as exc:
            _fail(MemError(exc.category, exc.message))
        except QueryFailed as exc:
            _fail(MemError.of_query(exc))

    return run


# -- identity and perspective (§12.3) ---------------------------------------------------------
@dataclass(frozen=True, slots=True)
class _Who:
    secret: str
    auth_tags: list[list[str]]
    pair: Pair


def _pubkey_flag(value: str, flag: str) -> str:
    key = value.strip().lower()
    if not is_hex(key, 64):
        raise _user_error(f"invalid {flag}: expected 64 hex characters")
    return key


def _resolve(ctx: Context, owner: str | None, agent: str | None = None) -> _Who:
    """Agent side by default (owner from --owner, else BUZZ_AUTH_TAG); owner side with --agent."""
    if owner is not None and agent is not None:
        raise _user_error("--owner and --agent are mutually exclusive")
    secret = parse_secret_key(ctx.private_key)
    me = public_key(secret)
    raw_tag = getattr(ctx, "auth_tag", None) or os.environ.get("BUZZ_AUTH_TAG")
    tag = resolve_auth_tag(raw_tag, secret)
    auth_tags = [tag] if tag is not None else []
    if agent is not None:
        flag, other = "--agent", _pubkey_flag(agent, "--agent")
        if other == me:
            raise _user_error("--agent must differ from your own pubkey (you would be reading as the agent)")
        pair = Pair.as_owner(secret, me, other)
    else:
        if owner is not None:
            flag, other = "--owner", _pubkey_flag(owner, "--owner")
        elif tag is not None:
            flag, other = "BUZZ_AUTH_TAG", tag[1]
        else:
            raise _user_error("no owner: pass --owner <64 hex> or set BUZZ_AUTH_TAG (the agent's NIP-OA tag)")
        pair = Pair.as_agent(secret, me, other)
    try:
        pair.check_keys()
    except engram.InvalidKey as exc:
        raise _user_error(f"invalid {flag}: {exc.reason}") from None
    return _Who(secret, auth_tags, pair)


def _slug(text: str) -> str:
    try:
        return engram.normalize_slug(text)
    except engram.InvalidSlug as exc:
        raise _user_error(f"invalid slug: {exc.reason}") from None


@contextlib.asynccontextmanager
async def _memory(ctx: Context, who: _Who) -> AsyncIterator[Memory]:
    async with connect(ctx.relay_url, who.secret, auth_tags=who.auth_tags, timeout=RELAY_TIMEOUT_S) as client:
        yield Memory(client, who.pair)


# -- reads ------------------------------------------------------------------------------------
def _not_found(slug: str, outcome: engram.HeadOutcome) -> MemError:
    if isinstance(outcome, engram.AllInvalid):
        return MemError(
            "not_found",
            f"not found: {slug} (skipped {outcome.count} invalid candidates: {outcome.last_error})",
        )
    return MemError("not_found", f"not found: {slug}")


def _value_of(slug: str, outcome: engram.HeadOutcome) -> str:
    """The live text at `slug`; raises not_found for absent, all-invalid or tombstoned."""
    if not isinstance(outcome, engram.Found):
        raise _not_found(slug, outcome)
    if outcome.body.is_tombstone:
        raise MemError("not_found", f"tombstoned: {slug}")
    text = outcome.body.text
    assert text is not None
    return text


async def _read_value(ctx: Context, slug: str, owner: str | None, agent: str | None) -> str:
    who = _resolve(ctx, owner, agent)
    async with _memory(ctx, who) as memory:
        return _value_of(slug, await memory.head(slug))


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _write_stdout(data: bytes) -> None:
    sys.stdout.buffer.write(data)
    sys.stdout.flush()


def _note(text: str) -> None:
    sys.stderr.write(text + "\n")
    sys.stderr.flush()


# -- writes -----------------------------------------------------------------------------------
def _body(slug: str, value: str | None) -> engram.Body:
    if slug == engram.CORE_SLUG:
        assert value is not None
        return engram.CoreBody(value)
    return engram.MemoryBody(slug, value)


def _head_created_at(outcome: engram.HeadOutcome) -> int | None:
    return outcome.event.created_at if isinstance(outcome, engram.Found) else None


async def _write(memory: Memory, slug: str, value: str | None, head_created_at: int | None) -> Event:
    """§12.8 steps 5–7: monotonic created_at, poison check, build, submit. Returns the event."""
    now = int(time.time())
    created_at = engram.monotonic_created_at(now, head_created_at)
    if engram.is_clock_poisoned(created_at, now):
        raise MemError(
            "conflict",
            f"the head of {slug} has created_at {head_created_at}, more than "
            f"{engram.CLOCK_POISON_MARGIN} s ahead of this clock ({now}); refusing to write",
        )
    try:
        event = memory.build(_body(slug, value), created_at)
    except engram.EngramError as exc:
        raise MemError("error", f"build event failed: {exc.reason}") from None
    result = await memory.publish(event)
    if not result.accepted:
        raise MemError("error", f"relay rejected the write: {result.message}", result.message)
    if is_duplicate(result):
        raise MemError("conflict", f"write lost to a newer head of {slug}: {result.message}", result.message)
    return event


def _read_input(stream: Any, what: str) -> bytes:
    data = stream.read(INPUT_MAX + 1)
    if len(data) > INPUT_MAX:
        raise _user_error(f"{what} exceeds {INPUT_MAX} bytes")
    return data


# -- the group --------------------------------------------------------------------------------
@click.group(cls=_MemGroup)
def mem() -> None:
    """Agent memory: encrypted engrams shared by an agent and its owner (engram.md).

    \b
    Example:
      buzz mem set core "I am Ada, the release bot for team X."
      buzz mem set notes/2026-05-12 - < notes.md
      buzz mem ls
      buzz mem get core
      buzz --private-key <owner> mem ls --agent <agent hex>
    """


_owner_option = click.option(
    "--owner", default=None, help="Owner pubkey (64 hex); default: BUZZ_AUTH_TAG's owner."
)
_agent_option = click.option(
    "--agent", default=None, help="Read as the owner: the agent pubkey (64 hex) whose memory to read."
)


@mem.command("ls")
@_owner_option
@_agent_option
@click.option("--json", "as_json", is_flag=True, help="Accepted for compatibility; output is always JSON.")
@click.pass_obj
@_command
async def ls_cmd(ctx: Context, owner: str | None, agent: str | None, as_json: bool) -> None:
    """List live memory entries as a JSON array of {slug, event_id, created_at}.

    \b
    Example:
      buzz mem ls
    """
    listing = await memory_listing(ctx, owner, agent)
    _write_stdout(orjson.dumps([e.to_dict() for e in listing.entries]) + b"\n")
    if listing.skipped:
        _note(f"warning: skipped {listing.skipped} invalid or undecryptable records")
    max_limit = await relay_max_limit(ctx.relay_url)
    if max_limit is None:
        _note(
            "warning: the relay's page limit is unknown (NIP-11 unavailable); the listing may be incomplete"
        )
    elif engram.is_listing_truncated(listing.answered, engram.LIST_QUERY_LIMIT, max_limit):
        _note(
            f"warning: listing may be truncated: the relay returned {listing.answered} events, its page "
            f"limit is {max_limit} and Nostr has no pagination"
        )


@mem.command("get")
@click.argument("slug")
@_owner_option
@_agent_option
@click.pass_obj
@_command
async def get_cmd(ctx: Context, slug: str, owner: str | None, agent: str | None) -> None:
    """Print the value of SLUG exactly (no newline added).

    \b
    Example:
      buzz mem get core
    """
    slug = _slug(slug)
    value = await _read_value(ctx, slug, owner, agent)
    _write_stdout(value.encode("utf-8"))


@mem.command("hash")
@click.argument("slug")
@_owner_option
@_agent_option
@click.pass_obj
@_command
async def hash_cmd(ctx: Context, slug: str, owner: str | None, agent: str | None) -> None:
    """Print the SHA-256 (hex) of what `get SLUG` prints, for `patch --base-hash`.

    \b
    Example:
      buzz mem hash notes/todo
    """
    slug = _slug(slug)
    value = await _read_value(ctx, slug, owner, agent)
    _write_stdout(_sha256(value).encode() + b"\n")


@mem.command("set")
@click.argument("slug")
@click.argument("value")
@_owner_option
@click.option("--allow-empty", is_flag=True, help="Allow an empty value read from stdin.")
@click.pass_obj
@_command
async def set_cmd(ctx: Context, slug: str, value: str, owner: str | None, allow_empty: bool) -> None:
    """Write VALUE to SLUG (`-` reads stdin, kept byte for byte).

    \b
    Example:
      buzz mem set core "I am Ada."
      buzz mem get notes/a | buzz mem set notes/b -
    """
    slug = _slug(slug)
    if value == "-":
        data = _read_input(sys.stdin.buffer, "stdin")
        try:
            value = data.decode("utf-8")
        except UnicodeDecodeError:
            raise MemError("error", "stdin is not valid UTF-8") from None
        if not value and not allow_empty:
            raise _user_error(
                f"stdin is empty: pass --allow-empty to write an empty value, or run `buzz mem rm {slug}` to delete it"
            )
    event = await memory_set(ctx, slug, value, owner)
    _note(f"wrote {slug} (event {event.id}, created_at {event.created_at})")


@mem.command("patch")
@click.argument("slug")
@click.option("--patch-file", default=None, help="Read the unified diff from this file instead of stdin.")
@click.option(
    "--base-hash", default=None, help="SHA-256 of the value the diff was made against (buzz mem hash)."
)
@click.option("--no-base-hash", is_flag=True, help="Apply without checking the base hash.")
@click.option("--dry-run", is_flag=True, help="Check and apply locally; publish nothing.")
@click.option("--allow-empty", is_flag=True, help="Allow a patch that empties the value.")
@_owner_option
@click.pass_obj
@_command
async def patch_cmd(
    ctx: Context,
    slug: str,
    patch_file: str | None,
    base_hash: str | None,
    no_base_hash: bool,
    dry_run: bool,
    allow_empty: bool,
    owner: str | None,
) -> None:
    """Apply a one-file unified diff to SLUG at exactly its line numbers (no fuzz, no offset).

    \b
    Example:
      buzz mem get notes/todo > todo && cp todo todo.new && $EDITOR todo.new
      diff -u todo todo.new | buzz mem patch notes/todo --base-hash "$(buzz mem hash notes/todo)"
    """
    slug = _slug(slug)
    expected = _base_hash(slug, base_hash, no_base_hash)
    diff = _read_diff(patch_file)
    who = _resolve(ctx, owner)
    async with _memory(ctx, who) as memory:
        head = await memory.head(slug)
        current = _value_of(slug, head)
        if expected is not None and _sha256(current) != expected:
            raise MemError(
                "conflict",
                f"base hash mismatch: {slug} has sha256 {_sha256(current)}, --base-hash is {expected}",
            )
        result = _patched(current, diff)
        if len(result.encode("utf-8")) > engram.PLAINTEXT_MAX:
            raise _user_error(f"patched value exceeds {engram.PLAINTEXT_MAX} bytes")
        if not result and not allow_empty:
            raise _user_error(f"the patch empties {slug}: pass --allow-empty to write an empty value")
        _note(diff.rstrip("\n") + "\n")
        new_hash = _sha256(result)
        if dry_run:
            _note(f"dry run: {slug} unchanged; the write would produce sha256 {new_hash}")
            return
        event = await _write(memory, slug, result, _head_created_at(head))
    _note(f"wrote {slug} (event {event.id}, created_at {event.created_at}, sha256 {new_hash})")


def _base_hash(slug: str, base_hash: str | None, no_base_hash: bool) -> str | None:
    if base_hash is not None and no_base_hash:
        raise _user_error("--base-hash and --no-base-hash are mutually exclusive")
    if base_hash is None and not no_base_hash:
        raise _user_error(
            f"patch needs --base-hash: run `buzz mem hash {slug}` and pass its output, "
            "or pass --no-base-hash to skip the check"
        )
    if base_hash is None:
        return None
    value = base_hash.strip().lower()
    if not is_hex(value, 64):
        raise _user_error("invalid --base-hash: expected 64 hex characters")
    return value


def _read_diff(patch_file: str | None) -> str:
    if patch_file is not None:
        try:
            with open(patch_file, "rb") as f:
                data = _read_input(f, "patch input")
        except OSError as exc:
            raise _user_error(f"cannot read --patch-file: {exc.strerror or exc}") from None
    else:
        data = _read_input(sys.stdin.buffer, "patch input")
    try:
        diff = data.decode("utf-8")
    except UnicodeDecodeError:
        raise _user_error("patch input is not valid UTF-8") from None
    if not diff:
        raise _user_error("patch input is empty")
    return diff


def _patched(current: str, diff: str) -> str:
    """engram.md §12.9 steps 6–10 with their user_error messages."""
    try:
        return apply_patch(current, diff)
    except (MultiFilePatch, NoOpPatch) as exc:
        raise _user_error(str(exc)) from None
    except MalformedDiff as exc:
        raise _user_error(f"malformed unified diff: {exc}") from None
    except PatchError as exc:
        raise _user_error(f"patch does not apply (no fuzz and no offset are allowed): {exc}") from None


@mem.command("rm")
@click.argument("slug")
@_owner_option
@click.pass_obj
@_command
async def rm_cmd(ctx: Context, slug: str, owner: str | None) -> None:
    """Tombstone SLUG (core cannot be removed; empty it with `set core ''`).

    \b
    Example:
      buzz mem rm notes/old
    """
    slug = _slug(slug)
    if slug == engram.CORE_SLUG:
        raise _user_error("core cannot be tombstoned; to empty it run: buzz mem set core ''")
    who = _resolve(ctx, owner)
    async with _memory(ctx, who) as memory:
        head = await memory.head(slug)
        event = await _write(memory, slug, None, _head_created_at(head))
    _note(f"tombstoned {slug} (event {event.id}, created_at {event.created_at})")


# -- shared with `buzz mcp` (agents.md §7: mem_get, mem_set, mem_ls) ---------------------------
# Each raises MemError, IdentityError or QueryFailed exactly as the commands do (`as_mem_error`).
def memory_slug(text: str) -> str:
    """`normalize_slug` (engram.md §12.4); raises MemError `user_error` "invalid slug: …"."""
    return _slug(text)


async def memory_value(ctx: Context, slug: str) -> str | None:
    """What `mem get SLUG` prints (agent side), or None where it reports not_found (absent,
    tombstoned, or every candidate invalid). `slug` must be normalized (`memory_slug`)."""
    try:
        return await _read_value(ctx, slug, None, None)
    except MemError as exc:
        if exc.category == "not_found":
            return None
        raise


async def memory_set(ctx: Context, slug: str, value: str, owner: str | None = None) -> Event:
    """§12.8 steps 3–7 for a normalized `slug`: fetch the head, write `value`, return the event."""
    who = _resolve(ctx, owner)
    async with _memory(ctx, who) as memory:
        head = await memory.head(slug)
        return await _write(memory, slug, value, _head_created_at(head))


async def memory_listing(ctx: Context, owner: str | None = None, agent: str | None = None) -> Listing:
    """§9 listing of the resolved pair (live memory entries, core excluded, sorted by slug)."""
    who = _resolve(ctx, owner, agent)
    async with _memory(ctx, who) as memory:
        return await memory.listing()
