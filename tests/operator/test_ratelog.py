"""Repeated trouble is logged once, then counted (issue 9 item 11): the `RepeatLog` helper on a
fake clock, and a real relay process whose own Redis server is killed and restarted."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import aiohttp
import pytest

from buzz.client import RelayClient
from buzz.core.event import Event
from buzz.relay.operator.metrics_prom import sample_values
from buzz.relay.operator.ratelog import RepeatLog
from tests.operator.support import free_port, lines_with, served
from tests.replicas.conftest import unreachable
from tests.support.pg import temp_database
from tests.support.relay import Identity


class _Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_first_line_then_one_count_per_interval_then_the_tail_on_recovery(caplog) -> None:
    clock, logger = _Clock(), logging.getLogger("test.ratelog")
    repeats = RepeatLog(logger, interval_s=30, clock=clock)
    with caplog.at_level(logging.INFO, logger="test.ratelog"):
        for n in range(100):  # 100 failures in 10 s: one line
            repeats.error("publish", "publish failed: %s", f"try {n}")
            clock.now += 0.1
        assert [r.getMessage() for r in caplog.records] == ["publish failed: try 0"]
        clock.now += 25  # 35 s after the first line
        repeats.error("publish", "publish failed: %s", "try 100")
        repeats.warning("other", "another key is its own line")
        clock.now += 5
        repeats.error("publish", "publish failed: %s", "try 101")
        repeats.recovered("publish", "publishing works again")
        repeats.recovered("publish", "said once only")
    assert [r.getMessage() for r in caplog.records] == [
        "publish failed: try 0",
        "publish failed: try 100 (repeated 99 times in the last 35 s)",
        "another key is its own line",
        "publish failed: try 101 (repeated 1 times in the last 5 s)",
        "publishing works again",
    ]
    assert [r.levelno for r in caplog.records] == [40, 40, 30, 40, 20]
    assert not repeats.active("publish")


@contextlib.contextmanager
def _redis_server(port: int) -> Iterator[subprocess.Popen[bytes]]:
    exe = shutil.which("redis-server")
    if exe is None:
        unreachable("redis-server not installed: apt-get install redis-server")
    proc = subprocess.Popen(
        [exe, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        yield proc
    finally:
        proc.kill()
        proc.wait()


async def _wait_redis(port: int) -> None:
    for _ in range(100):
        try:
            _, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.close()
            return
        except OSError:
            await asyncio.sleep(0.05)
    pytest.fail("redis-server did not start")


async def _bus_connected(metrics_url: str) -> float:
    async with aiohttp.ClientSession() as s, s.get(metrics_url) as r:
        return dict(sample_values(await r.text(), "buzz_redis_bus_connected"))[""]


async def test_a_redis_outage_logs_one_error_then_counts_and_says_when_it_is_over(tmp_path: Path) -> None:
    redis_port, metrics_port = free_port(), free_port()
    metrics_url = f"http://127.0.0.1:{metrics_port}/metrics"
    alice = Identity.new()
    async with temp_database() as dsn:
        server = _redis_server(redis_port)
        server.__enter__()
        try:
            await _wait_redis(redis_port)
            args = (
                "--db",
                dsn,
                "--redis-url",
                f"redis://127.0.0.1:{redis_port}/0",
                "--metrics-bind",
                f"127.0.0.1:{metrics_port}",
            )
            async with served(tmp_path / "data", *args) as relay:
                assert any("replica mode" in line for line in relay.banner)
                assert await _bus_connected(metrics_url) == 1
                async with RelayClient(relay.url, alice.secret) as a:
                    assert (await a.publish(Event.create(alice.secret, 1, "before"))).accepted
                    server.__exit__(None, None, None)  # the outage
                    for n in range(30):  # each accepted locally; each publish to Redis fails
                        assert (await a.publish(Event.create(alice.secret, 1, f"during {n}"))).accepted
                    await asyncio.sleep(0.5)
                    assert await _bus_connected(metrics_url) == 0
                    during = relay.log_text()
                    server = _redis_server(redis_port)
                    server.__enter__()
                    await _wait_redis(redis_port)
                    for _ in range(200):  # the listener retries after 1 s, 2 s, 4 s …
                        if await _bus_connected(metrics_url) == 1:
                            break
                        await asyncio.sleep(0.1)
                    assert (await a.publish(Event.create(alice.secret, 1, "after"))).accepted
                    await asyncio.sleep(0.5)
                await relay.stop()
        finally:
            server.__exit__(None, None, None)
    assert len(lines_with(during, "ERROR", "Redis publish of")) == 1  # not 30
    assert len(lines_with(during, "Redis bus connection lost")) == 1
    log = relay.log_text()
    counted = [int(m) for m in re.findall(r"Redis publish of .*\(repeated (\d+) times in the last", log)]
    assert len(counted) == 1 and counted[0] >= 29  # the other 29 of the outage, in one line
    assert lines_with(log, "INFO", "Redis publishing works again")
    assert lines_with(log, "INFO", "Redis bus connected again")
