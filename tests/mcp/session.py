"""An MCP client session (the official `mcp` SDK) on a real `buzz mcp` subprocess."""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from mcp import ClientSession, InitializeResult, StdioServerParameters, stdio_client
from tests.support.relay import Identity

BUZZ = str(Path(sys.executable).parent / "buzz")


@dataclass
class McpServer:
    """A connected session; `log()` is the server's stderr (complete once the context exits)."""

    session: ClientSession
    init: InitializeResult
    stderr_file: Any
    final_log: str | None = None

    def log(self) -> str:
        if self.final_log is not None:
            return self.final_log
        self.stderr_file.flush()
        self.stderr_file.seek(0)
        return self.stderr_file.read()

    async def call(self, name: str, arguments: dict[str, Any] | None = None) -> tuple[bool, dict[str, Any]]:
        """(isError, the JSON object). The text content and the structured content must agree."""
        result = await self.session.call_tool(name, arguments or {})
        assert len(result.content) == 1 and result.content[0].type == "text"
        payload = orjson.loads(result.content[0].text)
        assert result.structured_content == payload
        return result.is_error, payload

    async def ok(self, name: str, arguments: dict[str, Any] | None = None) -> dict[str, Any]:
        is_error, payload = await self.call(name, arguments)
        assert not is_error, payload
        return payload

    async def error(self, name: str, arguments: dict[str, Any] | None = None) -> dict[str, Any]:
        """The CLI error object of a failed call (agents.md §2.1 item 2)."""
        is_error, payload = await self.call(name, arguments)
        assert is_error, payload
        assert {"error", "message", "retryable"} <= set(payload), payload
        return payload


@contextlib.asynccontextmanager
async def mcp_server(
    relay_url: str,
    who: Identity,
    auth_tag: list[str] | None = None,
    *args: str,
    env: dict[str, str] | None = None,
) -> AsyncIterator[McpServer]:
    """`buzz mcp` with BUZZ_RELAY_URL, BUZZ_PRIVATE_KEY and (when given) BUZZ_AUTH_TAG in its
    environment (plus `env`), and an initialized client session on its stdio."""
    env = {"BUZZ_RELAY_URL": relay_url, "BUZZ_PRIVATE_KEY": who.secret, **(env or {})}
    # The SDK starts the server with a minimal environment: keep the import path, so the server
    # under test is the `buzz` these tests import (a worktree on PYTHONPATH, not the install).
    if "PYTHONPATH" in os.environ:
        env.setdefault("PYTHONPATH", os.environ["PYTHONPATH"])
    if auth_tag is not None:
        env["BUZZ_AUTH_TAG"] = orjson.dumps(auth_tag).decode()
    params = StdioServerParameters(command=BUZZ, args=["mcp", *args], env=env)
    with tempfile.TemporaryFile("w+", encoding="utf-8") as stderr_file:
        server: McpServer | None = None
        try:
            async with stdio_client(params, errlog=stderr_file) as (read, write):
                async with ClientSession(read, write) as session:
                    server = McpServer(session, await session.initialize(), stderr_file)
                    yield server
        finally:
            if server is not None:
                server.final_log = server.log()
