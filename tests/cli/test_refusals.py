"""A relay verdict in the CLI's error object: the spec's category and exit code, plus its
NIP-01 prefix as `refusal` and what it means as `hint` (docs/decisions.md 152)."""

from __future__ import annotations

import pytest

from buzz.cli.output import EXIT_CODES
from buzz.client.errors import REFUSALS, refusal

CASES = [
    ("invalid: event too large", "invalid", 4),
    ("restricted: not a channel member", "restricted", 4),
    ("blocked: banned from this relay", "blocked", 4),
    ("rate-limited: slow down", "rate-limited", 4),
    ("auth-required: authenticate first", "auth-required", 4),
    ("error: could not store", "error", 4),
    ("pow: difficulty 20 required", "pow", 4),
    ("duplicate: have a newer version", "duplicate", 5),
    ("conflict: revision changed", "conflict", 5),
    ("no prefix at all", "error", 4),
    ("weird: unknown prefix", "error", 4),
]


@pytest.mark.parametrize(("verdict", "code", "exit_code"), CASES)
def test_each_prefix_is_named(verdict: str, code: str, exit_code: int) -> None:
    shown = refusal(verdict, verdict).to_dict()
    assert (shown["refusal"], shown["hint"], shown["relay_message"]) == (code, REFUSALS[code], verdict)
    assert EXIT_CODES[shown["error"]] == exit_code


def test_the_readme_lists_every_refusal() -> None:
    from pathlib import Path

    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    assert all(f"`{code}`" in readme for code in REFUSALS)
