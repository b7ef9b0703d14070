#!/usr/bin/env python3
"""A deterministic ACP agent that answers from simple rules: no network of its own, no model.

Built on the agent side of the `agent-client-protocol` package; `buzz agent run` drives it
over stdin/stdout. The tests use it as a real agent subprocess, and it is a small, readable
example of what an ACP agent in a buzz workspace does:

- it reads the per-turn prompt the harness sends (agents.md §4.12): the channel and reply
  anchor from `[Context]`, the events from the event block (or, after steering, from
  `[New events during that work …]`);
- it answers each event's content by the first matching rule:

  | content (after a leading `@name`)  | answer                                         |
  |------------------------------------|------------------------------------------------|
  | `ping`                             | `pong`                                         |
  | `echo <text>`                      | `<text>`                                       |
  | `sleep <seconds>`                  | waits (cancellable by `session/cancel`), then `slept <seconds>` |
  | `fail`                             | answers the prompt with a JSON-RPC error (a failed turn) |
  | `silent`                           | no reply at all                                |
  | `probe`                            | asks the client for a file and a terminal, answers with the error codes |
  | `files` (URL lines may follow)     | lists the files the prompt carried: `files: <name> (<type>, <blocks>); …` |
  | `attach <name>`                    | writes `OUTBOX/<name>` and replies with it attached (`--file`) |
  | anything else                      | `heard: <content>`                             |

- a job (`[Buzz job]` block, jobs spec §6.5) is worked on by its instructions: it reports a
  plan and a tool call (the harness turns them into progress 43003), then
  `handoff` publishes a NIP-AJ result itself with `buzz jobs handoff` (a file it wrote, with a
  verification entry), `sleep <seconds>` waits (cancellable) and answers `slept <seconds>`,
  `fail` fails the prompt, `silent` ends with no text, and anything else ends with the final
  text `done: <instructions>` (which the harness publishes as a `no_artifact` result);

- it replies itself by running `buzz messages send --channel … --reply-to … --content …` (in an
  end-to-end encrypted DM: `buzz dms send --private --pubkey … --reply-to … --content …`) as a
  subprocess with the environment the harness gave it (so the reply is signed with the agent
  key); every reply ends with `[session=<id> turn=<n> events=<k>]` so a reader can see which
  ACP session answered (a `!rotate` gives a fresh one) and how many events one prompt carried;
- it reports usage: the `session/prompt` result carries `usage`, and a `usage_update`
  notification carries the cumulative cost (for turn metrics, agents.md §5.1);
- it records what it received when `RULES_AGENT_RECORD` names a file: one JSON line per
  `session/new` (with the system prompt from whichever transport carried it: top-level
  `systemPrompt`, `_meta.systemPrompt.append`, or the leading `[Workspace]`… blocks of the
  first prompt) and one per prompt (all its text blocks, and a summary of every other content
  block: `resource_link`, `image`, `resource`, as attached files reach it, media.md §14.1).

Environment: `BUZZ_PRIVATE_KEY`, `BUZZ_RELAY_URL`, `BUZZ_AUTH_TAG` (set by the harness);
`RULES_AGENT_RECORD` (optional record file); `RULES_AGENT_PROMPT_CAPS` (optional, `image`
and/or `embeddedContext`, comma-separated: the prompt capabilities `initialize` advertises); `BUZZ_CLI` (optional path of the `buzz`
executable; default: the `buzz` next to this Python, else on PATH).

Run it under the harness:

    buzz agent run --agent-command python3 --agent-args examples/rules_agent.py
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import re
import shutil
import sys
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from acp import PROTOCOL_VERSION, RequestError, run_agent
from acp.connection import StreamEvent
from acp.schema import (
    AgentCapabilities,
    AgentMessageChunk,
    AgentPlanUpdate,
    Cost,
    Implementation,
    InitializeResponse,
    NewSessionResponse,
    PlanEntry,
    PromptCapabilities,
    PromptResponse,
    TextContentBlock,
    ToolCallStart,
    Usage,
    UsageUpdate,
)

SYSTEM_HEADERS = ("[Workspace]", "[Base]", "[System]", "[Team Instructions]", "<core-memory>")
PROMPT_CAPS = frozenset(
    c.strip() for c in os.environ.get("RULES_AGENT_PROMPT_CAPS", "").split(",") if c.strip()
)


def prompt_capabilities() -> PromptCapabilities:
    return PromptCapabilities(image="image" in PROMPT_CAPS, embedded_context="embeddedContext" in PROMPT_CAPS)


def content_summary(block: Any) -> dict[str, Any]:
    """A non-text prompt block as recorded: its type and what names it (image data by length)."""
    raw = block.model_dump(by_alias=True, exclude_none=True) if hasattr(block, "model_dump") else dict(block)
    out = {k: raw[k] for k in ("type", "uri", "name", "mimeType", "size") if k in raw}
    if raw.get("type") == "image":
        out["data_bytes"] = len(base64.b64decode(raw.get("data", "")))
    if raw.get("type") == "resource":
        resource = raw.get("resource") or {}
        out |= {
            "uri": resource.get("uri"),
            "mimeType": resource.get("mimeType"),
            "text": resource.get("text"),
        }
    return out


COST_PER_TOKEN_USD = 0.000001


@dataclass
class Parsed:
    """What a prompt told us: channel, reply anchor, events (id, content), steering or not."""

    channel: str | None = None
    anchor: str | None = None
    private_to: list[str] = field(default_factory=list)  # an end-to-end encrypted DM's people
    events: list[tuple[str, str]] = field(default_factory=list)
    steered: bool = False
    system_blocks: list[str] = field(default_factory=list)
    job: str | None = None  # a job's id (the `[Buzz job]` block)
    instructions: str = ""


def parse_event_block(block: str) -> list[tuple[str, str]]:
    """(event id, content) pairs of an event block: `Event ID:` … `Content:` … `Tags:`."""
    events = []
    for match in re.finditer(r"Event ID: ([0-9a-f]{64})\n.*?\nContent:\n(.*?)\nTags: ", block, re.S):
        events.append((match.group(1), match.group(2)))
    return events


def parse_prompt(blocks: list[str]) -> Parsed:
    parsed = Parsed()
    for block in blocks:
        head = block.split("\n", 1)[0]
        if head.startswith(SYSTEM_HEADERS):
            parsed.system_blocks.append(block)
        elif head == "[Context]":
            if m := re.search(r"^Channel: .* \(#([0-9a-f-]{36})\)$", block, re.M):
                parsed.channel = m.group(1)
            if m := re.search(r"reply in this channel with --reply-to ([0-9a-f]{64})", block):
                parsed.anchor = m.group(1)
            if m := re.search(
                r"^Reply privately: buzz dms send --private (.*) --reply-to ([0-9a-f]{64})", block, re.M
            ):
                parsed.private_to = re.findall(r"--pubkey ([0-9a-f]{64})", m.group(1))
                parsed.anchor = m.group(2)
        elif head.startswith("[New events during that work"):
            parsed.steered = True
            parsed.events = parse_event_block(block)
        elif head.startswith("[Buzz event"):
            parsed.events = parse_event_block(block)
        elif head == "[Buzz job]":
            if m := re.search(r"^Job: ([0-9a-f]{64})$", block, re.M):
                parsed.job = m.group(1)
            if m := re.search(r"^Instructions:\n(.*?)\n\nFinish in one of two ways", block, re.S | re.M):
                parsed.instructions = m.group(1).strip()
    return parsed


def describe_files(content: list[dict[str, Any]]) -> str:
    """`files: <name> (<type>, resource_link+image); …` for the prompt's non-text blocks."""
    names: dict[str, list[str]] = {}
    kinds: dict[str, list[str]] = {}
    for block in content:
        uri = str(block.get("uri"))
        if block["type"] == "resource_link":
            names[uri] = [str(block.get("name")), str(block.get("mimeType"))]
        kinds.setdefault(uri, []).append(block["type"])
    listed = [f"{n} ({m}, {'+'.join(kinds[u])})" for u, (n, m) in names.items()]
    return "files: " + ("; ".join(listed) if listed else "none")


