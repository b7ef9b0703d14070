"""A redis-server of the test's own on a free loopback port, to hang (SIGSTOP), stop and start.

The shared test Redis is never touched: fault tests need a server they may freeze or kill.
Without `redis-server` on PATH the test skips with how to install it (fails under CI=true).
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import signal
import socket
from collections.abc import AsyncIterator
from pathlib import Path

from redis.asyncio import Redis
from redis.exceptions import RedisError

from tests.replicas.conftest import unreachable


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class OwnRedis:
    """One redis-server process; `url` stays the same across `stop()` / `start()`."""

    def __init__(self, workdir: Path) -> None:
        self.port = _free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self._workdir = workdir
        self._proc: asyncio.subprocess.Process | None = None

    async def start(self) -> None:
        binary = shutil.which("redis-server")
        if binary is None:
            unreachable("redis-server not on PATH; install it with: apt-get install redis-server")
        self._workdir.mkdir(parents=True, exist_ok=True)
        self._proc = await asyncio.create_subprocess_exec(
            binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
            "--dir", str(self._workdir),
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.DEVNULL,
        )  # fmt: skip
        client = Redis.from_url(self.url, socket_connect_timeout=1)
        try:
            for _ in range(100):
                with contextlib.suppress(RedisError, OSError):
                    if await client.ping():
                        return
                await asyncio.sleep(0.05)
            raise AssertionError(f"own redis-server on port {self.port} did not answer")
        finally:
            await client.aclose()

    def hang(self) -> None:
        """SIGSTOP: the socket stays open, nothing answers."""
        assert self._proc is not None
        self._proc.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        assert self._proc is not None
        self._proc.send_signal(signal.SIGCONT)

    async def stop(self) -> None:
        """Kill the server (connections drop); `start()` brings it back on the same port."""
        if self._proc is not None and self._proc.returncode is None:
            self._proc.send_signal(signal.SIGCONT)
            self._proc.kill()
            await self._proc.wait()
        self._proc = None


@contextlib.asynccontextmanager
async def own_redis(workdir: Path) -> AsyncIterator[OwnRedis]:
    server = OwnRedis(workdir)
    await server.start()
    try:
        yield server
    finally:
        await server.stop()
