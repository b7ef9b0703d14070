"""Strict unified-diff patching for `buzz mem patch` (engram.md §12.9 steps 6–10, §12.10).

Pure: text in, text out. The diff is first checked line by line against §12.10's grammar
(stricter than any library: a blank line inside a hunk, an unknown prefix, or anything but a
hunk header after a hunk is malformed), then parsed with `unidiff`, then every hunk must sit
exactly at its declared line numbers in the current value: no fuzz, no offset search.

    apply_patch(current, diff) -> new value
      raises MultiFilePatch   more than one line starting with "--- "
             MalformedDiff    the §12.10 grammar or the hunk counts fail
             PositionMismatch a hunk is not at its declared position (the strict check)
             NoOpPatch        the result equals the current value (zero hunks included)
               NotADiff       no line starts with "--- " or "@@ ": not a patch at all

Every error is a `PatchError` (a ValueError) whose text is the cause.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from unidiff import PatchSet
from unidiff.errors import UnidiffParseError

FILE_HEADER = "--- "
TARGET_HEADER = "+++ "
NO_NEWLINE_MARKER = "\\ No newline at end of file\n"
_HUNK_HEADER = re.compile(r"@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@(?: .*)?\n?", re.DOTALL)
_SYNTHETIC_HEADER = "--- a/value\n+++ b/value\n"


class PatchError(ValueError):
    """A diff that `buzz mem patch` refuses; `str(err)` is the cause."""


class MultiFilePatch(PatchError):
    """More than one `--- ` line (§12.9 step 6)."""


class MalformedDiff(PatchError):
    """The diff breaks the §12.10 grammar (§12.9 step 7)."""


class PositionMismatch(PatchError):
    """A hunk is not at its declared position in the current value (§12.9 step 8)."""


class NoOpPatch(PatchError):
    """The patched value is byte-identical to the current one (§12.9 step 10)."""


class NotADiff(NoOpPatch):
    """No line starts with `--- ` or `@@ ` (decision 107). §12.10 reads such input as zero
    hunks and refuses it as a no-op; the refusal still says `no-op`, and also that the input
    was no patch at all, since "unchanged" tells whoever piped the wrong file nothing."""


@dataclass(frozen=True, slots=True)
class Hunk:
    """One hunk: `@@ -source_start,source_length +target_start,target_length @@`.

    `preimage` holds the context and delete lines, `postimage` the context and insert lines,
    each with its `\\n` unless a `\\ No newline` marker removed it. Line numbers are 1-based;
    0 only in `@@ -0,0 …` (insertion into an empty value).
    """

    source_start: int
    source_length: int
    target_start: int
    target_length: int
    preimage: tuple[str, ...]
    postimage: tuple[str, ...]


def split_lines(text: str) -> list[str]:
    """Lines that keep their `\\n` (only `\\n` separates); a last line without one stays as
    is; `""` has no lines (§12.10)."""
    parts = text.split("\n")
    lines = [p + "\n" for p in parts[:-1]]
    if parts[-1]:
        lines.append(parts[-1])
    return lines


def file_header_count(diff: str) -> int:
    """The number of lines starting with `--- ` (§12.9 step 6; more than one is refused)."""
    return sum(1 for line in split_lines(diff) if line.startswith(FILE_HEADER))


# -- grammar ----------------------------------------------------------------------------------
def _check_grammar(lines: Sequence[str]) -> list[str]:
    """Validate §12.10 line by line; return the diff from its header on, markers canonical.

    Raises MalformedDiff naming the 1-based diff line.
    """
    start = next((i for i, ln in enumerate(lines) if ln.startswith((FILE_HEADER, "@@ "))), None)
    if start is None:
        return []
    out: list[str] = []
    i = start
    if lines[i].startswith(FILE_HEADER):
        if i + 1 >= len(lines) or not lines[i + 1].startswith(TARGET_HEADER):
            raise MalformedDiff(f"line {i + 1}: a '--- ' header must be followed by a '+++ ' line")
        out += lines[i : i + 2]
        i += 2
    while i < len(lines):
        header = _HUNK_HEADER.fullmatch(lines[i])
        if header is None:
            raise MalformedDiff(f"line {i + 1}: expected a hunk header '@@ -a,b +c,d @@'")
        old_len = 1 if header[2] is None else int(header[2])
        new_len = 1 if header[4] is None else int(header[4])
        out.append(lines[i])
        header_line = i + 1
        i += 1
        old = new = 0
        previous = ""
        while old < old_len or new < new_len or (i < len(lines) and lines[i].startswith("\\")):
            if i >= len(lines):
                raise MalformedDiff(f"hunk at line {header_line}: fewer lines than its header declares")
            line = lines[i]
            prefix = line[:1]
            if prefix == "\\":
                if previous in ("", "\\"):
                    raise MalformedDiff(f"line {i + 1}: a '\\' marker must follow a hunk line")
                out.append(NO_NEWLINE_MARKER)
            elif prefix in (" ", "-", "+"):
                old += prefix != "+"
                new += prefix != "-"
                if old > old_len or new > new_len:
                    raise MalformedDiff(f"line {i + 1}: more lines than the hunk header declares")
                out.append(line)
            else:
                raise MalformedDiff(f"line {i + 1}: hunk lines must start with ' ', '-', '+' or '\\'")
            previous = prefix
            i += 1
    return out


def parse_diff(diff: str) -> tuple[Hunk, ...]:
    """The hunks of a one-file unified diff (§12.10); zero hunks (a header alone) is well-formed.

    Lines before the first `--- ` or `@@ ` line are ignored; the `--- `/`+++ ` header is
    optional and its names are ignored. Raises NotADiff (a NoOpPatch: §12.10's zero hunks)
    when there is no such line at all, MalformedDiff when the grammar fails.
    """
    body = _check_grammar(split_lines(diff))
    if not body:
        raise NotADiff(
            "no-op: the input is not a patch, no line starts with '--- ' or '@@ ' (make one with diff -u)"
        )
    text = "".join(body if body[0].startswith(FILE_HEADER) else [_SYNTHETIC_HEADER, *body])
    try:
        patch = PatchSet(text)
    except UnidiffParseError as exc:
        raise MalformedDiff(str(exc)) from None
    if len(patch) != 1:
        raise MalformedDiff(f"expected one file, found {len(patch)}")
    return tuple(_hunk(h) for h in patch[0])


def _hunk(parsed: object) -> Hunk:
    pre: list[str] = []
    post: list[str] = []
    last = ""
    for line in parsed:  # type: ignore[attr-defined]
        kind, value = line.line_type, line.value
        if kind == "\\":
            if last in (" ", "-") and pre:
                pre[-1] = pre[-1].removesuffix("\n")
            if last in (" ", "+") and post:
                post[-1] = post[-1].removesuffix("\n")
        elif kind == " ":
            pre.append(value)
            post.append(value)
        elif kind == "-":
            pre.append(value)
        elif kind == "+":
            post.append(value)
        last = kind
    h = parsed
    return Hunk(h.source_start, h.source_length, h.target_start, h.target_length, tuple(pre), tuple(post))  # type: ignore[attr-defined]


# -- the strict position rule -----------------------------------------------------------------
def check_positions(current: str, hunks: Sequence[Hunk]) -> None:
    """Every hunk's preimage equals the current lines at its declared numbers (§12.10).

    An empty preimage is allowed only for `@@ -0,0 …` into `""`; hunks are checked against
    the original numbering, ascending and non-overlapping; a line without `\\n` may only end
    the value. Raises PositionMismatch with the cause.
    """
    lines = split_lines(current)
    end = 0  # first original line (1-based) a later hunk may touch
    for n, hunk in enumerate(hunks, 1):
        a, pre = hunk.source_start, hunk.preimage
        if not pre:
            if a != 0 or current != "":
                raise PositionMismatch(
                    f"hunk {n}: an insertion without context is only allowed into an empty value (@@ -0,0 …)"
                )
        elif a < 1:
            raise PositionMismatch(f"hunk {n}: declares line 0 but has context or deletions")
        if n > 1 and (a < end or not pre):
            raise PositionMismatch(f"hunk {n}: hunks must be ascending and must not overlap")
        last = a + len(pre) - 1
        if pre and last > len(lines):
            raise PositionMismatch(f"hunk {n}: expects lines {a}–{last} but the value has {len(lines)} lines")
        for offset, expected in enumerate(pre):
            if lines[a - 1 + offset] != expected:
                raise PositionMismatch(f"hunk {n}: preimage mismatch at line {a + offset}")
        touches_end = max(a - 1, 0) + len(pre) >= len(lines)
        for k, line in enumerate(hunk.postimage):
            if not line.endswith("\n") and (k < len(hunk.postimage) - 1 or not touches_end):
                raise PositionMismatch(f"hunk {n}: a line without newline must be the last line of the value")
        end = max(a + len(pre), 1)


def apply_hunks(current: str, hunks: Sequence[Hunk]) -> str:
    """Replace each preimage range with its postimage; call `check_positions` first."""
    lines = split_lines(current)
    out: list[str] = []
    pos = 0
    for hunk in hunks:
        start = max(hunk.source_start - 1, 0)
        out += lines[pos:start]
        out += hunk.postimage
        pos = start + len(hunk.preimage)
    out += lines[pos:]
    return "".join(out)


def apply_patch(current: str, diff: str) -> str:
    """§12.9 steps 6–10: multi-file refusal, parse, strict position check, apply, no-op refusal.

    Returns the new value. Raises MultiFilePatch, MalformedDiff, PositionMismatch, NoOpPatch.
    """
    if file_header_count(diff) > 1:
        raise MultiFilePatch("multi-file patch not supported")
    hunks = parse_diff(diff)
    check_positions(current, hunks)
    result = apply_hunks(current, hunks)
    if result == current:
        raise NoOpPatch("no-op: the patch leaves the value unchanged")
    return result
