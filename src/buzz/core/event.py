"""NIP-01 events: strict shape parsing, canonical serialization, id, two-step verification.

Source rules: relay.md §2.1 (shape), §2.2 (canonical serialization and id), §2.3 (verify id,
then signature, with two distinct errors).
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from buzz.core.errors import InvalidId, InvalidSignature, MalformedEvent
from buzz.core.keys import is_hex, public_key, sign, verify_signature

MAX_CREATED_AT = 2**53 - 1
MAX_KIND = 65535

Tags = tuple[tuple[str, ...], ...]


def canonical_bytes(
    pubkey: str, created_at: int, kind: int, tags: Sequence[Sequence[str]], content: str
) -> bytes:
    """The NIP-01 serialization `[0,pubkey,created_at,kind,tags,content]` as UTF-8 bytes.

    orjson writes exactly the relay.md §2.2 form (seven short escapes, other controls as
    lowercase `\\u00xx`, everything else verbatim), byte-identical to
    `json.dumps(..., ensure_ascii=False, separators=(",", ":"))`; tests pin the equivalence.
    """
    return orjson.dumps([0, pubkey, created_at, kind, tags, content])


def compute_id(pubkey: str, created_at: int, kind: int, tags: Sequence[Sequence[str]], content: str) -> str:
    """Lowercase hex SHA-256 of the canonical serialization (relay.md §2.2)."""
    return hashlib.sha256(canonical_bytes(pubkey, created_at, kind, tags, content)).hexdigest()


def _is_int(value: object) -> bool:
    # bool is an int subclass in Python; JSON true/false are not integers (relay.md §2.1).
    return type(value) is int


def is_valid_unicode(value: str) -> bool:
    """False for a string holding an unpaired surrogate (it has no UTF-8 form; relay.md §2.1)."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _check_str(value: str, what: str) -> None:
    # An ASCII string (a flag CPython keeps on the string: no scan) has no surrogate (decision 358).
    if not value.isascii() and not is_valid_unicode(value):
        raise MalformedEvent(f"{what} is not valid Unicode (unpaired surrogate)")


@dataclass(frozen=True, slots=True)
class Event:
    """A NIP-01 event. Construct through `Event.from_json` (client input) or `Event.create`.

    `tags` is a tuple of tuples of str; every other field holds its wire value.
    """

    id: str
    pubkey: str
    created_at: int
    kind: int
    tags: Tags
    content: str
    sig: str

    # -- parsing ---------------------------------------------------------------------------
    @classmethod
    def from_json(cls, obj: Any) -> Event:
        """Parse a decoded JSON object into an Event, checking the relay.md §2.1 shape.

        Members other than the seven NIP-01 fields are ignored. Raises MalformedEvent.
        """
        if not isinstance(obj, dict):
            raise MalformedEvent("event must be a JSON object")
        for name in ("id", "pubkey", "created_at", "kind", "tags", "content", "sig"):
            if name not in obj:
                raise MalformedEvent(f"missing field '{name}'")
        eid, pubkey, sig = obj["id"], obj["pubkey"], obj["sig"]
        if not is_hex(eid, 64):
            raise MalformedEvent("id must be 64 lowercase hex characters")
        if not is_hex(pubkey, 64):
            raise MalformedEvent("pubkey must be 64 lowercase hex characters")
        if not is_hex(sig, 128):
            raise MalformedEvent("sig must be 128 lowercase hex characters")
        created_at = obj["created_at"]
        if not _is_int(created_at) or not 0 <= created_at <= MAX_CREATED_AT:
            raise MalformedEvent("created_at must be an integer between 0 and 2^53-1")
        kind = obj["kind"]
        if not _is_int(kind) or not 0 <= kind <= MAX_KIND:
            raise MalformedEvent("kind must be an integer between 0 and 65535")
        content = obj["content"]
        if not isinstance(content, str):
            raise MalformedEvent("content must be a string")
        _check_str(content, "content")
        return cls(eid, pubkey, created_at, kind, parse_tags(obj["tags"]), content, sig)

    @classmethod
    def create(
        cls,
        secret_key: str | bytes,
        kind: int,
        content: str = "",
        tags: Iterable[Sequence[str]] = (),
        created_at: int | None = None,
        aux: bytes | None = None,
    ) -> Event:
        """Build, hash and sign an event with `secret_key` (64 hex or 32 bytes).

        `created_at` defaults to now (unix seconds); `aux` fixes the BIP-340 aux randomness
        (tests only).
        """
        pubkey = public_key(secret_key)
        ts = int(time.time()) if created_at is None else created_at
        tag_tuple = tuple(tuple(t) for t in tags)
        eid = compute_id(pubkey, ts, kind, tag_tuple, content)
        return cls(eid, pubkey, ts, kind, tag_tuple, content, sign(secret_key, bytes.fromhex(eid), aux))

    # -- output ----------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """The NIP-01 JSON object (tags as lists)."""
        return {
            "id": self.id,
            "pubkey": self.pubkey,
            "created_at": self.created_at,
            "kind": self.kind,
            "tags": [list(t) for t in self.tags],
            "content": self.content,
            "sig": self.sig,
        }

    def to_json(self) -> str:
        return orjson.dumps(self.to_dict()).decode()

    # -- tag helpers -----------------------------------------------------------------------
    def tag_values(self, name: str) -> list[str]:
        """`t[1]` of every tag `t` with `t[0] == name` and at least 2 elements, in order."""
        return [t[1] for t in self.tags if len(t) >= 2 and t[0] == name]

    def first_tag(self, name: str) -> str | None:
        """`t[1]` of the first tag named `name` with at least 2 elements, or None."""
        for t in self.tags:
            if len(t) >= 2 and t[0] == name:
                return t[1]
        return None

    @property
    def d_tag(self) -> str:
        """The addressable `d` value: first `d` tag's value, `""` when none (relay.md §3.1 item 1)."""
        return self.first_tag("d") or ""


def parse_tags(tags: Any) -> Tags:
    """Check and freeze a tags value: a list of non-empty lists of strings (relay.md §2.1)."""
    if not isinstance(tags, list):
        raise MalformedEvent("tags must be an array of arrays")
    out = []
    for i, tag in enumerate(tags):
        if not isinstance(tag, list) or not tag:
            raise MalformedEvent(f"tag {i} must be a non-empty array of strings")
        for item in tag:
            if not isinstance(item, str):
                raise MalformedEvent(f"tag {i} has a non-string element")
            _check_str(item, f"tag {i}")
        out.append(tuple(tag))
    return tuple(out)


def verify_id(event: Event) -> None:
    """Step 1 of relay.md §2.3. Raises InvalidId."""
    computed = compute_id(event.pubkey, event.created_at, event.kind, event.tags, event.content)
    if computed != event.id:
        raise InvalidId(computed, event.id)


def verify_sig(event: Event) -> None:
    """Step 2 of relay.md §2.3. Raises InvalidSignature (also for a pubkey not on the curve)."""
    if not verify_signature(event.pubkey, bytes.fromhex(event.id), event.sig):
        raise InvalidSignature()


def verify_event(event: Event) -> None:
    """Verify id then signature (relay.md §2.3); raises InvalidId or InvalidSignature."""
    verify_id(event)
    verify_sig(event)
