"""Shared parts of the hostile-traffic benches (bench/refusals.py, bench/soak.py).

A buzz relay as a child process on a loopback port (killed on exit), its resident set size
from /proc, and the raw WebSocket moves a hostile client makes. Loopback only.
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import aiohttp
import orjson

from buzz.core.event import Event
from buzz.core.nip42 import build_auth_event

STARTUP_TIMEOUT_S = 30.0
MSG_TIMEOUT_S = 10.0
MIB = 1 << 20


class BenchError(RuntimeError):
    pass


@dataclass
class RelayProc:
    proc: subprocess.Popen[bytes]
    log_path: Path
    url: str = ""

    def rss_bytes(self) -> int:
        """VmRSS of the relay process, bytes (proc(5))."""
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
        raise BenchError("no VmRSS for the relay process")

    def log_tail(self, lines: int = 15) -> str:
        with contextlib.suppress(OSError):
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        return ""

    def stop(self) -> None:
        """SIGTERM the relay's process group (its own session), then SIGKILL what is left."""
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=10)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=5)


@contextlib.contextmanager
def buzz_relay(tmp: Path, env: dict[str, str] | None = None) -> Iterator[RelayProc]:
    """`buzz relay serve` on 127.0.0.1:<free port> with SQLite in `tmp`; stopped on exit."""
    data = tmp / "buzz-data"
    data.mkdir(exist_ok=True)
    buzz = Path(sys.executable).with_name("buzz")
    argv = [str(buzz), "relay", "serve", "--bind", "127.0.0.1:0", "--data-dir", str(data)]
    argv += ["--log-level", "WARNING"]
    log_path = tmp / "buzz.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            argv, cwd=tmp, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            env=dict(os.environ, PYTHONUNBUFFERED="1", **(env or {})), start_new_session=True,
        )  # fmt: skip
    relay = RelayProc(proc, log_path)
    try:
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        while not relay.url:
            m = re.search(r"listening on (ws://\S+)", log_path.read_text(errors="replace"))
            if m:
                relay.url = m.group(1)
            elif proc.poll() is not None or time.monotonic() > deadline:
                raise BenchError(f"buzz relay did not start:\n{relay.log_tail()}")
            else:
                time.sleep(0.05)
        yield relay
    finally:
        relay.stop()


async def receive_json(ws: aiohttp.ClientWebSocketResponse, timeout: float = MSG_TIMEOUT_S) -> list:
    msg = await ws.receive(timeout)
    if msg.type != aiohttp.WSMsgType.TEXT:
        raise BenchError(f"expected a text frame, got {msg.type!r}")
    return orjson.loads(msg.data)


async def authenticate(ws: aiohttp.ClientWebSocketResponse, url: str, secret: str) -> None:
    """Answer the relay's challenge (the first frame) with a valid kind 22242."""
    challenge = (await receive_json(ws))[1]
    auth = build_auth_event(secret, challenge, url).to_dict()
    await ws.send_str(orjson.dumps(["AUTH", auth]).decode())
    answer = await receive_json(ws)
    if answer[:3] != ["OK", auth["id"], True]:
        raise BenchError(f"AUTH refused: {answer}")


def frame(*parts: object) -> str:
    return orjson.dumps(list(parts)).decode()


def event_frame(secret: str, content: str, kind: int = 1) -> tuple[str, str]:
    """(event id, `["EVENT", …]` text) for a freshly signed event (a nonce tag keeps equal
    contents from being duplicates)."""
    event = Event.create(secret, kind, content, [["nonce", secrets.token_hex(8)]])
    return event.id, frame("EVENT", event.to_dict())
