"""Engram constants, errors, slugs, bodies and references (engram.md §3, §6, §10.2, §15.1).

Pure: no I/O, no clock, no cryptography. Re-exported by `buzz.core.engram`.

    EngramError (ValueError)        every engram failure; `.reason` is human-readable
    ├── InvalidSlug                 slug grammar (§3)
    ├── InvalidBody                 body JSON or shape (§6.4)
    ├── InvalidEnvelope             event kind, author or tags (§7)
    ├── BodyTooLarge(n)             serialized body over 65,535 bytes (§6.3); `.size` is n
    ├── InvalidKey                  off-curve or malformed key (§2.1); also a nip44.InvalidKey
    └── Decrypt                     content does not decrypt (§7 row 7); also a nip44.Decrypt
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, ClassVar

from buzz.core import nip44

KIND_ENGRAM = 30174
CORE_SLUG = "core"
MEM_PREFIX = "mem/"
D_DOMAIN = b"agent-memory/v1/d-tag"
PLAINTEXT_MAX = 65535
SLUG_MAX = 255
SEGMENT_MAX = 64
HEAD_QUERY_LIMIT = 16
LIST_QUERY_LIMIT = 5000
CORE_FETCH_TIMEOUT = 3  # seconds
CLOCK_POISON_MARGIN = 600  # seconds

_SEGMENT = re.compile(r"[a-z0-9][a-z0-9_-]*")
_SURROGATE = re.compile("[\ud800-\udfff]")


# -- errors -----------------------------------------------------------------------------------
class EngramError(ValueError):
    """Base of every engram failure (engram.md, "Library error types" in the preamble)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class InvalidSlug(EngramError):
    """A slug that breaks the grammar of engram.md §3."""


class InvalidBody(EngramError):
    """A decrypted body that is not strict JSON or has the wrong shape (§6.4)."""


class InvalidEnvelope(EngramError):
    """An event whose kind, author, `d` or `p` tags, or slug-to-`d` binding is wrong (§7)."""


class BodyTooLarge(EngramError):
    """A serialized body of `size` bytes, over PLAINTEXT_MAX (65,535) (§6.3)."""

    def __init__(self, size: int) -> None:
        super().__init__(f"serialized body is {size} bytes, over the {PLAINTEXT_MAX}-byte limit")
        self.size = size


class InvalidKey(EngramError, nip44.InvalidKey):
    """A malformed or off-curve key (§2.1); the reason names a bad peer's hex."""


class Decrypt(EngramError, nip44.Decrypt):
    """The event content does not decrypt to UTF-8 under the pair's key (§7 row 7)."""


# -- slugs ------------------------------------------------------------------------------------
def validate_slug(slug: str) -> str:
    """Return `slug` unchanged when it is valid, else raise InvalidSlug (engram.md §3.2).

    Valid: exactly `core`, or at most 255 bytes matching
    `^mem/[a-z0-9][a-z0-9_-]{0,63}(/[a-z0-9][a-z0-9_-]{0,63})*$`. Checks run in the §3.2
    order and the reason names the first failure (segments are numbered from 1).
    """
    if not isinstance(slug, str):
        raise InvalidSlug("slug must be a string")
    if slug == CORE_SLUG:
        return slug
    size = len(slug.encode("utf-8", "surrogatepass"))
    if size > SLUG_MAX:
        raise InvalidSlug(f"slug is {size} bytes, over the {SLUG_MAX}-byte limit")
    if not slug.startswith(MEM_PREFIX):
        raise InvalidSlug(f"slug {slug!r} must be 'core' or start with 'mem/'")
    rest = slug[len(MEM_PREFIX) :]
    if not rest:
        raise InvalidSlug("slug has nothing after 'mem/'")
    for i, segment in enumerate(rest.split("/"), start=1):
        if not segment:
            raise InvalidSlug(f"slug segment {i} is empty")
        if len(segment.encode("utf-8", "surrogatepass")) > SEGMENT_MAX:
            raise InvalidSlug(f"slug segment {i} is longer than {SEGMENT_MAX} bytes")
        if not _SEGMENT.fullmatch(segment):
            if not _SEGMENT.fullmatch(segment[0]):
                raise InvalidSlug(f"slug segment {i} starts with {segment[0]!r}, not [a-z0-9]")
            bad = next(c for c in segment[1:] if not _SEGMENT.fullmatch("a" + c))
            raise InvalidSlug(f"slug segment {i} contains {bad!r}, outside [a-z0-9_-]")
    return slug


def normalize_slug(text: str) -> str:
    """The slug a user means by `text` (engram.md §3.4); for CLI input only.

    `core` and anything starting with `mem/` stay as they are; anything else gets `mem/`
    prepended. Never lowercases or trims. Raises InvalidSlug when the result is invalid.
    """
    if not isinstance(text, str):
        raise InvalidSlug("slug must be a string")
    slug = text if text == CORE_SLUG or text.startswith(MEM_PREFIX) else MEM_PREFIX + text
    return validate_slug(slug)


def is_valid_slug(slug: str) -> bool:
    """`validate_slug` as a predicate."""
    try:
        validate_slug(slug)
    except InvalidSlug:
        return False
    return True


