"""A real `buzz relay serve` process for operator tests: banner on stdout, log in a file."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import os
import resource
import signal
import socket
import subprocess
import sys
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from tests.support.deadline import scaled

BUZZ = str(Path(sys.executable).with_name("buzz"))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def clean_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """This process's environment without its BUZZ_* and RELAY_* variables, then `extra`: what a
    `buzz` child sees, so the developer's own settings never leak into a test."""
    base = {k: v for k, v in os.environ.items() if not k.startswith(("BUZZ_", "RELAY_"))}
    return {**base, **(extra or {})}


@dataclass
class Served:
    proc: asyncio.subprocess.Process
    port: int
    banner: list[str]
    log_path: Path

    @property
    def url(self) -> str:
        return f"ws://127.0.0.1:{self.port}"

    @property
    def http_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def log_text(self) -> str:
        return self.log_path.read_text(encoding="utf-8", errors="replace")

    async def stop(self) -> int:
        """SIGTERM, wait; returns the exit code."""
        if self.proc.returncode is None:
            self.proc.send_signal(signal.SIGTERM)
        return await asyncio.wait_for(self.proc.wait(), scaled(20))


BANNER_LINES = 12  # the banner's lines, the browser URL last (buzz.relay.banner)


@contextlib.asynccontextmanager
async def served(
    data_dir: Path,
    *args: str,
    env: dict[str, str] | None = None,
    log_name: str = "relay.log",
    nofile: int | None = None,
    port: int | None = None,
) -> AsyncIterator[Served]:
    """`buzz relay serve --bind 127.0.0.1:<port, default a free one> --data-dir <data_dir>
    <args>`; yields once the banner is printed; its stderr (the log) goes to
    `<data_dir>/../<log_name>`. `nofile` sets the process's open-file limit (soft and hard
    RLIMIT_NOFILE). The same `port` and `data_dir` again restart the relay."""
    port = free_port() if port is None else port
    limit = None if nofile is None else functools.partial(_limit_open_files, nofile)
    log_path = data_dir.parent / log_name
    with open(log_path, "wb") as log_file:
        proc = await asyncio.create_subprocess_exec(
            BUZZ,
            "relay",
            "serve",
            "--bind",
            f"127.0.0.1:{port}",
            "--data-dir",
            str(data_dir),
            *args,
            stdout=asyncio.subprocess.PIPE,
            stderr=log_file,
            env=clean_env(env),
            preexec_fn=limit,
        )
    try:
        assert proc.stdout is not None
        banner = []
        for _ in range(BANNER_LINES):
            line = (await asyncio.wait_for(proc.stdout.readline(), scaled(20))).decode()
            assert line, f"relay exited early: {log_path.read_text()}"
            banner.append(line.rstrip("\n"))
        yield Served(proc, port, banner, log_path)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


def _limit_open_files(n: int) -> None:
    resource.setrlimit(resource.RLIMIT_NOFILE, (n, n))


def buzz(*argv: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """Run the `buzz` command; never raises on a non-zero exit."""
    return subprocess.run([BUZZ, *argv], capture_output=True, text=True, timeout=60, env=clean_env(env))


def admin(data_dir: Path, *argv: str) -> object:
    """`buzz --format compact admin --data-dir <dir> <argv>` → its JSON output (exit 0 asserted)."""
    done = buzz("--format", "compact", "admin", "--data-dir", str(data_dir), *argv)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def json_lines(text: str) -> list[dict[str, object]]:
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def lines_with(text: str, *needles: str) -> Sequence[str]:
    return [line for line in text.splitlines() if all(n in line for n in needles)]
