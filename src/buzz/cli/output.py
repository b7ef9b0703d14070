"""CLI output and errors (agents.md §2): JSON on stdout, JSON errors on stderr, exit codes."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any, NoReturn

import orjson

# Exit codes (agents.md §2).
EXIT_OK = 0
EXIT_ERROR = 1
EXIT_USAGE = 2


@dataclass
class Context:
    relay_url: str
    private_key: str | None
    fmt: str = "json"
    auth_tag: str | None = None  # raw --auth-tag / BUZZ_AUTH_TAG; resolve with buzz.cli.identity


def emit(ctx: Context, value: Any) -> None:
    """Write `value` to stdout as JSON (pretty) or compact JSON, one document."""
    opts = orjson.OPT_INDENT_2 if ctx.fmt == "json" else 0
    sys.stdout.write(orjson.dumps(value, option=opts).decode() + "\n")
    sys.stdout.flush()


def fail(message: str, code: int = EXIT_ERROR, **details: Any) -> NoReturn:
    """Write `{"error": message, …}` to stderr and exit with `code`."""
    sys.stderr.write(orjson.dumps({"error": message, **details}).decode() + "\n")
    raise SystemExit(code)
