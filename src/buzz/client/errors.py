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
    ├── AuthError                        "auth_error"     missing key or tag, AUTH refused, 401/403
    ├── InvalidKey                       "key_error"      a key that does not parse or is off-curve
    └── Refused                          "error"          the relay said no (`OK false`, CLOSED)
        └── Conflict                     "conflict"       `duplicate:`, base-hash mismatch, lost
                                                          race, clock-poisoned engram head

`retryable` is true for network failures and for HTTP 429/502/503/504; `relay_message` is the
relay's own verdict text when there is one (`restricted: …`, `duplicate: …`). A relay verdict
also carries `refusal`, its NIP-01 prefix as a machine name (REFUSALS: `invalid`, `restricted`,
`blocked`, `rate-limited`, `duplicate`, `auth-required`, `pow`, `conflict`, `error`; `error` for
a text without a known prefix), and `hint`, what that prefix means for the caller: the category
(`error`, exit 4) is the spec's and stays as broad as it is (docs/decisions.md 152).
"""

from __future__ import annotations

from typing import Any, ClassVar


class WorkspaceError(Exception):
    """Base of every API failure: `category`, `message`, `retryable`, `relay_message`."""

    category: ClassVar[str] = "error"
    default_retryable: ClassVar[bool] = False
    # Whether the error object names the verdict's prefix and hint: not for `not_found`, which
    # the client concluded beyond the relay's words (a channel that does not exist is refused
    # as `restricted:`, and a membership hint beside "not found" would point elsewhere).
    names_refusal: ClassVar[bool] = True

    def __init__(
        self,
        message: str,
        *,
        retryable: bool | None = None,
        relay_message: str | None = None,
        verdict: bool = True,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.retryable = self.default_retryable if retryable is None else retryable
        self.relay_message = relay_message
        # False when `relay_message` is not a NIP-01 verdict (a Blossom route's X-Reason, whose
        # HTTP status already chose the category): no prefix to name, so no refusal or hint.
        self.verdict = verdict

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
        if self.relay_message is not None and self.names_refusal and self.verdict:
            prefix = refusal_of(self.relay_message)
            payload["refusal"] = prefix
            payload["hint"] = REFUSALS[prefix]
        return payload


# NIP-01's machine-readable prefixes of `OK false` / `CLOSED` (and buzz's `conflict:`,
# workflows.md §2.2 item 4), each with what it means for the one who sent the event or query.
REFUSALS: dict[str, str] = {
    "invalid": "the relay found the event or request malformed or against its rules; fix it before sending again",
    "restricted": "you may not do this here (membership, role or channel policy)",
    "blocked": "the relay blocks this key or this kind of content",
    "rate-limited": "too many requests: wait, then try again",
    "duplicate": "the relay already has this (or an equal) event",
    "auth-required": "the relay wants authentication first (NIP-42 or NIP-98)",
    "pow": "the event lacks the proof of work the relay asks for",
    "conflict": "someone changed it first: read it again, then retry",
    "error": "the relay refused it or failed to handle it: its own words are in relay_message",
}


def refusal_of(relay_message: str) -> str:
    """The NIP-01 prefix of a relay verdict, `error` when it has none the table knows."""
    prefix, sep, _ = relay_message.partition(":")
    prefix = prefix.strip().lower()
    return prefix if sep and prefix in REFUSALS else "error"


class UserError(WorkspaceError):
    category = "user_error"


class NotFound(WorkspaceError):
    category = "not_found"
    names_refusal = False


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
    category = "error"


class Conflict(Refused):
    category = "conflict"


def refusal(relay_message: str, message: str, *, retryable: bool = False) -> Refused:
    """A relay verdict: `Conflict` for `duplicate:` and `conflict:` (workflows.md §2.2 item 4), else `Refused` (agents.md §2.1 exits 4/5)."""
    cls = Conflict if relay_message.startswith(("duplicate:", "conflict:")) else Refused
    return cls(message, retryable=retryable, relay_message=relay_message)
