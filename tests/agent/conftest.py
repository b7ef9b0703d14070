"""Fixtures for harness tests: a workspace on the SQLite relay with the owner (alice), an
attested agent in `#general`, and a stranger (bob)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.agent.support import Workspace, workspace
from tests.support.relay import Identity, RunningRelay


@pytest.fixture
def agent_identity() -> Identity:
    return Identity.new()


@pytest.fixture
async def ws(
    sqlite_relay: RunningRelay,
    alice: Identity,
    agent_identity: Identity,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> AsyncIterator[Workspace]:
    async with workspace(sqlite_relay, alice, agent_identity, tmp_path, monkeypatch) as w:
        yield w
