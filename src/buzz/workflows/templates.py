"""Template fields: `{{ trigger.x }}` and `{{ steps.<id>.output.<f>… }}` with filters (§5).

The syntax is a path and a filter chain, nothing more: no attribute access, no calls, no
loops. A small scanner renders it (decision 182: Jinja's sandbox would evaluate far more than
the spec allows and cannot keep an unknown path or an unclosed `{{` as literal text). Rules:

- an unknown or unresolvable path leaves the whole `{{…}}` as written; an unclosed `{{` and
  everything after it are emitted as written; text a substitution produced is never scanned
  again (single pass);
- a recognised path with an unknown filter, a malformed `truncate`, or `npub` on a value that
  is not 64 hex raises `TemplateError` (the step fails with `template_resolution_failed`);
- one rendered field is at most `TEMPLATE_OUTPUT_MAX_BYTES`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from buzz.core.nip19 import npub
from buzz.workflows.limits import TEMPLATE_OUTPUT_MAX_BYTES, TRUNCATE_MAX

_NAME = r"[A-Za-z0-9_-]{1,64}"
_PATH = re.compile(
    rf"\s*(?:trigger\.(?P<field>{_NAME})"
    rf"|steps\.(?P<step>[A-Za-z0-9_]{{1,64}})\.output\.(?P<out>{_NAME}(?:\.{_NAME})*))\s*\Z"
)
_TRUNCATE = re.compile(r"truncate\s*\(\s*([0-9]+)\s*\)\Z")
_HEX64 = re.compile(r"[0-9a-f]{64}\Z")


class TemplateError(ValueError):
    """A filter cannot be applied (§5.4): `template_resolution_failed` at run time."""


@dataclass(frozen=True)
class Expression:
    """One `{{…}}`: where it sits in the field, its path and its filters."""

    start: int
    end: int  # index after the closing braces
    step: str | None  # None for a trigger path
    segments: tuple[str, ...]  # the trigger field, or the output field and its descent
    filters: tuple[tuple[str, int | None], ...]  # ("truncate", N) | ("npub", None)


def _filter(text: str) -> tuple[str, int | None]:
    name = text.strip()
    if name in ("npub", "truncate_pubkey"):
        return ("npub", None)
    m = _TRUNCATE.match(name)
    if m:
        n = int(m.group(1))
        if n > TRUNCATE_MAX:
            raise TemplateError(f"truncate({n}) exceeds {TRUNCATE_MAX}")
        return ("truncate", n)
    if name.startswith("truncate"):
        raise TemplateError(f"malformed truncate filter {name!r}: truncate(N) takes a whole number")
    raise TemplateError(f"unknown template filter {name!r}")


def _parse(inner: str, start: int, end: int) -> Expression | None:
    """A recognised expression, None for text that is not one (kept literal)."""
    path, *filters = inner.split("|")
    m = _PATH.match(path)
    if m is None:
        return None
    parsed = tuple(_filter(f) for f in filters)
    if m.group("field"):
        return Expression(start, end, None, (m.group("field"),), parsed)
    return Expression(start, end, m.group("step"), tuple(m.group("out").split(".")), parsed)


def scan(text: str) -> Iterator[Expression | str]:
    """The field as literal pieces and expressions, left to right. Raises TemplateError."""
    i = 0
    while True:
        j = text.find("{{", i)
        if j < 0:
            break
        k = text.find("}}", j + 2)
        if k < 0:
            break  # unclosed: the rest is literal
        if j > i:
            yield text[i:j]
        expr = _parse(text[j + 2 : k], j, k + 2)
        yield expr if expr is not None else text[j : k + 2]
        i = k + 2
    if i < len(text):
        yield text[i:]


def check(text: str) -> None:
    """Save-time check of a template field (§3.8 item 7). Raises TemplateError."""
    for _ in scan(text):
        pass


def is_literal(text: str) -> bool:
    """True when the field holds no template expression, so save time can check its value."""
    return not any(isinstance(piece, Expression) for piece in scan(text))


_MISSING = object()


def _descend(value: Any, segments: tuple[str, ...]) -> Any:
    for seg in segments:
        if isinstance(value, dict) and seg in value:
            value = value[seg]
        elif isinstance(value, list) and seg.isdigit() and int(seg) < len(value):
            value = value[int(seg)]
        else:
            return _MISSING
    return value


def render_value(value: Any) -> str:
    """§5.1 item 3: strings verbatim, numbers as JSON text, objects compact, null empty."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


@dataclass(frozen=True)
class Scope:
    """What templates read: the trigger fields and the outputs of completed steps."""

    trigger: Mapping[str, Any]
    outputs: Mapping[str, Mapping[str, Any]]

    def lookup(self, expr: Expression) -> Any:
        if expr.step is None:
            return self.trigger.get(expr.segments[0], _MISSING)
        output = self.outputs.get(expr.step)
        return _MISSING if output is None else _descend(output, expr.segments)


def _apply(value: str, filters: tuple[tuple[str, int | None], ...]) -> str:
    for name, n in filters:
        if name == "truncate":
            value = value[:n]
        elif _HEX64.match(value):
            value = npub(value)
        else:
            raise TemplateError("npub needs a 64-hex public key")
    return value


def render(text: str, scope: Scope, max_bytes: int = TEMPLATE_OUTPUT_MAX_BYTES) -> str:
    """Render one template field. Raises TemplateError (including for an oversized result)."""
    out: list[str] = []
    size = 0
    for piece in scan(text):
        if isinstance(piece, Expression):
            value = scope.lookup(piece)
            piece = (
                text[piece.start : piece.end]
                if value is _MISSING
                else _apply(render_value(value), piece.filters)
            )
        size += len(piece.encode("utf-8", "surrogatepass"))
        if size > max_bytes:
            raise TemplateError(f"rendered template exceeds {max_bytes} bytes")
        out.append(piece)
    return "".join(out)
