"""HTTP `Range` on served blobs (media.md §7.3), pure.

One range (`bytes=a-b`, `bytes=a-`, `bytes=-n`) is answered 206, at most RANGE_MAX_BYTES of it
(the answer's `Content-Range` names the actual end); an unsatisfiable one 416 with
`bytes */<size>`; several ranges, or a header that is not a byte range, as if absent (200).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from buzz.media.limits import RANGE_MAX_BYTES

_ONE = re.compile(r"^bytes=(\d*)-(\d*)$")


@dataclass(frozen=True, slots=True)
class Span:
    """Bytes `start`..`end` inclusive of a blob of `size` bytes; `partial` for a 206."""

    start: int
    end: int
    size: int
    partial: bool

    @property
    def length(self) -> int:
        return self.end - self.start + 1 if self.size else 0

    @property
    def content_range(self) -> str:
        return f"bytes {self.start}-{self.end}/{self.size}"


class Unsatisfiable(Exception):
    """A range no byte of the blob falls in: answer 416 `bytes */<size>`."""


def span(header: str | None, size: int, max_bytes: int = RANGE_MAX_BYTES) -> Span:
    """The bytes to send for `Range: header` of a blob of `size` bytes. Raises Unsatisfiable."""
    whole = Span(0, max(size - 1, 0), size, partial=False)
    if not header:
        return whole
    m = _ONE.match(header.strip().replace(" ", ""))
    if m is None:
        return whole
    first, last = m.group(1), m.group(2)
    if first == "" and last == "":
        return whole
    if first == "":
        n = int(last)
        if n == 0 or size == 0:
            raise Unsatisfiable()
        start, end = max(size - n, 0), size - 1
    else:
        start = int(first)
        if start >= size:
            raise Unsatisfiable()
        end = size - 1 if last == "" else min(int(last), size - 1)
        if end < start:
            return whole
    end = min(end, start + max_bytes - 1)
    return Span(start, end, size, partial=True)
