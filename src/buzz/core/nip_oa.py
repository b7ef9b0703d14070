"""NIP-OA owner attestation: the `auth` tag (agents.md §1.2, engram.md §14), pure.

    ["auth", <owner pubkey, 64 lowercase hex>, <conditions>, <BIP-340 signature, 128 lowercase hex>]

The owner signs `SHA-256("nostr:agent-auth:" + agent_pubkey_hex + ":" + conditions)`. A valid
tag is provenance only: the event's author stays `event.pubkey`.

Verification levels (engram.md §14.5); each raises InvalidAuthTag (a ValueError) with a reason:

| function              | checks                                                              |
|-----------------------|---------------------------------------------------------------------|
| `parse_auth_tag`      | structure and conditions grammar, no crypto                         |
| `verify_auth_tag`     | + signature and self-attestation (+ every clause when given `event`) |
| `verify_auth_tag_at`  | + time clauses against a timestamp, ignoring `kind=`                |
| `verify_event_auth`   | the carrying event: exactly one `auth` tag, its id and signature, all clauses |

`owner_of(event)` is the non-raising form of `verify_event_auth`.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from coincurve import PublicKeyXOnly

from buzz.core.errors import InvalidId, InvalidSignature
from buzz.core.event import Event, verify_event
from buzz.core.keys import is_hex, public_key, sign, verify_signature

TAG_NAME = "auth"
PREIMAGE_PREFIX = "nostr:agent-auth:"
MAX_KIND = 65535
MAX_TIMESTAMP = 4294967295

ClauseName = Literal["kind=", "created_at<", "created_at>"]
_CLAUSE = re.compile(r"(kind=|created_at<|created_at>)(0|[1-9][0-9]*)")
_CLAUSE_MAX: dict[str, int] = {"kind=": MAX_KIND, "created_at<": MAX_TIMESTAMP, "created_at>": MAX_TIMESTAMP}


class InvalidAuthTag(ValueError):
    """An `auth` tag (or its carrying event) that fails NIP-OA; `reason` says why (§14.5)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True, slots=True)
class Clause:
    """One condition: `kind=n`, `created_at<t` or `created_at>t` (engram.md §14.3)."""

    name: ClauseName
    value: int

    def holds(self, kind: int | None, created_at: int) -> bool:
        """Whether the clause holds; `kind=None` skips kind clauses (time-only evaluation, §14.4)."""
        if self.name == "kind=":
            return kind is None or kind == self.value
        if self.name == "created_at<":
            return created_at < self.value
        return created_at > self.value


@dataclass(frozen=True, slots=True)
class AuthTag:
    """A structurally valid `auth` tag. `conditions` is kept verbatim; `clauses` is its parse."""

    owner: str
    conditions: str
    sig: str
    clauses: tuple[Clause, ...]

    def to_list(self) -> list[str]:
        return [TAG_NAME, self.owner, self.conditions, self.sig]

    def holds(self, kind: int | None, created_at: int) -> bool:
        """All clauses hold for an event of `kind` at `created_at` (kind None: time clauses only)."""
        return all(c.holds(kind, created_at) for c in self.clauses)


# -- grammar ----------------------------------------------------------------------------------
def parse_conditions(conditions: str) -> tuple[Clause, ...]:
    """Parse a conditions string by the grammar of engram.md §14.3; raises InvalidAuthTag.

    `""` is no clause. Clauses are `&`-separated, canonical decimal (no sign, no leading zero,
    no whitespace), `kind` ≤ 65535, time bounds ≤ 4294967295, names case-sensitive.
    """
    if not isinstance(conditions, str):
        raise InvalidAuthTag("conditions must be a string")
    if conditions == "":
        return ()
    clauses = []
    for i, text in enumerate(conditions.split("&"), start=1):
        match = _CLAUSE.fullmatch(text)
        if match is None:
            raise InvalidAuthTag(f"conditions clause {i} {text!r} does not match the grammar")
        name, digits = match.group(1), match.group(2)
        value = int(digits)
        if value > _CLAUSE_MAX[name]:
            raise InvalidAuthTag(f"conditions clause {i} {text!r} is out of range")
        clauses.append(Clause(name, value))  # type: ignore[arg-type]
    return tuple(clauses)


