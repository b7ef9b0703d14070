#!/usr/bin/env python3
"""The example rules agent with the misbehaviours real ACP agents have shown (issue 14), chosen
by `RULES_AGENT_QUIRKS` (comma list). Test-only; every quirk is recorded to
`RULES_AGENT_RECORD` so tests can count them.

| quirk | behaviour |
|---|---|
| `cancel-error` | a prompt ended by a cancel (a pending one, or one kept by `sticky-cancel`) is answered with a JSON-RPC error, not `cancelled` (Gemini CLI does) |
| `no-updates` | sends no `session/update` at all (its answers are only the prompt results) |
| `sticky-cancel` | a `session/cancel` with no prompt pending is kept and aborts the next prompt |
| `stale-end-turn` | after a cancelled prompt, the next prompt gets an empty `end_turn` at once |
| `cross-cancel` | a `session/cancel` of a pending prompt is taken as if it came after that prompt's answer (the cancel crossed the answer on the wire): the prompt is answered and the cancel finds the session idle |
| `close` | advertises `sessionCapabilities.close` and implements `session/close` |

Every `session/new` records the process id and how many sessions are open in this process.
"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))

from acp import PROTOCOL_VERSION, RequestError, run_agent
from acp.schema import (
    AgentCapabilities,
    Implementation,
    InitializeResponse,
    NewSessionResponse,
    PromptResponse,
    SessionCapabilities,
    SessionCloseCapabilities,
)
from rules_agent import RulesAgent

QUIRKS = frozenset(q.strip() for q in os.environ.get("RULES_AGENT_QUIRKS", "").split(",") if q.strip())


class _Quiet:
    """The client connection without `session/update` (an agent that streams nothing)."""

    def __init__(self, conn: Any) -> None:
        self._conn = conn

    def __getattr__(self, name: str) -> Any:
        return getattr(self._conn, name)

    async def session_update(self, *args: Any, **kwargs: Any) -> None:
        return None


class QuirkAgent(RulesAgent):
    def __init__(self) -> None:
        super().__init__()
        self.open: set[str] = set()
        self.sticky: set[str] = set()
        self.stale: set[str] = set()
        self.pending: set[str] = set()

    def on_connect(self, conn: Any) -> None:
        super().on_connect(_Quiet(conn) if "no-updates" in QUIRKS else conn)

    async def initialize(self, protocol_version: int, **kwargs: Any) -> InitializeResponse:
        caps = AgentCapabilities()
        if "close" in QUIRKS:
            caps = AgentCapabilities(
                session_capabilities=SessionCapabilities(close=SessionCloseCapabilities())
            )
        return InitializeResponse(
            protocol_version=PROTOCOL_VERSION,
            agent_capabilities=caps,
            agent_info=Implementation(name="quirk-agent", version="1"),
        )

    async def new_session(
        self, cwd: str, mcp_servers: list[Any] | None = None, **kwargs: Any
    ) -> NewSessionResponse:
        response = await super().new_session(cwd, mcp_servers, **kwargs)
        self.open.add(response.session_id)
        self.record({"type": "open", "pid": os.getpid(), "open": len(self.open)})
        return response

    async def close_session(self, session_id: str, **kwargs: Any) -> None:
        self.open.discard(session_id)
        self.record({"type": "closed", "session_id": session_id})
        return None

    async def cancel(self, session_id: str, **kwargs: Any) -> None:
        crossed = session_id in self.pending and "cross-cancel" in QUIRKS
        if session_id not in self.pending or crossed:
            self.record({"type": "idle_cancel", "session_id": session_id})
            if "sticky-cancel" in QUIRKS:
                self.sticky.add(session_id)
        if not crossed:
            await super().cancel(session_id, **kwargs)

    async def prompt(self, session_id: str, prompt: list[Any], **kwargs: Any) -> PromptResponse:
        if session_id in self.sticky:
            self.sticky.discard(session_id)
            self.record({"type": "sticky_abort", "session_id": session_id})
            if "cancel-error" in QUIRKS:
                raise RequestError.internal_error({"details": "interrupted"})
            return PromptResponse(stop_reason="cancelled")
        if session_id in self.stale:
            self.stale.discard(session_id)
            self.record({"type": "stale", "session_id": session_id})
            return PromptResponse(stop_reason="end_turn")
        self.pending.add(session_id)
        try:
            response = await super().prompt(session_id, prompt, **kwargs)
        finally:
            self.pending.discard(session_id)
        if response.stop_reason == "cancelled":
            if "stale-end-turn" in QUIRKS:
                self.stale.add(session_id)
            if "cancel-error" in QUIRKS:
                raise RequestError.internal_error({"details": "interrupted"})
        return response


async def main() -> None:
    agent = QuirkAgent()
    await run_agent(agent, observers=[agent.observe], use_unstable_protocol=True)


if __name__ == "__main__":
    asyncio.run(main())
