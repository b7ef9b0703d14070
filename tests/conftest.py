"""Shared fixtures: a real relay on SQLite and on PostgreSQL, fresh identities."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_timeout

from tests.support.deadline import scaled
from tests.support.relay import Identity, RunningRelay, relay_on

BACKENDS = ["sqlite", "postgres"]


@pytest.fixture
def alice() -> Identity:
    return Identity.new()


@pytest.fixture
def bob() -> Identity:
    return Identity.new()


@pytest.fixture
def carol() -> Identity:
    return Identity.new()


async def _start(backend: str, tmp_path: Path, **config: object) -> AsyncIterator[RunningRelay]:
    if backend == "postgres":
        from tests.support.pg import temp_database

        async with temp_database() as dsn, relay_on(tmp_path, dsn, **config) as running:
            yield running
    else:
        async with relay_on(tmp_path, **config) as running:
            yield running


@pytest.fixture(params=BACKENDS)
async def relay(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[RunningRelay]:
    """The relay on each backend (tests using it run twice)."""
    async for running in _start(request.param, tmp_path):
        yield running


@pytest.fixture
async def sqlite_relay(tmp_path: Path) -> AsyncIterator[RunningRelay]:
    """The relay on SQLite only, for protocol tests that do not depend on the backend."""
    async for running in _start("sqlite", tmp_path):
        yield running


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Browser tests carry the `browser` mark: `make test` runs them after the rest, one at a
    time, with no pytest-xdist worker beside them (two Chromiums, or one beside a busy worker,
    on two cores starve the pages' clicks past their timeouts)."""
    for item in items:
        if item.nodeid.startswith("tests/web/"):
            item.add_marker(pytest.mark.browser)


@pytest.hookimpl(tryfirst=True)
def pytest_timeout_set_timer(item: pytest.Item, settings: pytest_timeout.Settings) -> object:
    """The per-test timeout (`timeout` in pyproject.toml, or a test's own mark) is a hang
    detector for an idle box: stretched by the load when the test starts (decision 270)."""
    stretched = settings._replace(timeout=scaled(settings.timeout))
    return pytest_timeout.pytest_timeout_set_timer(item=item, settings=stretched)
