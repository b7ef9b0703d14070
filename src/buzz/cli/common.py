"""Shared plumbing of the workspace commands (agents.md §2.1): the one place that runs a command.

A command body is `async def body(ws: Workspace) -> <JSON value>` over the client API
(`buzz.client.workspace`); `run(ctx, body)` resolves the identity, opens the workspace, runs the
body, prints its result as the one JSON document on stdout, and turns every failure into one
JSON line on stderr plus the exit code of its category (`buzz.cli.output.EXIT_CODES`):

| Exit | Categories | From |
|---|---|---|
| 1 | `user_error`, `not_found` | bad values (a malformed relay URL too), missing events or channels |
| 2 | `network_error`, `relay_error` | no HTTP answer; HTTP status without a relay verdict |
| 3 | `auth_error`, `key_error` | missing/invalid key or auth tag; HTTP 401/403 |
| 4 | `error` | relay refusal (`OK false`, refused read), non-JSON answer |
| 5 | `conflict` | refusal with `duplicate:` |
| 6 | `job_failed` | `jobs request --wait`: the job failed |
| 7 | `job_cancelled` | `jobs request --wait`: the job was cancelled |
| 130 | `interrupted` | Ctrl-C, at any moment (`buzz.cli.interrupt`) |
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import orjson

from buzz.cli import interrupt
from buzz.cli.groups import report
from buzz.cli.output import Context, emit
from buzz.client.errors import UserError, WorkspaceError
from buzz.client.identity import Identity
from buzz.client.values import Text
from buzz.client.workspace import Workspace
from buzz.core.nip98 import http_base


def as_failure(exc: BaseException) -> WorkspaceError:
    """The WorkspaceError a face reports for any exception: itself, `user_error` for an
    argument that is not valid UTF-8 (e.g. `--content $'\\xff'`), else `error` "unexpected"."""
    if isinstance(exc, WorkspaceError):
        return exc
    if isinstance(exc, UnicodeEncodeError):
        return UserError("an argument is not valid UTF-8 text")
    return WorkspaceError(f"unexpected failure: {type(exc).__name__}: {exc}")


def relay_url_of(ctx: Context) -> str:
    """`ctx.relay_url` once it passed the URL checks every face shares (scheme, host, port:
    `buzz.core.nip98.http_base`). A malformed one is a UserError (exit 1, not retryable) whose
    message starts with where the URL came from (`--relay`, `BUZZ_RELAY_URL`): it is the
    user's to fix, not the network's."""
    try:
        http_base(ctx.relay_url)
    except ValueError as exc:
        raise UserError(f"{ctx.relay_source}: {exc}") from None
    return ctx.relay_url


def checked_relay_url(ctx: Context) -> str:
    """`relay_url_of`, reported and exiting on failure: for commands that open their own
    connection (`buzz huddle`)."""
    try:
        return relay_url_of(ctx)
    except UserError as exc:
        report(exc)


def open_workspace(ctx: Context, identity: Identity) -> Workspace:
    """`Workspace` on `relay_url_of(ctx)` as `identity`. Raises UserError for a malformed URL."""
    return Workspace(relay_url_of(ctx), identity)


def identity_of(ctx: Context) -> Identity:
    """`--private-key` / `--auth-tag` (or their environment variables) parsed. Raises
    AuthError / InvalidKey."""
    return Identity.from_text(ctx.private_key, ctx.auth_tag, ctx.auth_tag_source)


def run(
    ctx: Context, body: Callable[[Workspace], Awaitable[Any]], render: Callable[[Any], None] | None = None
) -> None:
    """Resolve the identity, run `body` in the workspace, emit its result (or hand it to
    `render`, e.g. a table) or report a failure."""
    try:
        identity = identity_of(ctx)
    except WorkspaceError as exc:
        report(exc)

    async def main() -> Any:
        async with open_workspace(ctx, identity) as ws:
            return await body(ws)

    try:
        result = interrupt.run(main())
    except Exception as exc:  # agents.md §2.1: "anything else" is `error`, exit 4
        report(as_failure(exc))
    if render is not None:
        render(result)
    else:
        emit(ctx, result)


async def keyed(key: str, value: Awaitable[Any]) -> dict[str, Any]:
    """`{key: await value}`: the one-key JSON object a listing command prints."""
    return {key: await value}


def stream(ctx: Context, items: Callable[[Workspace], AsyncIterator[Any]]) -> None:
    """Like `run`, for an open-ended result: each item is one compact JSON line on stdout,
    flushed, until SIGINT / SIGTERM or a closed stdout (exit 0) or a failure (its JSON line
    and exit code)."""
    try:
        identity = identity_of(ctx)
    except WorkspaceError as exc:
        report(exc)

    async def main() -> None:
        task = asyncio.current_task()
        assert task is not None
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, task.cancel)
        try:
            async with open_workspace(ctx, identity) as ws:
                async for item in items(ws):
                    sys.stdout.write(orjson.dumps(item).decode() + "\n")
                    sys.stdout.flush()
        except asyncio.CancelledError:
            return  # stopped by a signal: a normal end
        except BrokenPipeError:  # the reader went away (`| head`): a normal end too
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())

    try:
        with interrupt.kept():  # Ctrl-C ends a stream normally (exit 0) once it runs
            asyncio.run(main())
    except Exception as exc:
        report(as_failure(exc))


def stdin_or(value: str, what: str = "content") -> Text:
    """`-` → a reader of all of stdin as UTF-8 (UserError otherwise) without its one final
    newline (`echo hi |` sends "hi", as `git commit -F -` does; a second newline stays);
    any other value itself."""
    if value != "-":
        return value

    def read() -> str:
        try:
            text = sys.stdin.buffer.read().decode("utf-8")
        except UnicodeDecodeError:
            raise UserError(f"{what} from stdin is not valid UTF-8") from None
        return text.removesuffix("\r\n") if text.endswith("\r\n") else text.removesuffix("\n")

    return read


def stdin_or_now(value: str, what: str = "content") -> str:
    """`stdin_or`, stdin read at once: for a command body that needs the text itself."""
    text = stdin_or(value, what)
    return text() if callable(text) else text