# -- bodies -----------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class MemoryBody:
    """A memory entry `{"slug": "mem/…", "value": str | null}`; `value=None` is a tombstone (§6.1).

    Raises InvalidSlug for a slug that is invalid or `core`, InvalidBody for a non-string value.
    """

    slug: str
    value: str | None

    def __post_init__(self) -> None:
        validate_slug(self.slug)
        if self.slug == CORE_SLUG:
            raise InvalidSlug("slug 'core' takes a core body, not a memory body")
        if self.value is not None and not isinstance(self.value, str):
            raise InvalidBody("memory value must be a string or null")

    @property
    def is_tombstone(self) -> bool:
        return self.value is None

    @property
    def text(self) -> str | None:
        """The readable text (`value`), None for a tombstone."""
        return self.value


@dataclass(frozen=True, slots=True)
class CoreBody:
    """The core record `{"slug": "core", "profile": str}`; `""` is a present, empty core (§6.1)."""

    profile: str
    slug: ClassVar[str] = CORE_SLUG
    is_tombstone: ClassVar[bool] = False

    def __post_init__(self) -> None:
        if not isinstance(self.profile, str):
            raise InvalidBody("core profile must be a string")

    @property
    def text(self) -> str:
        """The readable text (`profile`)."""
        return self.profile


Body = MemoryBody | CoreBody


def encode_body(body: Body) -> bytes:
    """Canonical UTF-8 bytes of `body` (engram.md §6.2): compact, `slug` first, minimal escaping.

    memory: `{"slug":S,"value":V}` (V is `null` for a tombstone); core:
    `{"slug":"core","profile":P}`. Never emits the legacy `index` member.
    Raises BodyTooLarge(n) above 65,535 bytes (§6.3), InvalidBody for text that is not valid
    Unicode (lone surrogates).
    """
    if isinstance(body, CoreBody):
        obj: dict[str, Any] = {"slug": CORE_SLUG, "profile": body.profile}
    elif isinstance(body, MemoryBody):
        obj = {"slug": body.slug, "value": body.value}
    else:
        raise InvalidBody(f"not an engram body: {type(body).__name__}")
    try:
        raw = json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidBody("body text is not valid Unicode (unpaired surrogate)") from None
    if len(raw) > PLAINTEXT_MAX:
        raise BodyTooLarge(len(raw))
    return raw


def _reject_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj: dict[str, Any] = {}
    for key, value in pairs:
        if key in obj:
            raise InvalidBody(f"duplicate member name {key!r}")
        obj[key] = value
    return obj


def _reject_constant(name: str) -> Any:
    raise InvalidBody(f"{name} is not valid JSON")


def _has_lone_surrogate(root: Any) -> bool:
    stack = [root]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if _SURROGATE.search(item):
                return True
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return False


def _strict_json(text: str) -> Any:
    if _SURROGATE.search(text):
        raise InvalidBody("body contains an unpaired surrogate")
    try:
        root = json.loads(text, object_pairs_hook=_reject_duplicates, parse_constant=_reject_constant)
    except RecursionError:
        raise InvalidBody("body nests too deeply") from None
    except InvalidBody:
        raise
    except ValueError as exc:
        raise InvalidBody(f"body is not valid JSON: {exc}") from None
    # json.loads joins valid \uD83D\uDE00 pairs; a lone escaped surrogate stays a lone code point.
    if "\\u" in text and _has_lone_surrogate(root):
        raise InvalidBody("body contains an unpaired surrogate escape")
    return root


def decode_body(plaintext: str | bytes) -> Body:
    """Parse a decrypted body strictly (engram.md §6.4); the first failure wins.

    Strict JSON (no duplicate member at any depth, no NaN/Infinity, no lone surrogate, nothing
    after the value) → object → string `slug` → `validate_slug` → core needs a string
    `profile`; memory needs `value`, a string (live) or null (tombstone). Every other member,
    including the legacy core `index`, is ignored.
    Raises InvalidBody, or InvalidSlug for a bad slug.
    """
    if isinstance(plaintext, bytes | bytearray):
        try:
            plaintext = bytes(plaintext).decode("utf-8")
        except UnicodeDecodeError:
            raise InvalidBody("body is not valid UTF-8") from None
    root = _strict_json(plaintext)
    if not isinstance(root, dict):
        raise InvalidBody("body must be a JSON object")
    slug = root.get("slug")
    if not isinstance(slug, str):
        raise InvalidBody("body slug is missing or not a string")
    validate_slug(slug)
    if slug == CORE_SLUG:
        profile = root.get("profile")
        if not isinstance(profile, str):
            raise InvalidBody("core profile is missing or not a string")
        return CoreBody(profile)
    if "value" not in root:
        raise InvalidBody("memory value is missing")
    value = root["value"]
    if value is not None and not isinstance(value, str):
        raise InvalidBody("memory value must be a string or null")
    return MemoryBody(slug, value)


# -- references -------------------------------------------------------------------------------
def extract_refs(text: str) -> list[str]:
    """Valid slugs written as `[[slug]]` in `text`, first-occurrence order, no duplicates (§10.2).

    No escaping and no Markdown awareness; an opener followed by another `[[` before any `]]`
    is abandoned; invalid candidates are dropped silently; `[[core]]` and self-references are
    kept. Never raises.
    """
    out: list[str] = []
    seen: set[str] = set()
    i = 0
    while True:
        i = text.find("[[", i)
        if i < 0:
            return out
        start = i + 2
        close = text.find("]]", start)
        if close < 0:
            return out
        reopen = text.find("[[", start, close)
        if reopen >= 0:
            i = start
            continue
        candidate = text[start:close]
        if candidate not in seen and is_valid_slug(candidate):
            seen.add(candidate)
            out.append(candidate)
        i = close + 2
