#!/usr/bin/env python3
"""A small ACP agent backed by any OpenAI-compatible chat-completions endpoint.

Run it under the harness (agents.md §4); it speaks ACP on stdin/stdout through the agent side
of the `agent-client-protocol` package, keeps one chat history per ACP session, and gives the
model one tool, `buzz`, that runs the `buzz` CLI with the identity the harness put in its
environment. That is how it replies: the model calls
`buzz messages send --channel … --reply-to … --content …` itself (the harness never posts
answers). The tests drive it only against a refused endpoint (a backend that is down); the
deterministic `rules_agent.py` is what they drive otherwise.

Environment:

| variable | default | meaning |
|---|---|---|
| `OPENAI_BASE_URL` | `https://api.openai.com/v1` | any OpenAI-compatible API base (vLLM, Ollama's `/v1`, llama.cpp server, …) |
| `OPENAI_API_KEY` | — | bearer token; omitted from requests when unset (local servers) |
| `OPENAI_MODEL` | `gpt-4o-mini` | model id |
| `OPENAI_TIMEOUT` | `120` | seconds per HTTP request |
| `OPENAI_MAX_TOOL_ROUNDS` | `8` | tool calls per turn before the turn ends |
| `BUZZ_PRIVATE_KEY`, `BUZZ_RELAY_URL`, `BUZZ_AUTH_TAG` | set by the harness | the agent identity its `buzz` calls use |
| `BUZZ_CLI` | `buzz` next to this Python, else on PATH | the CLI executable |

Example:

    OPENAI_BASE_URL=http://127.0.0.1:11434/v1 OPENAI_MODEL=llama3.1 \\
      buzz agent run --agent-command python3 --agent-args examples/openai_agent.py

Keep `OPENAI_API_KEY` and `BUZZ_PRIVATE_KEY` in the process environment at run time, never
in committed files.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import sys
import uuid
from pathlib import Path
from typing import Any

import aiohttp
from acp import PROTOCOL_VERSION, run_agent
from acp.connection import StreamEvent
from acp.schema import (
    AgentCapabilities,
    Implementation,
    InitializeResponse,
    NewSessionResponse,
    PromptResponse,
    Usage,
)

SYSTEM_HEADERS = ("[Workspace]", "[Base]", "[System]", "[Team Instructions]", "<core-memory>")
TOOL_OUTPUT_LIMIT = 8000
BUZZ_TOOL = {
    "type": "function",
    "function": {
        "name": "buzz",
        "description": (
            "Run the buzz CLI with your own identity, e.g. "
            '["messages", "send", "--channel", "<id>", "--reply-to", "<id>", "--content", "…"]. '
            "Returns exit code, stdout and stderr."
        ),
        "parameters": {
            "type": "object",
            "properties": {
                "args": {
                    "type": "array",
                    "items": {"type": "string"},
                    "description": "arguments after `buzz`",
                },
                "stdin": {"type": "string", "description": "text for stdin (use with --content -)"},
            },
            "required": ["args"],
        },
    },
}


def buzz_cli() -> str:
    configured = os.environ.get("BUZZ_CLI")
    if configured:
        return configured
    sibling = Path(sys.executable).with_name("buzz")
    return str(sibling) if sibling.exists() else (shutil.which("buzz") or "buzz")


async def run_buzz(args: list[str], stdin: str | None) -> str:
    """Run `buzz <args>`; the result the model sees (truncated)."""
    proc = await asyncio.create_subprocess_exec(
        buzz_cli(),
        *[str(a) for a in args],
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=dict(os.environ),
    )
    out, err = await proc.communicate((stdin or "").encode())
    text = json.dumps(
        {
            "exit": proc.returncode,
            "stdout": out.decode(errors="replace"),
            "stderr": err.decode(errors="replace"),
        }
    )
    return text[:TOOL_OUTPUT_LIMIT]


class OpenAIAgent:
    """One instance serves every session of this subprocess."""

    def __init__(self) -> None:
        self.base = os.environ.get("OPENAI_BASE_URL", "https://api.openai.com/v1").rstrip("/")
        self.model = os.environ.get("OPENAI_MODEL", "gpt-4o-mini")
        self.timeout = float(os.environ.get("OPENAI_TIMEOUT", "120"))
        self.max_rounds = int(os.environ.get("OPENAI_MAX_TOOL_ROUNDS", "8"))
        self.histories: dict[str, list[dict[str, Any]]] = {}
        self.turns: dict[str, asyncio.Task[PromptResponse]] = {}
        self._raw_new_session: list[dict[str, Any]] = []
        self._http: aiohttp.ClientSession | None = None

    def observe(self, event: StreamEvent) -> None:
        """Capture `session/new` params: a top-level `systemPrompt` is dropped by the package's model."""
        if event.direction.value == "incoming" and event.message.get("method") == "session/new":
            self._raw_new_session.append(event.message.get("params") or {})

    async def initialize(self, protocol_version: int, **kwargs: Any) -> InitializeResponse:
        return InitializeResponse(
            protocol_version=PROTOCOL_VERSION,
            agent_capabilities=AgentCapabilities(),
            agent_info=Implementation(name="openai-agent", version="1"),
        )

    async def new_session(
        self, cwd: str, mcp_servers: list[Any] | None = None, **kwargs: Any
    ) -> NewSessionResponse:
        session_id = f"openai-{uuid.uuid4().hex[:12]}"
        raw = self._raw_new_session.pop(0) if self._raw_new_session else {}
        system = raw.get("systemPrompt")
        meta = kwargs.get("systemPrompt")
        if isinstance(meta, dict) and meta.get("append"):
            system = meta["append"]
        self.histories[session_id] = [{"role": "system", "content": system}] if system else []
        return NewSessionResponse(session_id=session_id)

    async def cancel(self, session_id: str, **kwargs: Any) -> None:
        task = self.turns.get(session_id)
        if task is not None:
            task.cancel()

    async def prompt(self, session_id: str, prompt: list[Any], **kwargs: Any) -> PromptResponse:
        history = self.histories.setdefault(session_id, [])
        blocks = [getattr(b, "text", "") for b in prompt]
        if not history and blocks and blocks[0].startswith(SYSTEM_HEADERS):  # `user` transport
            system = [b for b in blocks if b.startswith(SYSTEM_HEADERS)]
            history.append({"role": "system", "content": "\n\n".join(system)})
            blocks = blocks[len(system) :]
        history.append({"role": "user", "content": "\n\n".join(blocks)})
        task = asyncio.create_task(self._turn(history))
        self.turns[session_id] = task
        try:
            return await task
        except asyncio.CancelledError:
            return PromptResponse(stop_reason="cancelled")
        finally:
            self.turns.pop(session_id, None)

    async def _turn(self, history: list[dict[str, Any]]) -> PromptResponse:
        totals = {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}
        for _ in range(self.max_rounds):
            answer = await self._complete(history)
            for key in totals:
                totals[key] += int((answer.get("usage") or {}).get(key) or 0)
            choice = answer["choices"][0]
            message = choice["message"]
            history.append({k: v for k, v in message.items() if k in ("role", "content", "tool_calls")})
            calls = message.get("tool_calls") or []
            if not calls:
                reason = "max_tokens" if choice.get("finish_reason") == "length" else "end_turn"
                return PromptResponse(stop_reason=reason, usage=self._usage(totals))
            for call in calls:
                try:
                    params = json.loads(call["function"].get("arguments") or "{}")
                    result = await run_buzz(list(params.get("args") or []), params.get("stdin"))
                except (ValueError, KeyError, TypeError) as exc:
                    result = json.dumps({"error": f"bad tool call: {exc}"})
                history.append({"role": "tool", "tool_call_id": call.get("id"), "content": result})
        return PromptResponse(stop_reason="max_turn_requests", usage=self._usage(totals))

    @staticmethod
    def _usage(totals: dict[str, int]) -> Usage:
        return Usage(
            input_tokens=totals["prompt_tokens"],
            output_tokens=totals["completion_tokens"],
            total_tokens=totals["total_tokens"],
        )

    async def _complete(self, history: list[dict[str, Any]]) -> dict[str, Any]:
        if self._http is None:
            self._http = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=self.timeout))
        headers = {"Content-Type": "application/json"}
        if os.environ.get("OPENAI_API_KEY"):
            headers["Authorization"] = f"Bearer {os.environ['OPENAI_API_KEY']}"
        body = {"model": self.model, "messages": history, "tools": [BUZZ_TOOL]}
        async with self._http.post(f"{self.base}/chat/completions", json=body, headers=headers) as resp:
            if resp.status != 200:
                text = (await resp.text())[:500]
                raise RuntimeError(f"chat completion failed: HTTP {resp.status}: {text}")
            return await resp.json()


async def main() -> None:
    agent = OpenAIAgent()
    await run_agent(agent, observers=[agent.observe])


if __name__ == "__main__":
    asyncio.run(main())
