"""Run the real `buzz` executable as a subprocess and parse what it prints."""

from __future__ import annotations

import asyncio
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from tests.support.deadline import scaled
from tests.support.relay import Identity

BUZZ = str(Path(sys.executable).parent / "buzz")


@dataclass
class Result:
    code: int
    stdout: str
    stderr: str

    @property
    def json(self) -> Any:
        """The one JSON document on stdout (agents.md §2.1 item 1)."""
        assert self.code == 0, (self.code, self.stderr)
        return orjson.loads(self.stdout)

    @property
    def error(self) -> dict[str, Any]:
        """The one JSON line on stderr of a failure (agents.md §2.1 item 2)."""
        assert self.code != 0 and self.stdout == "", (self.code, self.stdout)
        lines = [line for line in self.stderr.splitlines() if line.strip()]
        assert len(lines) == 1, self.stderr
        return orjson.loads(lines[0])


def _env(relay_url: str | None, who: Identity | None, extra: dict[str, str] | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("BUZZ_")}
    if relay_url is not None:
        env["BUZZ_RELAY_URL"] = relay_url
    if who is not None:
        env["BUZZ_PRIVATE_KEY"] = who.secret
    env.update(extra or {})
    return env


async def buzz(
    relay_url: str | None,
    who: Identity | None,
    *args: str,
    stdin: bytes | None = None,
    env: dict[str, str] | None = None,
) -> Result:
    """`buzz <args>` with BUZZ_RELAY_URL / BUZZ_PRIVATE_KEY set from the arguments."""
    proc = await asyncio.create_subprocess_exec(
        BUZZ,
        *args,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=_env(relay_url, who, env),
    )
    out, err = await asyncio.wait_for(proc.communicate(stdin or b""), scaled(60))
    result = Result(proc.returncode or 0, out.decode(), err.decode())
    if who is not None:  # agents.md §1.1 item 3: a secret key never appears in CLI output
        assert who.secret not in result.stdout + result.stderr
    return result
