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

A channel the caller cannot see — it does not exist, or it is private and they are not in it —
is one answer everywhere: `NotFound` "channel not found: <id>" (exit 1), whatever the command.
When the relay refuses a request about one channel (relay.md §4.3, §6.3: mostly `restricted:
not a channel member`, but a join and an admin edit have texts of their own), the client asks
whether the channel's metadata (39000) is readable: when it is not, the refusal becomes
`channel_not_found` and the relay's text is dropped (it could tell a private channel from a
missing one). A readable channel keeps the relay's refusal (e.g. writing to an open channel
one has not joined).
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


def is_channel_refusal(relay_message: str | None) -> bool:
    """True for a relay verdict that, about a channel the caller cannot see, means "not found":
    any refusal but `duplicate:` (the relay's texts differ — `restricted: not a channel member`,
    `invalid: channel not found`, `restricted: channel is private`, an authorization text for
    9002 on a private channel — and must not show through)."""
    return relay_message is not None and not relay_message.startswith("duplicate:")


def channel_not_found(channel_id: str) -> NotFound:
    """The one error for a channel that does not exist or that the caller may not see."""
    return NotFound(f"channel not found: {channel_id}")


def refusal(relay_message: str, message: str, *, retryable: bool = False) -> Refused:
    """A relay verdict: `Conflict` for `duplicate:`, else `Refused` (agents.md §2.1 exits 4/5)."""
    cls = Conflict if relay_message.startswith("duplicate:") else Refused
    return cls(message, retryable=retryable, relay_message=relay_message)