def strip_mention(content: str) -> str:
    text = content.strip()
    if text.startswith(("@", "nostr:npub1")):
        text = text.split(None, 1)[1] if " " in text else ""
    return text.strip()


def buzz_cli() -> str:
    configured = os.environ.get("BUZZ_CLI")
    if configured:
        return configured
    sibling = Path(sys.executable).with_name("buzz")
    return str(sibling) if sibling.exists() else (shutil.which("buzz") or "buzz")


class RulesAgent:
    """The ACP agent. One instance serves every session of this subprocess."""

    def __init__(self) -> None:
        self.conn: Any = None
        self.sessions: dict[str, dict[str, Any]] = {}
        self.cancels: dict[str, asyncio.Event] = {}
        self.record_path = os.environ.get("RULES_AGENT_RECORD")
        self.raw_new_session: list[dict[str, Any]] = []

    def on_connect(self, conn: Any) -> None:
        self.conn = conn

    def observe(self, event: StreamEvent) -> None:
        """See the raw JSON-RPC traffic: the package's `NewSessionRequest` model drops a top-level
        `systemPrompt`, so it is captured here for the record."""
        msg = event.message
        if event.direction.value == "incoming" and msg.get("method") == "session/new":
            self.raw_new_session.append(msg.get("params") or {})

    def record(self, entry: dict[str, Any]) -> None:
        if self.record_path:
            with open(self.record_path, "a", encoding="utf-8") as fh:
                fh.write(json.dumps(entry) + "\n")

    async def initialize(self, protocol_version: int, **kwargs: Any) -> InitializeResponse:
        return InitializeResponse(
            protocol_version=PROTOCOL_VERSION,
            agent_capabilities=AgentCapabilities(prompt_capabilities=prompt_capabilities()),
            agent_info=Implementation(name="rules-agent", version="1"),
        )

    async def new_session(
        self, cwd: str, mcp_servers: list[Any] | None = None, **kwargs: Any
    ) -> NewSessionResponse:
        session_id = f"rules-{uuid.uuid4().hex[:12]}"
        raw = self.raw_new_session.pop(0) if self.raw_new_session else {}
        system_prompt = raw.get("systemPrompt")
        transport = "field" if system_prompt else None
        meta_prompt = kwargs.get("systemPrompt")
        if isinstance(meta_prompt, dict) and meta_prompt.get("append"):
            system_prompt, transport = meta_prompt["append"], "claude-meta"
        self.sessions[session_id] = {
            "cwd": cwd,
            "turns": 0,
            "cost": 0.0,
            "system_prompt": system_prompt,
            "transport": transport,
        }
        self.record(
            {
                "type": "session_new",
                "session_id": session_id,
                "cwd": cwd,
                "mcp_servers": len(mcp_servers or []),
                "transport": transport,
                "system_prompt": system_prompt,
                "title": kwargs.get("sessionTitle"),
            }
        )
        return NewSessionResponse(session_id=session_id)

    async def cancel(self, session_id: str, **kwargs: Any) -> None:
        event = self.cancels.get(session_id)
        if event is not None:
            event.set()

    async def prompt(self, session_id: str, prompt: list[Any], **kwargs: Any) -> PromptResponse:
        state = self.sessions.setdefault(
            session_id, {"turns": 0, "cost": 0.0, "system_prompt": None, "transport": None}
        )
        blocks = [getattr(b, "text", "") for b in prompt if getattr(b, "type", "text") == "text"]
        content = [content_summary(b) for b in prompt if getattr(b, "type", "text") != "text"]
        parsed = parse_prompt(blocks)
        if parsed.system_blocks and state["system_prompt"] is None:
            state["system_prompt"], state["transport"] = "\n\n".join(parsed.system_blocks), "user"
            self.record(
                {
                    "type": "system_prompt",
                    "session_id": session_id,
                    "transport": "user",
                    "system_prompt": state["system_prompt"],
                }
            )
        state["turns"] += 1
        self.record(
            {
                "type": "prompt",
                "session_id": session_id,
                "turn": state["turns"],
                "blocks": blocks,
                "content": content,
            }
        )
        cancel = self.cancels[session_id] = asyncio.Event()
        if parsed.job is not None:
            try:
                return await self.work_on_job(session_id, parsed, cancel, blocks)
            finally:
                self.cancels.pop(session_id, None)
        try:
            answers = []
            attach: list[str] = []
            for _event_id, said in parsed.events:
                text = strip_mention(said)
                if text == "fail":
                    raise RequestError.internal_error({"details": "told to fail"})
                if text.startswith("sleep "):
                    try:
                        seconds = float(text.split()[1])
                    except (IndexError, ValueError):
                        seconds = 1.0
                    try:
                        await asyncio.wait_for(cancel.wait(), seconds)
                    except TimeoutError:
                        answers.append(f"slept {seconds:g}")
                        continue
                    self.record({"type": "cancelled", "session_id": session_id, "turn": state["turns"]})
                    return PromptResponse(stop_reason="cancelled", usage=self.usage(blocks, 0))
                elif text == "ping":
                    answers.append("pong")
                elif text == "probe":
                    answers.append(await self.probe(session_id))
                elif text.startswith("echo "):
                    answers.append(text[5:])
                elif text.split("\n", 1)[0].strip() == "files":  # URL lines may follow
                    answers.append(describe_files(content))
                elif text.startswith("attach "):
                    attach.append(self.make_file(session_id, text[7:].strip()))
                    answers.append(f"attached {text[7:].strip()}")
                elif text != "silent":
                    answers.append(f"heard: {text}")
            if cancel.is_set():
                return PromptResponse(stop_reason="cancelled", usage=self.usage(blocks, 0))
            if answers and (parsed.channel or parsed.private_to):
                prefix = "steered: " if parsed.steered else ""
                tail = f"[session={session_id} turn={state['turns']} events={len(parsed.events)}]"
                await self.reply(parsed, prefix + " | ".join(answers) + " " + tail, attach)
            output_tokens = sum(len(a) for a in answers) // 4 + 1
            state["cost"] += (sum(len(b) for b in blocks) // 4 + output_tokens) * COST_PER_TOKEN_USD
            await self.conn.session_update(
                session_id,
                UsageUpdate(
                    session_update="usage_update",
                    used=1000,
                    size=200000,
                    cost=Cost(amount=state["cost"], currency="USD"),
                ),
            )
            return PromptResponse(stop_reason="end_turn", usage=self.usage(blocks, output_tokens))
        finally:
            self.cancels.pop(session_id, None)

    async def update(self, session_id: str, update: Any) -> None:
        await self.conn.session_update(session_id, update)

    async def work_on_job(
        self, session_id: str, parsed: Parsed, cancel: asyncio.Event, blocks: list[str]
    ) -> PromptResponse:
        """A job: a plan, a tool call, then the outcome its instructions ask for."""
        text = parsed.instructions
        self.record({"type": "job", "session_id": session_id, "job": parsed.job, "instructions": text})
        await self.update(
            session_id,
            AgentPlanUpdate(
                session_update="plan",
                entries=[
                    PlanEntry(content="Read the request", status="completed", priority="medium"),
                    PlanEntry(content=f"Work on: {text[:60]}", status="in_progress", priority="medium"),
                ],
            ),
        )
        await self.update(
            session_id,
            ToolCallStart(
                session_update="tool_call",
                tool_call_id=f"call-{uuid.uuid4().hex[:8]}",
                title=f"Open {Path.home() / 'notes' / 'secret.txt'} and think",
                status="in_progress",
            ),
        )
        if text == "fail":
            raise RequestError.internal_error({"details": "told to fail"})
        answer: str | None = f"done: {text}"
        if text.startswith("sleep "):
            try:
                seconds = float(text.split()[1])
            except (IndexError, ValueError):
                seconds = 1.0
            try:
                await asyncio.wait_for(cancel.wait(), seconds)
            except TimeoutError:
                answer = f"slept {seconds:g}"
            else:
                self.record({"type": "cancelled", "session_id": session_id, "job": parsed.job})
                return PromptResponse(stop_reason="cancelled", usage=self.usage(blocks, 0))
        elif text == "silent":
            answer = None
        elif text == "handoff":
            answer = None
            await self.handoff(session_id, parsed)
        if answer is not None:
            await self.update(
                session_id,
                AgentMessageChunk(
                    session_update="agent_message_chunk", content=TextContentBlock(type="text", text=answer)
                ),
            )
        return PromptResponse(stop_reason="end_turn", usage=self.usage(blocks, 1))

    async def handoff(self, session_id: str, parsed: Parsed) -> None:
        """Write a file and publish a NIP-AJ result naming it (a repository-relative path)."""
        cwd = Path(self.sessions.get(session_id, {}).get("cwd") or ".")
        (cwd / "OUTBOX").mkdir(parents=True, exist_ok=True)
        (cwd / "OUTBOX" / "result.txt").write_text(f"result of {parsed.instructions}\n", encoding="utf-8")
        manifest = {
            "schemaVersion": 1,
            "jobRequest": parsed.job,
            "requestedOutcome": parsed.instructions,
            "outcome": "wrote OUTBOX/result.txt",
            "disposition": "completed",
            "artifacts": [{"kind": "file", "label": "the result", "reference": "OUTBOX/result.txt"}],
            "verification": [{"label": "file written", "status": "passed"}],
        }
        args = [
            buzz_cli(),
            "jobs",
            "handoff",
            "--channel",
            parsed.channel or "",
            "--job",
            parsed.job or "",
            "--manifest",
            "-",
        ]
        proc = await asyncio.create_subprocess_exec(
            *args,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=dict(os.environ),
        )
        out, err = await proc.communicate(json.dumps(manifest).encode())
        self.record(
            {"type": "handoff", "exit": proc.returncode, "stdout": out.decode(), "stderr": err.decode()}
        )

    async def probe(self, session_id: str) -> str:
        """Ask the client for a file and a terminal; report the JSON-RPC error codes it gave."""
        codes = []
        for name, call in (
            ("fs", lambda: self.conn.read_text_file(path="/etc/hostname", session_id=session_id)),
            ("terminal", lambda: self.conn.create_terminal(command="true", session_id=session_id)),
        ):
            try:
                await call()
                codes.append(f"{name}=ok")
            except RequestError as exc:
                codes.append(f"{name}={exc.code}")
        return " ".join(codes)

    @staticmethod
    def usage(blocks: list[str], output_tokens: int) -> Usage:
        input_tokens = sum(len(b) for b in blocks) // 4
        return Usage(
            input_tokens=input_tokens, output_tokens=output_tokens, total_tokens=input_tokens + output_tokens
        )

    def make_file(self, session_id: str, name: str) -> str:
        """`OUTBOX/<name>` in the session's working directory, with a line saying who made it."""
        cwd = Path(self.sessions.get(session_id, {}).get("cwd") or os.getcwd())
        outbox = cwd / "OUTBOX"
        outbox.mkdir(parents=True, exist_ok=True)
        path = outbox / Path(name).name
        path.write_text(f"made by rules-agent for {session_id}\n", encoding="utf-8")
        return str(path)

    async def reply(self, parsed: Parsed, content: str, files: list[str] | None = None) -> None:
        anchor = parsed.anchor or (parsed.events[-1][0] if parsed.events else None)
        if parsed.private_to:  # an end-to-end encrypted DM is answered privately, never in a channel
            args = [buzz_cli(), "--format", "compact", "dms", "send", "--private", "--content", content]
            for pubkey in parsed.private_to:
                args += ["--pubkey", pubkey]
            if anchor:
                args += ["--reply-to", anchor]
            await self.run_reply(args)
            return
        args = [
            buzz_cli(),
            "--format",
            "compact",
            "messages",
            "send",
            "--channel",
            parsed.channel or "",
            "--content",
            content,
        ]
        if anchor:
            args += ["--reply-to", anchor]
        for path in files or []:
            args += ["--file", path]
        await self.run_reply(args)

    async def run_reply(self, args: list[str]) -> None:
        proc = await asyncio.create_subprocess_exec(
            *args, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=dict(os.environ)
        )
        out, err = await proc.communicate()
        self.record(
            {"type": "reply", "exit": proc.returncode, "stdout": out.decode(), "stderr": err.decode()}
        )
        if proc.returncode != 0:
            print(
                f"rules-agent: buzz messages send failed ({proc.returncode}): {err.decode().strip()}",
                file=sys.stderr,
            )


async def main() -> None:
    agent = RulesAgent()
    await run_agent(agent, observers=[agent.observe])


if __name__ == "__main__":
    asyncio.run(main())
