"""Start-up checks of what the harness will spawn (issue 14 item 3).

Before connecting to the relay, `buzz agent run` spawns the agent command and sends ACP
`initialize`, and spawns each `--mcp-command` server with the environment sessions will give it
and completes the MCP `initialize` handshake (the `mcp` package's stdio client). A failure is
a `PreflightError` with one line naming the command and the reason; the CLI prints it as its
JSON error and exits 1, instead of accepting the flag and failing later as an agent stderr line.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shlex
from collections.abc import Mapping

MCP_INIT_TIMEOUT_S = 30.0


class PreflightError(Exception):
    """A command the harness needs does not start; `str` is the one-line reason."""


async def _mcp_handshake(words: list[str], env: Mapping[str, str], cwd: str) -> None:
    from mcp.client.stdio import StdioServerParameters, stdio_client

    from mcp import ClientSession

    params = StdioServerParameters(command=words[0], args=words[1:], env=dict(env), cwd=cwd)
    with open(os.devnull, "w", encoding="utf-8") as errlog:  # its stderr is not our one line
        async with stdio_client(params, errlog=errlog) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()


async def check_mcp(
    command: str, env: Mapping[str, str], cwd: str, timeout: float = MCP_INIT_TIMEOUT_S
) -> None:
    """Spawn the `--mcp-command` server and complete MCP `initialize`. Raises PreflightError."""
    words = shlex.split(command or "")
    if not words:
        return
    try:
        await asyncio.wait_for(_mcp_handshake(words, env, cwd), timeout)
    except TimeoutError:
        raise PreflightError(
            f"--mcp-command {command!r}: no MCP initialize answer within {timeout:g} s"
        ) from None
    except Exception as exc:
        raise PreflightError(f"--mcp-command {command!r} does not start: {_reason(exc)}") from None


def _reason(exc: BaseException) -> str:
    # anyio wraps failures in exception groups; the first leaf is the useful one
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    text = str(exc) or type(exc).__name__
    with contextlib.suppress(Exception):
        text = text.splitlines()[0]
    return text
