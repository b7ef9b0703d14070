"""Two real relay replicas on one real PostgreSQL database and one real Redis (relay.md §12.4).

Each test gets its own workspace id, so its topics and keys (`buzz:<workspace>:…`) are its
own on the shared Redis; the keys are deleted afterwards. Without Redis or PostgreSQL the tests
skip and say how to start them, except with `CI=true`, where that is a failure.
"""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import AsyncIterator, Sequence
from pathlib import Path

import pytest
from redis.asyncio import Redis
from redis.exceptions import RedisError

from buzz.core.keys import generate_secret_key
from tests.operator.support import Served, served
from tests.support.pg import temp_database
from tests.support.relay import RunningRelay, relay_on

DEFAULT_REDIS_URL = "redis://127.0.0.1:6379/0"
START_HINT = 'redis-server --daemonize yes --bind 127.0.0.1 --port 6379 --save "" --appendonly no'


def redis_url() -> str:
    return os.environ.get("BUZZ_TEST_REDIS_URL", DEFAULT_REDIS_URL)


def unreachable(what: str) -> None:
    """Skip with `what`, or fail under CI=true (CI must not skip silently)."""
    if os.environ.get("CI") == "true":
        pytest.fail(what)
    pytest.skip(what)


async def require_redis(url: str) -> None:
    client = Redis.from_url(url, socket_connect_timeout=2)
    try:
        await client.ping()
    except (RedisError, OSError) as exc:
        unreachable(f"Redis unreachable at {url} ({exc}); start it with: {START_HINT}")
    finally:
        await client.aclose()


@pytest.fixture
def workspace_id() -> str:
    """A workspace of this test alone: its own topic and key prefix."""
    return f"test-{uuid.uuid4().hex[:16]}"


@pytest.fixture
async def redis(workspace_id: str) -> AsyncIterator[Redis]:
    """A client of the shared test Redis; this test's keys are deleted afterwards: `buzz:<workspace>:…`
    and the mesh tunnels' `buzz:{<runtime>}:<workspace>:tunnel:…`."""
    url = redis_url()
    await require_redis(url)
    client = Redis.from_url(url)
    try:
        yield client
    finally:
        for match in (f"buzz:{workspace_id}:*", f"buzz:{{*}}:{workspace_id}:tunnel:*"):
            keys = [key async for key in client.scan_iter(match=match)]
            if keys:
                await client.delete(*keys)
        await client.aclose()


@contextlib.asynccontextmanager
async def replica_pair(
    tmp_path: Path, url: str, workspace_id: str, **config: object
) -> AsyncIterator[tuple[RunningRelay, RunningRelay]]:
    """Replicas A and B: one PostgreSQL database, one Redis, one relay key, two processes'
    worth of state (two `Relay` objects on two ports); `config` goes to both."""
    shared = {
        "redis_url": url,
        "workspace_id": workspace_id,
        "relay_private_key": generate_secret_key(),
        **config,
    }
    async with (
        temp_database() as dsn,
        relay_on(tmp_path / "a", dsn, **shared) as a,
        relay_on(tmp_path / "b", dsn, **shared) as b,
    ):
        yield a, b


@contextlib.asynccontextmanager
async def meshed(
    tmp_path: Path, url: str, workspace_id: str
) -> AsyncIterator[tuple[RunningRelay, RunningRelay]]:
    """`replica_pair` with BUZZ_MESH on: huddles span the two replicas."""
    async with replica_pair(tmp_path, url, workspace_id, mesh=True) as pair:
        yield pair


@pytest.fixture
async def replicas(
    tmp_path: Path, redis: Redis, workspace_id: str
) -> AsyncIterator[tuple[RunningRelay, RunningRelay]]:
    async with replica_pair(tmp_path, redis_url(), workspace_id) as pair:
        yield pair


@contextlib.asynccontextmanager
async def served_pair(
    tmp_path: Path, workspace_id: str, *, mesh: bool, b_args: Sequence[str] = ()
) -> AsyncIterator[tuple[Served, Served, RunningRelay, RunningRelay]]:
    """Replicas A and B as real `buzz relay serve` processes on one fresh PostgreSQL database and
    the shared Redis, data in `<tmp_path>/{a,b}/data`, BUZZ_MESH=on if `mesh`; `b_args` go to B
    alone. Yields (a, b, ra, rb): the processes and clients' handles on their URLs."""
    env = {"BUZZ_WORKSPACE_ID": workspace_id, **({"BUZZ_MESH": "on"} if mesh else {})}
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
    async with temp_database() as dsn:
        args = ("--db", dsn, "--redis-url", redis_url())
        async with (
            served(tmp_path / "a" / "data", *args, env=env) as a,
            served(tmp_path / "b" / "data", *args, *b_args, env=env) as b,
        ):
            yield a, b, RunningRelay(None, a.url), RunningRelay(None, b.url)  # type: ignore[arg-type]
