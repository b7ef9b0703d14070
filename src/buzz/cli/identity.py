"""CLI identity helpers shared by every command that signs or connects (agents.md §1.3, §1.5, §2.1).

- `parse_pubkey`: a public key given as 64 hex or `npub1…` → 64 lowercase hex.
- `resolve_auth_tag`: `BUZZ_AUTH_TAG` / `--auth-tag` → the verified NIP-OA tag (engram.md §14.6:
  normalize the shorthand, parse strictly, verify against the holder's own pubkey; no clause is
  evaluated here, time bounds are the relay's business at admission).
- `auth_tags_for`: the `auth_tags=` argument of `buzz.client.RelayClient` for a CLI context, so
  the NIP-42 AUTH event carries exactly one `auth` tag when one is configured (§1.5).

Errors are `IdentityError`s that carry the CLI error category and exit code of agents.md §2.1
(`user_error` 1, `auth_error`/`key_error` 3); `fail_identity` prints one and exits.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import NoReturn

import orjson

from buzz.core import nip19
from buzz.core.keys import public_key
from buzz.core.nip_oa import InvalidAuthTag, normalize_auth_tag_input, parse_auth_tag, verify_auth_tag

EXIT_USER = 1
EXIT_AUTH = 3


@dataclass
class IdentityError(Exception):
    """A key or attestation problem: `category` and `exit_code` as in agents.md §2.1."""

    category: str
    message: str
    exit_code: int

    def __str__(self) -> str:
        return self.message


def parse_secret_key(value: str | None) -> str:
    """A secret key as 64 hex or `nsec1…` → 64 lowercase hex (agents.md §1.1 item 2).

    Raises IdentityError: `auth_error` (exit 3) when missing, `key_error` (exit 3) when invalid.
    The message never contains the key.
    """
    if value is None or not value.strip():
        raise IdentityError(
            "auth_error", "no private key: pass --private-key or set BUZZ_PRIVATE_KEY", EXIT_AUTH
        )
    try:
        secret = nip19.parse_key_text(value, "nsec")
    except ValueError:
        raise IdentityError(
            "key_error", "invalid private key: expected 64 hex characters or nsec1…", EXIT_AUTH
        ) from None
    try:
        public_key(secret)
    except ValueError:
        raise IdentityError(
            "key_error", "invalid private key: not a valid secp256k1 secret", EXIT_AUTH
        ) from None
    return secret


def parse_pubkey(value: str, what: str = "pubkey") -> str:
    """A public key as 64 hex (any case) or `npub1…` → 64 lowercase hex (agents.md §1.1 item 2).

    Raises IdentityError (`user_error`, exit 1) naming `what`.
    """
    try:
        return nip19.parse_key_text(value, "npub")
    except ValueError as exc:
        raise IdentityError("user_error", f"invalid {what}: {exc}", EXIT_USER) from None


def resolve_auth_tag(raw: str | None, secret_key: str) -> list[str] | None:
    """The verified NIP-OA tag for the holder of `secret_key`, or None when `raw` is unset/blank.

    Steps of engram.md §14.6: trim, rewrite the unquoted shorthand, `parse_auth_tag`, then
    `verify_auth_tag(tag, own pubkey)` (no clause evaluated). Raises IdentityError
    (`auth_error`, exit 3) for a value that fails either step.
    """
    if raw is None or not raw.strip():
        return None
    try:
        tag = parse_auth_tag(normalize_auth_tag_input(raw))
        verify_auth_tag(tag.to_list(), public_key(secret_key))
    except InvalidAuthTag as exc:
        raise IdentityError("auth_error", f"invalid BUZZ_AUTH_TAG: {exc.reason}", EXIT_AUTH) from None
    return tag.to_list()


def auth_tags_for(auth_tag: str | None, secret_key: str) -> list[list[str]]:
    """`RelayClient(..., auth_tags=…)` for a CLI identity: `[tag]` or `[]` (agents.md §1.5).

    Raises IdentityError like `resolve_auth_tag`.
    """
    tag = resolve_auth_tag(auth_tag, secret_key)
    return [tag] if tag is not None else []


def cli_error(category: str, message: str, exit_code: int) -> NoReturn:
    """Print `{"error": category, "message", "retryable": false}` as one line on stderr and exit
    with `exit_code` (agents.md §2.1 item 2)."""
    payload = {"error": category, "message": message, "retryable": False}
    sys.stderr.write(orjson.dumps(payload).decode() + "\n")
    raise SystemExit(exit_code)


def fail_identity(exc: IdentityError) -> NoReturn:
    """`cli_error` for an IdentityError."""
    cli_error(exc.category, exc.message, exc.exit_code)
