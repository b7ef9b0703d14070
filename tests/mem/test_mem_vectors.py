"""`mem_rs_tests` of nip-ae-vectors.json (engram.md §15.2), one test id per entry.

`sha256_hex` and `resolve_reader` run the real `buzz mem` against a relay; `patch_cases`,
`diffy_roundtrip_preserves_content` and `multi_file_header_count` run the strict patch module
the CLI uses (its exit codes are covered end to end in test_mem_cli.py).
"""

from __future__ import annotations

import difflib
from typing import Any

import pytest

from buzz.core import engram_patch
from buzz.core.engram_patch import MultiFilePatch, NoOpPatch, NotADiff, PositionMismatch
from tests.engram import vectors
from tests.mem.cli import buzz_mem
from tests.support.relay import Identity, RunningRelay

MEM = vectors.nip_ae()["mem_rs_tests"]


# -- sha256_hex: `buzz mem hash` output ------------------------------------------------------------
@pytest.mark.parametrize(
    "case", MEM["sha256_hex"], ids=[f"sha256-{i}" for i in range(len(MEM["sha256_hex"]))]
)
async def test_sha256_hex(
    sqlite_relay: RunningRelay, alice: Identity, bob: Identity, case: dict[str, Any]
) -> None:
    o = ("--owner", bob.pubkey)
    assert (await buzz_mem(sqlite_relay, alice, "set", "v", case["input"], *o)).code == 0
    r = await buzz_mem(sqlite_relay, alice, "hash", "v", *o)
    assert (r.code, r.stdout) == (0, case["sha256"].encode() + b"\n")


# -- resolve_reader: who is agent, owner and peer -------------------------------------------------
def _reader_id(case: dict[str, Any]) -> str:
    if isinstance(case["expect"], str):
        return "mutually-exclusive" if "mutually" in case["expect"] else "must-differ"
    return f"cli-is-{case['cli_identity']}"


@pytest.mark.parametrize("case", MEM["resolve_reader"], ids=[_reader_id(c) for c in MEM["resolve_reader"]])
async def test_resolve_reader(
    sqlite_relay: RunningRelay, alice: Identity, bob: Identity, case: dict[str, Any]
) -> None:
    agent, owner = alice, bob
    expect = case["expect"]
    if isinstance(expect, dict):
        # The agent writes; the reader named by the case decrypts with (its key, the peer).
        assert (
            await buzz_mem(sqlite_relay, agent, "set", "core", "who am I", "--owner", owner.pubkey)
        ).code == 0
        if case["cli_identity"] == "agent":
            assert expect == {"agent": "cli identity", "owner": "--owner", "their_pubkey": "--owner"}
            r = await buzz_mem(sqlite_relay, agent, "get", "core", "--owner", owner.pubkey)
        else:
            assert expect == {"agent": "--agent", "owner": "cli identity", "their_pubkey": "--agent"}
            r = await buzz_mem(sqlite_relay, owner, "get", "core", "--agent", agent.pubkey)
        assert (r.code, r.stdout) == (0, b"who am I")
        return
    if "mutually exclusive" in expect:
        r = await buzz_mem(
            sqlite_relay, agent, "get", "core", "--owner", owner.pubkey, "--agent", owner.pubkey
        )
        r.expect_error(1, "user_error", "mutually exclusive")
    else:
        assert "must differ" in expect
        r = await buzz_mem(sqlite_relay, agent, "get", "core", "--agent", agent.pubkey)
        r.expect_error(1, "user_error", "must differ")


# -- patch_cases: strict unified-diff patching ----------------------------------------------------
PATCH_CASES = {c["test"]: c for c in MEM["patch_cases"]}


@pytest.mark.parametrize("test", list(PATCH_CASES), ids=list(PATCH_CASES))
def test_patch_case(test: str) -> None:
    case = PATCH_CASES[test]
    current, diff = case["current"], case["patch"]
    expect = case.get("expect", "")
    if "expect_result" in case:
        assert engram_patch.apply_patch(current, diff) == case["expect_result"]
    elif expect == "apply error":  # what diffy refuses, the strict position check refuses
        with pytest.raises(PositionMismatch, match="preimage mismatch"):
            engram_patch.apply_patch(current, diff)
    elif expect.startswith("strict position check error"):
        with pytest.raises(PositionMismatch, match="preimage mismatch"):
            engram_patch.check_positions(current, engram_patch.parse_diff(diff))
        assert "diffy_would_produce" in case  # an offset slide is never applied
    elif expect == "position check ok":
        engram_patch.check_positions(current, engram_patch.parse_diff(diff))
        assert engram_patch.apply_patch(current, diff) != current
    elif expect.startswith("no-op refusal"):
        with pytest.raises(NoOpPatch, match="no-op"):
            engram_patch.apply_patch(current, diff)
    else:
        assert expect == "ok (value changes)"
        assert engram_patch.apply_patch(current, diff) != current


def test_text_without_any_diff_line_is_not_a_patch() -> None:
    """Decision 107: no '--- ' or '@@ ' line at all is refused as §12.10's zero-hunk no-op that
    also says it is not a patch."""
    for text in ("please change alpha to beta\n", "\n", "-alpha\n+beta\n"):
        with pytest.raises(NotADiff, match=r"^no-op: the input is not a patch"):
            engram_patch.apply_patch("alpha\n", text)
    with pytest.raises(NoOpPatch):  # a header alone is a diff with zero hunks (§12.10)
        engram_patch.apply_patch("alpha\n", "--- a/x\n+++ b/x\n")


def test_no_trailing_newline_case_keeps_the_missing_newline() -> None:
    case = PATCH_CASES["strict_position_handles_no_trailing_newline"]
    assert engram_patch.apply_patch(case["current"], case["patch"]) == "alpha\ndelta\ngamma"


def test_diffy_roundtrip_preserves_content() -> None:
    case = MEM["diffy_roundtrip_preserves_content"]
    old, new = case["current"], case["new"]
    diff = "".join(difflib.unified_diff(old.splitlines(True), new.splitlines(True), "a/x", "b/x"))
    assert engram_patch.apply_patch(old, diff) == new


@pytest.mark.parametrize(
    "case",
    MEM["multi_file_header_count"],
    ids=[f"headers-{i}" for i in range(len(MEM["multi_file_header_count"]))],
)
def test_multi_file_header_count(case: dict[str, Any]) -> None:
    assert engram_patch.file_header_count(case["patch"]) == case["count_of_lines_starting_with_'--- '"]
    if case.get("cli_result") == "rejected (multi-file)":
        with pytest.raises(MultiFilePatch, match="multi-file patch not supported"):
            engram_patch.apply_patch("a\nc\n", case["patch"])
    else:
        assert engram_patch.apply_patch("a\n", case["patch"]) == "b\n"
