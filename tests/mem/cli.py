"""Run the real `buzz` console script as a subprocess against a running relay."""

from __future__ import annotations

import asyncio
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from tests.support.relay import Identity, RunningRelay

BUZZ = str(Path(sys.executable).with_name("buzz"))


@dataclass(frozen=True)
class Run:
    code: int
    stdout: bytes
    stderr: str

    @property
    def error(self) -> dict[str, Any]:
        """The JSON error object: the last stderr line."""
        return orjson.loads(self.stderr.strip().splitlines()[-1])

    @property
    def json(self) -> Any:
        return orjson.loads(self.stdout)

    def expect_error(self, code: int, category: str, *fragments: str) -> dict[str, Any]:
        assert self.code == code, (self.code, self.stdout, self.stderr)
        assert self.stdout == b"", self.stdout
        err = self.error
        assert err["error"] == category, err
        assert isinstance(err["retryable"], bool)
        for fragment in fragments:
            assert fragment in err["message"], (fragment, err)
        return err


def base_env(url: str, who: Identity | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("BUZZ_")}
    env["BUZZ_RELAY_URL"] = url
    if who is not None:
        env["BUZZ_PRIVATE_KEY"] = who.secret
    return env


async def buzz_mem(
    relay: RunningRelay | str,
    who: Identity | None,
    *args: str,
    stdin: bytes | None = b"",
    env: dict[str, str] | None = None,
) -> Run:
    """`buzz mem <args>` as `who`; `stdin` None leaves the pipe open until the process reads EOF."""
    url = relay if isinstance(relay, str) else relay.url
    proc = await asyncio.create_subprocess_exec(
        BUZZ,
        "mem",
        *args,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={**base_env(url, who), **(env or {})},
    )
    out, err = await proc.communicate(stdin)
    assert proc.returncode is not None
    return Run(proc.returncode, out, err.decode("utf-8", "replace"))


async def start_mem(relay: RunningRelay, who: Identity, *args: str) -> asyncio.subprocess.Process:
    """Start `buzz mem <args>` with stdin held open (feed it later with `finish`)."""
    return await asyncio.create_subprocess_exec(
        BUZZ,
        "mem",
        *args,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=base_env(relay.url, who),
    )


async def finish(proc: asyncio.subprocess.Process, stdin: bytes) -> Run:
    out, err = await proc.communicate(stdin)
    assert proc.returncode is not None
    return Run(proc.returncode, out, err.decode("utf-8", "replace"))
