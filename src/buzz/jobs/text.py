"""Small typed checks shared by the job contents and the directory records: JSON objects,
text, lines and byte caps. Each raises `Invalid` with the caller's prefix."""

from __future__ import annotations

import unicodedata
from typing import Any

import orjson

from buzz.core.errors import Invalid


def nbytes(value: str) -> int:
    return len(value.encode("utf-8"))


def json_object(content: str, prefix: str, max_bytes: int) -> dict[str, Any]:
    """`content` as a JSON object of at most `max_bytes` bytes."""
    size = nbytes(content)
    if size > max_bytes:
        raise Invalid(f"{prefix}: content too large ({size} bytes, max {max_bytes})")
    try:
        body = orjson.loads(content)
    except orjson.JSONDecodeError:
        raise Invalid(f"{prefix}: content is not JSON") from None
    if not isinstance(body, dict):
        raise Invalid(f"{prefix}: content must be a JSON object")
    return body


def is_text(value: object) -> bool:
    """A string holding a non-whitespace character."""
    return isinstance(value, str) and bool(value.strip())


def is_line(value: object) -> bool:
    """Text without control characters or line breaks."""
    return is_text(value) and not any(
        unicodedata.category(ch) in ("Cc", "Zl", "Zp")
        for ch in value  # type: ignore[union-attr]
    )


def is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def is_hex64(value: object) -> bool:
    return isinstance(value, str) and len(value) == 64 and all(c in "0123456789abcdef" for c in value)


def text(
    body: dict[str, Any], name: str, prefix: str, max_bytes: int, *, required: bool, line: bool = False
) -> str | None:
    """The member `name` as text (or a line) of at most `max_bytes` bytes."""
    if name not in body or (body[name] is None and not required):
        if required:
            raise Invalid(f"{prefix}: {name} is required")
        return None
    value = body[name]
    ok = is_line(value) if line else is_text(value)
    if not ok:
        raise Invalid(f"{prefix}: {name} must be {'a line of ' if line else ''}non-empty text")
    if nbytes(value) > max_bytes:
        raise Invalid(f"{prefix}: {name} too long ({nbytes(value)} bytes, max {max_bytes})")
    return value


def string(body: dict[str, Any], name: str, prefix: str, max_bytes: int) -> str | None:
    """An optional string member (may be empty) of at most `max_bytes` bytes."""
    if name not in body or body[name] is None:
        return None
    value = body[name]
    if not isinstance(value, str):
        raise Invalid(f"{prefix}: {name} must be a string")
    if nbytes(value) > max_bytes:
        raise Invalid(f"{prefix}: {name} too long ({nbytes(value)} bytes, max {max_bytes})")
    return value


def schema_version(body: dict[str, Any], prefix: str, *, required: bool = True) -> None:
    if "schemaVersion" not in body:
        if required:
            raise Invalid(f"{prefix}: schemaVersion is required")
        return
    value = body["schemaVersion"]
    if not is_int(value):
        raise Invalid(f"{prefix}: schemaVersion must be an integer")
    if value != 1:
        raise Invalid(f"{prefix}: unsupported schemaVersion")