def auth_preimage(agent_pubkey: str, conditions: str) -> bytes:
    """The UTF-8 preimage `nostr:agent-auth:<agent hex>:<conditions>` (engram.md §14.2)."""
    return f"{PREIMAGE_PREFIX}{agent_pubkey}:{conditions}".encode()


def auth_message(agent_pubkey: str, conditions: str) -> bytes:
    """SHA-256 of the preimage: the 32-byte message the owner signs (engram.md §14.2)."""
    return hashlib.sha256(auth_preimage(agent_pubkey, conditions)).digest()


def parse_auth_tag(tag: object) -> AuthTag:
    """Check structure and grammar of an `auth` tag, with no cryptography (engram.md §14.5).

    `tag` is a sequence of strings, or JSON text of one (the CLI's `BUZZ_AUTH_TAG` after
    `normalize_auth_tag_input`). Requires exactly four strings: `"auth"`, a 64-char lowercase
    hex owner, conditions by §14.3 and a 128-char lowercase hex signature.
    Raises InvalidAuthTag.
    """
    if isinstance(tag, str):
        try:
            tag = json.loads(tag)
        except ValueError:
            raise InvalidAuthTag("auth tag is not JSON") from None
    if not isinstance(tag, Sequence) or isinstance(tag, str):
        raise InvalidAuthTag("auth tag must be an array")
    if len(tag) != 4:
        raise InvalidAuthTag(f"auth tag must have exactly 4 elements, got {len(tag)}")
    if not all(isinstance(item, str) for item in tag):
        raise InvalidAuthTag("auth tag elements must be strings")
    name, owner, conditions, sig = tag
    if name != TAG_NAME:
        raise InvalidAuthTag(f"first element must be 'auth', got {name!r}")
    if not is_hex(owner, 64):
        raise InvalidAuthTag("owner pubkey must be 64 lowercase hex characters")
    if not is_hex(sig, 128):
        raise InvalidAuthTag("signature must be 128 lowercase hex characters")
    return AuthTag(owner, conditions, sig, parse_conditions(conditions))


def _is_point(pubkey_hex: str) -> bool:
    try:
        PublicKeyXOnly(bytes.fromhex(pubkey_hex))
    except ValueError:
        return False
    return True


# -- signing and verification -----------------------------------------------------------------
def build_auth_tag(
    owner_secret: str | bytes, agent_pubkey: str, conditions: str = "", *, aux: bytes | None = None
) -> list[str]:
    """Sign an `auth` tag as the owner: `["auth", owner, conditions, sig]` (engram.md §14.1–14.2).

    `agent_pubkey` is 64 hex (lowercased here); `conditions` must satisfy §14.3 and is signed
    verbatim. `aux` fixes the BIP-340 aux randomness (tests only).
    Raises InvalidAuthTag for bad conditions, a bad agent key, or agent == owner
    (self-attestation); ValueError for a bad owner secret.
    """
    parse_conditions(conditions)
    agent = agent_pubkey.lower() if isinstance(agent_pubkey, str) else agent_pubkey
    if not is_hex(agent, 64) or not _is_point(agent):
        raise InvalidAuthTag("agent pubkey must be 64 hex characters of a secp256k1 x-only key")
    owner = public_key(owner_secret)
    if owner == agent:
        raise InvalidAuthTag("owner and agent must differ (self-attestation)")
    return [TAG_NAME, owner, conditions, sign(owner_secret, auth_message(agent, conditions), aux)]


def _verify_parsed(parsed: AuthTag, agent_pubkey: str) -> None:
    agent = agent_pubkey.lower() if isinstance(agent_pubkey, str) else ""
    if not is_hex(agent, 64):
        raise InvalidAuthTag("agent pubkey must be 64 hex characters")
    if parsed.owner == agent:
        raise InvalidAuthTag("owner equals the agent (self-attestation)")
    if not _is_point(parsed.owner):
        raise InvalidAuthTag("owner pubkey is not a secp256k1 point")
    if not verify_signature(parsed.owner, auth_message(agent, parsed.conditions), parsed.sig):
        raise InvalidAuthTag("owner signature does not verify")


