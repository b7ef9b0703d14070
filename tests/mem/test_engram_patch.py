"""The §12.10 grammar and the strict position rule beyond the vectors (pure, no I/O)."""

from __future__ import annotations

import pytest

from buzz.core.engram_patch import (
    MalformedDiff,
    PositionMismatch,
    apply_patch,
    check_positions,
    parse_diff,
    split_lines,
)

H = "--- a/x\n+++ b/x\n"


def test_split_lines() -> None:
    assert split_lines("") == []
    assert split_lines("a") == ["a"]
    assert split_lines("a\nb") == ["a\n", "b"]
    assert split_lines("a\r\n\n") == ["a\r\n", "\n"]
    assert split_lines("a\u2028b\n") == ["a\u2028b\n"]  # only \n separates


@pytest.mark.parametrize(
    "diff, fragment",
    [
        (H + "@@ -1 +1 @@\n-a\n\n+b\n", "must start with"),  # a blank line inside a hunk
        (H + "@@ -1 +1 @@\n*a\n+b\n", "must start with"),
        (H + "@@ -1 +1 @@\n-a\n+b\ntrailing\n", "expected a hunk header"),
        (H + "@@ -1 +1 @@\n-a\n+b\n\n", "expected a hunk header"),
        (H + "@@ -1,2 +1 @@\n-a\n+b\n", "fewer lines"),
        (H + "@@ -1 +1 @@\n-a\n-b\n+c\n", "more lines"),
        (H + "@@ -1 +1 @@\n\\ No newline at end of file\n-a\n+b\n", "marker must follow"),
        (H + "@@ -1 +1 @@\n-a\n\\ No newline at end of file\n\\ No newline at end of file\n+b\n", "marker"),
        ("--- a/x\n@@ -1 +1 @@\n-a\n+b\n", "followed by a"),
        (H + "@@ -x +1 @@\n", "expected a hunk header"),
    ],
)
def test_malformed(diff: str, fragment: str) -> None:
    with pytest.raises(MalformedDiff, match=fragment):
        parse_diff(diff)


def test_preamble_is_ignored_and_counts_default_to_one() -> None:
    diff = "diff --git a/x b/x\nindex 1..2\n" + H + "@@ -2 +2 @@ section text\n-b\n+B\n"
    (hunk,) = parse_diff(diff)
    assert (hunk.source_start, hunk.source_length, hunk.preimage, hunk.postimage) == (
        2,
        1,
        ("b\n",),
        ("B\n",),
    )
    assert apply_patch("a\nb\nc\n", diff) == "a\nB\nc\n"


def test_no_newline_marker_after_a_delete_applies_to_the_old_side_only() -> None:
    diff = H + "@@ -1,2 +1,2 @@\n a\n-b\n\\ No newline at end of file\n+b\n"
    assert apply_patch("a\nb", diff) == "a\nb\n"
    with pytest.raises(PositionMismatch, match="preimage mismatch at line 2"):
        apply_patch("a\nb\n", diff)


@pytest.mark.parametrize(
    "current, diff, fragment",
    [
        ("a\n", H + "@@ -0,0 +1 @@\n+x\n", "insertion without context"),
        ("", H + "@@ -1,0 +1 @@\n+x\n", "insertion without context"),
        ("a\n", H + "@@ -0,1 +0,1 @@\n-a\n+b\n", "line 0"),
        ("a\nb\n", H + "@@ -2,2 +2,2 @@\n b\n-c\n+d\n", "expects lines 2–3 but the value has 2 lines"),
        ("a\nb\nc\nd\n", H + "@@ -3 +3 @@\n-c\n+C\n@@ -1 +1 @@\n-a\n+A\n", "ascending"),
        ("a\nb\nc\n", H + "@@ -1,2 +1,2 @@\n a\n-b\n+B\n@@ -2 +2 @@\n-b\n+x\n", "overlap"),
        ("a\nb\n", H + "@@ -1 +1 @@\n-a\n+A\n\\ No newline at end of file\n", "last line of the value"),
    ],
)
def test_position_refusals(current: str, diff: str, fragment: str) -> None:
    with pytest.raises(PositionMismatch, match=fragment):
        check_positions(current, parse_diff(diff))


def test_adjacent_hunks_are_allowed() -> None:
    diff = H + "@@ -1 +1 @@\n-a\n+A\n@@ -2 +2 @@\n-b\n+B\n"
    assert apply_patch("a\nb\nc\n", diff) == "A\nB\nc\n"


def test_crlf_lines_are_compared_byte_for_byte() -> None:
    diff = H + "@@ -1 +1 @@\n-a\r\n+b\r\n"
    assert apply_patch("a\r\nz\n", diff) == "b\r\nz\n"
    with pytest.raises(PositionMismatch):
        apply_patch("a\nz\n", diff)
