"""CLI output and errors (agents.md §2): JSON on stdout, JSON errors on stderr, exit codes."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any, NoReturn

import orjson

from buzz.cli import interrupt

# The one table of failure categories → exit codes (agents.md §2.1, engram.md §12.1–12.2).
EXIT_CODES: dict[str, int] = {
    "user_error": 1,
    "not_found": 1,
    "network_error": 2,
    "relay_error": 2,
    # `relay serve` refusing its own configuration (a bad --bind, a taken port): the exit code
    # operators expect from a usage error, under a name of its own so the table holds.
    "usage_error": 2,
    "auth_error": 3,
    "key_error": 3,
    "error": 4,
    "conflict": 5,
    # `buzz jobs request --wait`: the job ended, but failed (6) or was cancelled (7) (its
    # document is still printed on stdout); a script can tell either from a refused request (4).
    "job_failed": 6,
    "job_cancelled": 7,
    # Ctrl-C (SIGINT): 128 + 2, as a shell reports it; written by buzz.cli.interrupt, which
    # runs before this module is loaded and so keeps the number itself (EXIT_INTERRUPTED).
    "interrupted": 130,
}


@dataclass
class Context:
    relay_url: str
    private_key: str | None
    fmt: str = "json"
    auth_tag: str | None = None  # raw --auth-tag / BUZZ_AUTH_TAG; resolve with buzz.cli.identity
    relay_source: str = "--relay"  # where relay_url came from, named when it is malformed
    auth_tag_source: str = "BUZZ_AUTH_TAG"  # where auth_tag came from, named when it is invalid


def emit(ctx: Context, value: Any) -> None:
    """Write `value` to stdout as JSON (pretty) or compact JSON, one document."""
    # Non-string keys (e.g. a huddle roster keyed by peer_index) are written as strings.
    opts = orjson.OPT_NON_STR_KEYS | (orjson.OPT_INDENT_2 if ctx.fmt == "json" else 0)
    sys.stdout.write(orjson.dumps(value, option=opts).decode() + "\n")
    sys.stdout.flush()


def fail(message: str, category: str = "user_error", **details: Any) -> NoReturn:
    """Write `{"error": <category>, "message": …, "retryable": …, **details}` to stderr and exit
    with the category's code (EXIT_CODES); `retryable` is true only for network failures.
    After Ctrl-C its line is the one: exit 130 without another."""
    if interrupt.interrupted():
        raise SystemExit(interrupt.EXIT_INTERRUPTED)
    payload = {"error": category, "message": message, "retryable": category == "network_error", **details}
    sys.stderr.write(orjson.dumps(payload).decode() + "\n")
    raise SystemExit(EXIT_CODES[category])