def verify_auth_tag(tag: object, agent_pubkey: str, event: Event | None = None) -> str:
    """Verify `tag` for `agent_pubkey`; returns the owner pubkey (64 hex) (engram.md §14.5).

    Checks structure and grammar, refuses owner == agent (self-attestation) and owners that are
    not curve points, and verifies the owner's BIP-340 signature over the verbatim conditions.
    With `event`, every clause must also hold for `event.kind` / `event.created_at` (the
    carrying event's own time, never the clock); the event itself is not verified here (use
    `verify_event_auth`). Raises InvalidAuthTag.
    """
    parsed = parse_auth_tag(tag)
    _verify_parsed(parsed, agent_pubkey)
    if event is not None and not parsed.holds(event.kind, event.created_at):
        raise InvalidAuthTag("conditions are not satisfied by the event")
    return parsed.owner


def verify_auth_tag_at(tag: object, agent_pubkey: str, t: int) -> str:
    """`verify_auth_tag` plus the time clauses at unix time `t` (seconds); `kind=` is ignored.

    Bounds are strict: `created_at<N` needs `t < N`, `created_at>N` needs `t > N` (§14.4).
    Returns the owner pubkey; raises InvalidAuthTag.
    """
    parsed = parse_auth_tag(tag)
    _verify_parsed(parsed, agent_pubkey)
    if not parsed.holds(None, t):
        raise InvalidAuthTag(f"time conditions are not satisfied at {t}")
    return parsed.owner


def auth_tags(event: Event) -> list[tuple[str, ...]]:
    """Every tag of `event` whose first element is `auth`, whatever its length."""
    return [t for t in event.tags if t and t[0] == TAG_NAME]


def verify_event_auth(event: Event, *, event_verified: bool = False) -> str:
    """Full NIP-OA verification of the carrying event; returns the owner pubkey (§14.5).

    The event must carry exactly one `auth` tag (two or more means none is valid), which must
    pass `verify_auth_tag(tag, event.pubkey, event)`. Unless `event_verified` is True (the
    caller already ran `verify_event`), the event's id and signature are checked too.
    Raises InvalidAuthTag.
    """
    tags = auth_tags(event)
    if not tags:
        raise InvalidAuthTag("event carries no auth tag")
    if len(tags) > 1:
        raise InvalidAuthTag(f"event carries {len(tags)} auth tags; at most one is allowed")
    if not event_verified:
        try:
            verify_event(event)
        except (InvalidId, InvalidSignature) as exc:
            raise InvalidAuthTag(f"carrying event is invalid: {exc.reason}") from None
    return verify_auth_tag(tags[0], event.pubkey, event)


def owner_of(event: Event, *, event_verified: bool = False) -> str | None:
    """The owner pubkey when `event` carries exactly one valid `auth` tag, else None.

    Same checks as `verify_event_auth`; never raises for a bad tag.
    """
    try:
        return verify_event_auth(event, event_verified=event_verified)
    except InvalidAuthTag:
        return None


# -- CLI input --------------------------------------------------------------------------------
def normalize_auth_tag_input(raw: str) -> str:
    """Normalize a `BUZZ_AUTH_TAG` value to JSON text (engram.md §14.6); pure, never raises.

    Trim. JSON stays unchanged. A bracketed `[…]` whose inside splits on `,` into exactly four
    fields without `"` becomes a JSON array of the trimmed fields (an empty field gives `""`).
    Anything else is returned trimmed, for `parse_auth_tag` to reject.
    """
    text = raw.strip()
    try:
        json.loads(text)
    except ValueError:
        pass
    else:
        return text
    if len(text) >= 2 and text[0] == "[" and text[-1] == "]":
        fields = text[1:-1].split(",")
        if len(fields) == 4 and not any('"' in f for f in fields):
            return json.dumps([f.strip() for f in fields], separators=(",", ":"))
    return text
