"""Plain HTTP bounds (issue 24 item 13, docs/limits.md): a request body is cut after the body
timeout, requests in progress and HTTP connections are capped below the open-file limit, and a
stranger trickling bytes never keeps a WebSocket + AUTH or `/health` out. Real relays, real
sockets: raw TCP for the hostile side, the buzz client and aiohttp for the bystanders."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path

import aiohttp

from buzz.client import RelayClient
from buzz.core.limits import HTTP_RETRY_AFTER_S
from buzz.relay.operator.metrics_prom import sample_values
from buzz.relay.transport.http_guard import BODY_TIMEOUT_STAT, BUSY_STAT, EVICTED_STAT, FdBudget, fd_budget
from tests.operator.support import free_port, served
from tests.support.relay import Identity, relay_on

LIVENESS_S = 30.0  # how long a step that takes milliseconds may take before the test gives up
Conn = tuple[asyncio.StreamReader, asyncio.StreamWriter]


async def until(condition: Callable[[], bool]) -> None:
    async with asyncio.timeout(LIVENESS_S):
        while not condition():
            await asyncio.sleep(0.01)


async def slow_post(port: int, path: str = "/events", extra: str = "") -> Conn:
    """A POST whose headers promise 1000 bytes of body, of which 10 are sent, then nothing."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(
        f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n"
        f"{extra}Content-Length: 1000\r\n\r\n".encode()
        + b'{"id":"00'
    )
    await writer.drain()
    return reader, writer


async def answer(reader: asyncio.StreamReader) -> tuple[int, dict[str, str], bytes]:
    """The whole answer on a connection the relay closes after it: status, headers, body."""
    async with asyncio.timeout(LIVENESS_S):
        raw = await reader.read()  # to EOF: the relay must close the connection
    head, _, body = raw.partition(b"\r\n\r\n")
    lines = head.decode().split("\r\n")
    headers = dict(line.split(": ", 1) for line in lines[1:])
    return int(lines[0].split()[1]), headers, body


async def health(http_url: str) -> tuple[int, str]:
    async with asyncio.timeout(LIVENESS_S), aiohttp.ClientSession() as http:
        async with http.get(http_url + "/health") as resp:
            return resp.status, await resp.text()


async def websocket_and_auth(url: str, who: Identity) -> None:
    async with asyncio.timeout(LIVENESS_S), RelayClient(url, who.secret) as client:
        assert client.pubkey == who.pubkey  # AUTH answered OK true


def close_all(conns: list[Conn]) -> None:
    for _, writer in conns:
        writer.close()


async def test_a_stalled_body_is_cut_after_the_body_timeout(tmp_path: Path) -> None:
    async with relay_on(tmp_path, http_body_timeout_s=0.5) as running:
        port = int(running.http_url.rsplit(":", 1)[1])
        reader, writer = await slow_post(port)
        started = time.monotonic()
        status, headers, body = await answer(reader)
        print(f"stalled body cut after {time.monotonic() - started:.2f} s (body timeout 0.5 s)")
        writer.close()
        assert status == 408
        assert headers["Connection"] == "close"
        assert b"invalid: request body not received within 0.5 s" in body
        assert running.relay.stats[BODY_TIMEOUT_STAT] == 1


async def test_slow_posts_beyond_the_cap_get_503_and_websockets_and_health_still_work(
    tmp_path: Path, alice: Identity
) -> None:
    # Timeouts far beyond the test, so that only the caps act (however loaded the machine).
    slow = {"http_header_timeout_s": 600, "http_body_timeout_s": 600}
    async with relay_on(tmp_path, max_http_connections=8, **slow) as running:
        guard = running.relay.http_guard
        assert guard.budget.http_requests == 4  # half the connections may have a request in progress
        port = int(running.http_url.rsplit(":", 1)[1])
        held = [await slow_post(port) for _ in range(4)]
        await until(lambda: guard.requests == 4)
        refused: list[Conn] = []
        # A WebSocket upgrade is a GET: the header on a POST does not take it out of the count.
        upgrade = "Connection: Upgrade\r\nUpgrade: websocket\r\n"
        for path, extra in [
            *((p, "") for p in ("/events", "/query", "/count", "/history", "/info")),
            ("/events", upgrade),
        ]:
            refused.append(await slow_post(port, path, extra))
            # answered at once and closed, without waiting for its body
            status, headers, body = await answer(refused[-1][0])
            assert status == 503
            assert headers["Retry-After"] == str(HTTP_RETRY_AFTER_S)
            assert headers["Connection"] == "close"
            assert b"rate-limited: too many HTTP requests in progress" in body
        assert running.relay.stats[BUSY_STAT] == len(refused)
        await websocket_and_auth(running.url, alice)
        assert await health(running.http_url) == (200, "ok")
        assert guard.requests == 4
        close_all(held + refused)
        await until(lambda: guard.requests == 0)
        async with aiohttp.ClientSession() as http:  # the cap frees as they go
            async with http.post(running.http_url + "/events", data=b"{}") as resp:
                assert resp.status == 401  # reached the bridge: NIP-98 is missing


