"""Ctrl-C (SIGINT) on a real `buzz` process (issue 24 item 7): one JSON line on stderr and exit
130 at start-up and while a one-shot command waits on a relay that does not answer."""

from __future__ import annotations

import asyncio
import signal
from collections.abc import AsyncIterator
from pathlib import Path

import orjson
import pytest

from tests.cli.helpers import BUZZ, _env
from tests.support.deadline import scaled
from tests.support.relay import Identity

CHANNEL = "27c48662-b5b4-4ead-881f-0fdd743d79b3"


class SilentRelay:
    """A TCP server that reads one HTTP request and never answers it."""

    def __init__(self) -> None:
        self.asked = asyncio.Event()
        self.connections = 0

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            await reader.readuntil(b"\r\n\r\n")
            self.asked.set()
            await reader.read()  # until the client goes away
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()


@pytest.fixture
async def silent() -> AsyncIterator[tuple[SilentRelay, str]]:
    relay = SilentRelay()
    server = await asyncio.start_server(relay.handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    async with server:
        yield relay, f"ws://127.0.0.1:{port}"


SEND = ("messages", "send", "--channel", CHANNEL, "--content", "are you there?")


async def _buzz(url: str, *args: str) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        BUZZ,
        *args,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=_env(url, Identity.new(), None),
    )


async def _interrupted(proc: asyncio.subprocess.Process) -> None:
    proc.send_signal(signal.SIGINT)
    out, err = await asyncio.wait_for(proc.communicate(), scaled(30))
    assert proc.returncode == 130, (proc.returncode, err.decode())
    assert out == b""
    lines = err.decode().splitlines()
    assert len(lines) == 1, err.decode()
    error = orjson.loads(lines[0])
    assert (error["error"], error["retryable"]) == ("interrupted", False)
    assert "Ctrl-C" in error["message"]


async def _mapped(proc: asyncio.subprocess.Process, library: str) -> None:
    """Wait until the process has loaded the shared object whose path contains `library`:
    a point inside its start-up, before it has any answer to wait for."""
    maps = Path(f"/proc/{proc.pid}/maps")
    while library not in maps.read_text():
        assert proc.returncode is None, "the command ended before the library was loaded"
        await asyncio.sleep(0.001)


# over the HTTP bridge, over the WebSocket (presence), and `mem` (its own command runner)
@pytest.mark.parametrize(
    "args", [SEND, ("users", "set-presence", "online"), ("mem", "ls", "--owner", "ab" * 32)]
)
async def test_ctrl_c_while_a_one_shot_command_waits_on_the_relay(
    silent: tuple[SilentRelay, str], args: tuple[str, ...]
) -> None:
    relay, url = silent
    proc = await _buzz(url, *args)
    await relay.asked.wait()  # the request is out; no answer will come
    await _interrupted(proc)


# orjson is loaded by the entry itself (an extension whose initialisation an exception would
# crash), aiohttp's HTTP parser by the command group's import, 0.1-0.3 s later.
@pytest.mark.parametrize("library", ["orjson", "aiohttp/_http_parser"])
async def test_ctrl_c_at_start_up(silent: tuple[SilentRelay, str], library: str) -> None:
    _, url = silent
    proc = await _buzz(url, *SEND)
    await _mapped(proc, library)
    await _interrupted(proc)
