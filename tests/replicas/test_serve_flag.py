"""`buzz relay serve --redis-url` (agents.md §2.2) as an operator runs it: a real subprocess on
PostgreSQL joins the workspace's topics on the shared Redis; with SQLite it refuses to start
(relay.md §13.1: SQLite is single-process)."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from redis.asyncio import Redis

from tests.replicas.conftest import redis_url
from tests.replicas.helpers import subscribers
from tests.support.deadline import scaled
from tests.support.pg import temp_database

pytestmark = [pytest.mark.redis, pytest.mark.postgres]

BUZZ = str(Path(sys.executable).with_name("buzz"))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_redis_url_with_sqlite_is_refused(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("BUZZ_DATABASE_URL", "DATABASE_URL")}
    result = subprocess.run(
        [BUZZ, "relay", "serve", "--data-dir", str(tmp_path), "--redis-url", "redis://127.0.0.1:6379/0"],
        capture_output=True,
        text=True,
        env=env,
        timeout=30,
    )
    assert result.returncode != 0
    assert "--redis-url needs PostgreSQL" in result.stderr  # the flag that was typed (issue 24 item 8)


async def test_serve_with_redis_url_subscribes_the_workspace_topics(
    tmp_path: Path, redis: Redis, workspace_id: str
) -> None:
    port = _free_port()
    async with temp_database() as dsn:
        proc = await asyncio.create_subprocess_exec(
            BUZZ,
            *("relay", "serve", "--bind", f"127.0.0.1:{port}", "--data-dir", str(tmp_path)),
            *("--db", dsn, "--redis-url", redis_url()),
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env={**os.environ, "BUZZ_WORKSPACE_ID": workspace_id},
        )
        try:
            assert proc.stdout is not None
            banner = [(await asyncio.wait_for(proc.stdout.readline(), scaled(20))).decode() for _ in range(9)]
            assert f"ws://127.0.0.1:{port}" in banner[0]
            assert any(f"Redis pub/sub, workspace '{workspace_id}' (replica mode)" in line for line in banner)
            assert not any(
                "@" in line for line in banner
            )  # the store line names host/db, no user or password
            assert await subscribers(redis, f"buzz:{workspace_id}:global") == 1
            assert await subscribers(redis, f"buzz:{workspace_id}:control") == 1
            proc.send_signal(signal.SIGTERM)
            assert await asyncio.wait_for(proc.wait(), scaled(20)) == 0
        finally:
            if proc.returncode is None:
                proc.kill()
                await proc.wait()
