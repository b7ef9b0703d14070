"""One exception tree for protocol outcomes; each class knows its NIP-01 message prefix.

    BuzzError
    ├── Invalid          "invalid:"        the client must change the event or filter
    │   ├── MalformedEvent   "invalid: malformed event: <reason>"  (relay.md §2.1)
    │   ├── InvalidId        "invalid: invalid event id: computed <x>, got <y>"  (§2.3)
    │   ├── InvalidSignature "invalid: invalid schnorr signature"  (§2.3)
    │   └── BadFilter        "invalid: bad filter: <reason>"  (§6.1)
    ├── Restricted       "restricted:"     policy or authorization refusal
    ├── AuthRequired     "auth-required:"  not authenticated, or an AUTH problem
    ├── Blocked          "blocked:"        banned pubkey
    ├── RateLimited      "rate-limited:"   quotas and saturation
    ├── ServerError      "error:"          server-side fault; never carries internals
    └── Duplicate        "duplicate:"      refused duplicate (OK false)

Raised by `buzz.core` (pure) and by the relay's gates; the relay turns them into `OK`/`CLOSED`
messages with `str(exc)` as the wire text (relay.md §7.8).

Fixed refusals are `Refusal` values, never module-level exception instances: raising one
instance again and again grows its `__traceback__` by every raise, and those frames keep
their locals (events, filters, the connection) alive for the life of the process. A refusal
is raised as `raise NOT_A_MEMBER()`, which builds a fresh exception each time.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Generic, TypeVar


class BuzzError(Exception):
    """Base of every protocol outcome. `str(err)` is the exact wire message."""

    prefix: str = "error"

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason

    def __str__(self) -> str:
        return f"{self.prefix}: {self.reason}"


class Invalid(BuzzError):
    prefix = "invalid"


class MalformedEvent(Invalid):
    """Shape failure of a NIP-01 event object (relay.md §2.1)."""

    def __init__(self, reason: str) -> None:
        super().__init__(f"malformed event: {reason}")
        self.detail = reason


class InvalidId(Invalid):
    """The id is not the SHA-256 of the canonical serialization (relay.md §2.3 step 1)."""

    def __init__(self, computed: str, got: str) -> None:
        super().__init__(f"invalid event id: computed {computed}, got {got}")
        self.computed = computed
        self.got = got


class InvalidSignature(Invalid):
    """The BIP-340 signature does not verify, or the pubkey is not a curve point (§2.3 step 2)."""

    def __init__(self) -> None:
        super().__init__("invalid schnorr signature")


class BadFilter(Invalid):
    """A REQ/COUNT filter that cannot be understood (relay.md §6.1 item 3)."""

    def __init__(self, reason: str) -> None:
        super().__init__(f"bad filter: {reason}")
        self.detail = reason


class Restricted(BuzzError):
    prefix = "restricted"


class AuthRequired(BuzzError):
    prefix = "auth-required"


class Blocked(BuzzError):
    prefix = "blocked"


class RateLimited(BuzzError):
    prefix = "rate-limited"


class ServerError(BuzzError):
    prefix = "error"


class Conflict(BuzzError):
    """The event raced a concurrent change; rebuild it from fresh state (workflows.md §2.2 item 4)."""

    prefix = "conflict"


class Duplicate(BuzzError):
    prefix = "duplicate"


E = TypeVar("E", bound=BuzzError)


@dataclass(frozen=True, slots=True)
class Refusal(Generic[E]):
    """A fixed refusal message as data: `kind` is the BuzzError class, `reason` its text.

    Calling it builds a fresh exception (`raise NOT_A_MEMBER()`); `str()` is the wire text.
    """

    kind: type[E]
    reason: str

    def __call__(self) -> E:
        return self.kind(self.reason)

    def __str__(self) -> str:
        return f"{self.kind.prefix}: {self.reason}"
