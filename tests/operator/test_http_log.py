"""A stranger's malformed HTTP requests cost the log one line per 30 s, not a traceback each
(issue 24 item 17: 2.6 MB/s of ERROR tracebacks from one client sending garbage).

A real relay process gets a few hundred requests that do not parse (bad header values, a bad
URL, a bad chunk size); each is still answered 400 and the relay keeps serving, and its log
holds one WARNING line naming the first, without a traceback (the rest are counted for the
next line, `RepeatLog`, as Redis trouble is).
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import aiohttp
from aiohttp.http_exceptions import BadHttpMessage

from buzz.relay.operator.httplog import HttpErrorLog
from buzz.relay.operator.ratelog import RepeatLog
from tests.operator.support import lines_with, served
from tests.support.deadline import scaled

MALFORMED = (
    b"GET / HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n",
    b"GET /\x01 HTTP/1.1\r\nHost: x\r\n\r\n",
    b"POST /events HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
    b"GET / HTTP/1.1\r\nHost: x\r\nBad Header\r\n\r\n",
)
ROUNDS = 60  # 240 malformed requests


async def _send(port: int, payload: bytes) -> bytes:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(payload)
        await writer.drain()
        return await asyncio.wait_for(reader.read(64), scaled(10))
    finally:
        writer.close()
        await writer.wait_closed()


async def test_malformed_requests_log_one_line_without_a_traceback(tmp_path: Path) -> None:
    async with served(tmp_path / "data") as relay:
        for _ in range(ROUNDS):
            answers = await asyncio.gather(*(_send(relay.port, p) for p in MALFORMED))
            assert all(a.startswith(b"HTTP/1.") and b" 400 " in a[:16] for a in answers), answers
        async with aiohttp.ClientSession() as http, http.get(f"{relay.http_url}/health") as resp:
            assert resp.status == 200  # still serving
        assert await relay.stop() == 0
    log = relay.log_text()
    assert "Traceback" not in log and "Error handling request" not in log, log[:2000]
    refused = lines_with(log, "WARNING", "http request refused", "status=400")
    assert len(refused) == 1, refused  # the first one; the others are counted for 30 s
    assert "remote=127.0.0.1" in refused[0] and "\\x01" not in refused[0]
    assert len(log.encode()) < 4096, (
        f"{len(log.encode())} bytes of log for {ROUNDS * len(MALFORMED)} requests"
    )


def test_only_a_client_s_malformed_request_loses_its_traceback() -> None:
    """An exception in one of our handlers is ours: it keeps aiohttp's ERROR and traceback."""
    records: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record)

    base, ops = logging.getLogger("test.httplog.server"), logging.getLogger("test.httplog.ops")
    for logger in (base, ops):
        logger.addHandler(Keep())
        logger.propagate = False
    adapter = HttpErrorLog(base, RepeatLog(ops, clock=lambda: 0.0))
    for _ in range(3):
        adapter.exception("Error handling request from %s", "10.0.0.9", exc_info=BadHttpMessage("Bad header"))
    adapter.exception("Unhandled exception", exc_info=RuntimeError("our bug"))
    assert [(r.name, r.levelname, r.exc_info is not None) for r in records] == [
        ("test.httplog.ops", "WARNING", False),
        ("test.httplog.server", "ERROR", True),
    ]
    assert records[0].getMessage() == 'http request refused remote=10.0.0.9 status=400 reason="Bad header"'
