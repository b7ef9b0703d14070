"""Identity parsing for commands that do not run through `buzz.cli.common.run` (keys, huddle):
the client API's parsers (`buzz.client.identity`), with their failures as `IdentityError`s that
carry the CLI exit code of their category (`buzz.cli.output.EXIT_CODES`: `user_error` 1,
`auth_error`/`key_error` 3); `fail_identity` prints one and exits.

- `parse_secret_key`, `parse_pubkey`, `resolve_auth_tag`: as in `buzz.client.identity`;
- `auth_tags_for`: the `auth_tags=` argument of `buzz.client.RelayClient` for a CLI context, so
  the NIP-42 AUTH event carries exactly one `auth` tag when one is configured (agents.md §1.5).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import NoReturn, ParamSpec, TypeVar

from buzz.cli.output import EXIT_CODES, fail
from buzz.client import identity as api
from buzz.client.errors import WorkspaceError

P = ParamSpec("P")
R = TypeVar("R")


@dataclass
class IdentityError(Exception):
    """A key or attestation problem: `category` and `exit_code` as in agents.md §2.1."""

    category: str
    message: str
    exit_code: int

    def __str__(self) -> str:
        return self.message


def _cli(fn: Callable[P, R]) -> Callable[P, R]:
    def wrapped(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return fn(*args, **kwargs)
        except WorkspaceError as exc:
            raise IdentityError(exc.category, exc.message, EXIT_CODES[exc.category]) from None

    wrapped.__doc__ = fn.__doc__
    return wrapped


parse_secret_key = _cli(api.parse_secret_key)
parse_pubkey = _cli(api.parse_pubkey)
resolve_auth_tag = _cli(api.resolve_auth_tag)


def auth_tags_for(auth_tag: str | None, secret_key: str, source: str = "BUZZ_AUTH_TAG") -> list[list[str]]:
    """`RelayClient(..., auth_tags=…)` for a CLI identity: `[tag]` or `[]` (agents.md §1.5).
    Raises IdentityError like `resolve_auth_tag`, naming `source`."""
    tag = resolve_auth_tag(auth_tag, secret_key, source)
    return [tag] if tag is not None else []


def cli_error(category: str, message: str) -> NoReturn:
    """Print `{"error": category, "message", "retryable": false}` as one line on stderr and exit
    with the category's code (agents.md §2.1 item 2)."""
    fail(message, category)


def fail_identity(exc: IdentityError) -> NoReturn:
    """`cli_error` for an IdentityError."""
    cli_error(exc.category, exc.message)