async def test_idle_connections_at_the_cap_make_room_for_health_and_websockets(
    tmp_path: Path, alice: Identity
) -> None:
    async with relay_on(tmp_path, max_http_connections=8, http_header_timeout_s=600) as running:
        guard = running.relay.http_guard
        port = int(running.http_url.rsplit(":", 1)[1])
        silent: list[Conn] = []
        for _ in range(8):  # connections that never send a request
            silent.append(await asyncio.open_connection("127.0.0.1", port))
            await until(lambda: guard.connections == len(silent))
        assert await health(running.http_url) == (200, "ok")  # in place of the oldest
        await until(lambda: guard.connections == 7)  # /health's connection closed after it
        silent.append(await asyncio.open_connection("127.0.0.1", port))
        await until(lambda: guard.connections == 8)
        await websocket_and_auth(running.url, alice)  # in place of the next oldest
        async with asyncio.timeout(LIVENESS_S):
            assert await silent[0][0].read() == b""
            assert await silent[1][0].read() == b""
        await until(lambda: guard.connections == len(silent) - 2)  # the others are still open
        assert running.relay.stats[EVICTED_STAT] == 2
        close_all(silent)


async def test_slow_posts_beyond_the_open_file_limit_keep_websockets_and_health_working(
    tmp_path: Path, alice: Identity
) -> None:
    """The caps come from RLIMIT_NOFILE: a relay allowed 256 open files, under more slow POSTs
    than that, still takes a WebSocket + AUTH and answers `/health` (before: EMFILE, nothing)."""
    nofile = 256
    budget = fd_budget(nofile, 10_000)
    metrics_port = free_port()
    metrics_bind = ("--metrics-bind", f"127.0.0.1:{metrics_port}")
    async with served(tmp_path / "data", *metrics_bind, nofile=nofile) as relay:
        slow = [await slow_post(relay.port) for _ in range(nofile + 44)]
        await websocket_and_auth(relay.url, alice)
        assert await health(relay.http_url) == (200, "ok")
        async with asyncio.timeout(LIVENESS_S), aiohttp.ClientSession() as http:
            async with http.get(f"http://127.0.0.1:{metrics_port}/metrics") as resp:
                text = await resp.text()
        refused = {labels: int(n) for labels, n in sample_values(text, "buzz_http_refused_total")}
        print(f"{len(slow)} slow POSTs; {budget}; closed by the relay: {refused}")
        # At most `http_connections` of them are still open: the relay closed the others.
        assert sum(refused.values()) >= len(slow) - budget.http_connections
        close_all(slow)


async def test_websockets_beyond_what_the_open_files_allow_get_503_and_health_answers(
    tmp_path: Path, alice: Identity
) -> None:
    """BUZZ_MAX_CONNECTIONS (10,000) is lowered to what RLIMIT_NOFILE leaves: with 160 open
    files, 160 authenticated WebSockets get 503 beyond the budget instead of taking every file
    (before: the relay stopped accepting, `/health` included)."""
    nofile = 160
    budget = fd_budget(nofile, 10_000)
    async with served(tmp_path / "data", nofile=nofile) as relay:
        clients: list[RelayClient] = []
        refused = 0
        try:
            for _ in range(nofile):
                client = RelayClient(relay.url, alice.secret)
                try:
                    async with asyncio.timeout(LIVENESS_S):
                        await client.connect()
                except aiohttp.WSServerHandshakeError as exc:
                    assert exc.status == 503
                    refused += 1
                else:
                    clients.append(client)
            assert await health(relay.http_url) == (200, "ok")
        finally:
            await asyncio.gather(*(client.close() for client in clients))
        assert (len(clients), refused) == (budget.websockets, nofile - budget.websockets)
        assert f"at most {budget.websockets} WebSockets" in relay.log_text()


def test_the_open_file_shares_of_docs_limits() -> None:
    assert fd_budget(1024, 10_000) == FdBudget(1024, 224, 112, 560)
    assert fd_budget(11_408, 10_000) == FdBudget(11_408, 1024, 256, 10_000)
    assert fd_budget(11_407, 10_000).websockets == 9_999
    assert fd_budget(1024, 10_000, http_connections=8) == FdBudget(1024, 8, 4, 884)
