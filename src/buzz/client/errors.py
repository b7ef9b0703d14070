"""The one error tree of the workspace client API (agents.md §2.1 item 2, engram.md §12.1).

Every failure the API reports is a `WorkspaceError`; its subclass says what went wrong and its
`category` is the machine name the faces print in their error object
`{"error": category, "message", "retryable"[, "relay_message"]}`. Exit codes are not the API's
business: the CLI maps categories to codes in its one table (`buzz.cli.output.EXIT_CODES`).

    WorkspaceError                       "error"          anything else (kept generic)
    ├── UserError                        "user_error"     a bad value from the caller
    ├── NotFound                         "not_found"      a missing event, channel or engram
    ├── NetworkError                     "network_error"  no answer (transport, DNS, timeout)
    ├── RelayUnavailable                 "relay_error"    an HTTP status without a relay verdict
    ├── AuthError                        "auth_error"     missing key or tag, AUTH refused, 401/403,
    │                                                     a verdict starting `auth-required:`
    ├── InvalidKey                       "key_error"      a key that does not parse or is off-curve
    └── Refused                          "<prefix>"       the relay said no (`OK false`, CLOSED):
        │                                                 the verdict's NIP-01 prefix, one of
        │                                                 REFUSAL_CATEGORIES; "error" without one
        └── Conflict                     "conflict"       `duplicate:`, base-hash mismatch, lost
                                                          race, clock-poisoned engram head

`retryable` is true for network failures, for HTTP 429/502/503/504 and for `rate-limited:`;
`relay_message` is the relay's own verdict text when there is one (`restricted: …`,
`duplicate: …`).
"""

from __future__ import annotations

from typing import Any, ClassVar

# The NIP-01 prefixes of a relay verdict (relay.md §7.8) that name a refusal's category as they
# are; `duplicate:` is a Conflict and `auth-required:` an AuthError (decision 107).
REFUSAL_CATEGORIES = frozenset({"blocked", "rate-limited", "invalid", "pow", "restricted", "error"})


def verdict_prefix(relay_message: str | None) -> str | None:
    """`restricted` of `restricted: not a channel member`; None without a `word:` prefix."""
    if relay_message is None:
        return None
    word, colon, _ = relay_message.partition(":")
    return word if colon and word and " " not in word else None


class WorkspaceError(Exception):
    """Base of every API failure: `category`, `message`, `retryable`, `relay_message`."""

    category: str = "error"  # a class's category; a Refused instance narrows it to the prefix
    default_retryable: ClassVar[bool] = False

    def __init__(
        self, message: str, *, retryable: bool | None = None, relay_message: str | None = None
    ) -> None:
        super().__init__(message)
        self.message = message
        self.retryable = self.default_retryable if retryable is None else retryable
        self.relay_message = relay_message

    def __str__(self) -> str:
        return self.message

    def to_dict(self) -> dict[str, Any]:
        """The error object of agents.md §2.1 item 2: {"error", "message", "retryable"[,
        "relay_message"]}."""
        payload: dict[str, Any] = {
            "error": self.category,
            "message": self.message,
            "retryable": self.retryable,
        }
        if self.relay_message is not None:
            payload["relay_message"] = self.relay_message
        return payload


class UserError(WorkspaceError):
    category = "user_error"


class NotFound(WorkspaceError):
    category = "not_found"


class NetworkError(WorkspaceError):
    category = "network_error"
    default_retryable = True


class RelayUnavailable(WorkspaceError):
    category = "relay_error"


class AuthError(WorkspaceError):
    category = "auth_error"


class InvalidKey(WorkspaceError):
    category = "key_error"


class Refused(WorkspaceError):
    """The relay said no. `category` is the verdict's NIP-01 prefix when it is one of
    REFUSAL_CATEGORIES (`restricted`, `invalid`, `rate-limited`, …), else "error"; a
    `rate-limited:` verdict is retryable unless told otherwise."""

    category = "error"

    def __init__(
        self, message: str, *, retryable: bool | None = None, relay_message: str | None = None
    ) -> None:
        prefix = verdict_prefix(relay_message)
        if retryable is None and prefix == "rate-limited":
            retryable = True  # a quota: the same request succeeds later
        super().__init__(message, retryable=retryable, relay_message=relay_message)
        if type(self) is Refused and prefix in REFUSAL_CATEGORIES:
            self.category = prefix


class Conflict(Refused):
    category = "conflict"


def refusal(relay_message: str, message: str, *, retryable: bool | None = None) -> WorkspaceError:
    """A relay verdict: `Conflict` for `duplicate:` (exit 5), AuthError for `auth-required:`
    (exit 3), else `Refused` with the prefix as its category (exit 4; agents.md §2.1)."""
    prefix = verdict_prefix(relay_message)
    if prefix == "duplicate":
        return Conflict(message, retryable=retryable, relay_message=relay_message)
    if prefix == "auth-required":
        return AuthError(message, retryable=retryable, relay_message=relay_message)
    return Refused(message, retryable=retryable, relay_message=relay_message)
