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
relay's own verdict text when there is one (`restricted: …`, `duplicate: …`).
"""

from __future__ import annotations

from typing import Any, ClassVar


class WorkspaceError(Exception):
    """Base of every API failure: `category`, `message`, `retryable`, `relay_message`."""

    category: ClassVar[str] = "error"
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
    category = "error"


class Conflict(Refused):
    category = "conflict"


def refusal(relay_message: str, message: str, *, retryable: bool = False) -> Refused:
    """A relay verdict: `Conflict` for `duplicate:` and `conflict:` (workflows.md §2.2 item 4), else `Refused` (agents.md §2.1 exits 4/5)."""
    cls = Conflict if relay_message.startswith(("duplicate:", "conflict:")) else Refused
    return cls(message, retryable=retryable, relay_message=relay_message)
