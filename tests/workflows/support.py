"""Shared values of the workflow-core tests."""

from __future__ import annotations

from datetime import UTC, datetime

NOW = int(datetime(2024, 1, 1, tzinfo=UTC).timestamp())  # a Monday, 00:00:00 UTC
OWNER = "1" * 64
ALICE = "a" * 64
BOB = "b" * 64
CHANNEL = "6f1c3d4e-0a1b-4c2d-8e3f-5a6b7c8d9e0f"
WORKFLOW = "0d9e8f7a-6b5c-4d3e-8f2a-1b0c9d8e7f6a"
RUN = "4a5b6c7d-8e9f-4a0b-8c1d-2e3f4a5b6c7d"
REVISION = "c" * 64


def utc(*parts: int) -> int:
    return int(datetime(*parts, tzinfo=UTC).timestamp())  # type: ignore[misc]


def definition(trigger: str, steps: str, extra: str = "") -> str:
    """A definition text: `trigger` and `steps` are YAML flow or block fragments."""
    return f"name: Test\n{extra}trigger: {trigger}\nsteps:\n{steps}"
