"""A workspace for harness tests: a real relay, an owner, an attested agent in a channel, the
harness running the example rules agent as its real ACP subprocess, and a watcher that sees
what lands in the channel."""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from buzz.agent.config import load_config
from buzz.agent.harness import Harness
from buzz.agent.identity import resolve_identity
from buzz.client import RelayClient, RelayError, Subscription
from buzz.core.channel_id import new_channel_id
from buzz.core.event import Event
from buzz.core.nip_oa import build_auth_tag
from tests.support.deadline import scaled
from tests.support.relay import Identity, RunningRelay

ROOT = Path(__file__).resolve().parents[2]
RULES_AGENT = str(ROOT / "examples" / "rules_agent.py")
OPENAI_AGENT = str(ROOT / "examples" / "openai_agent.py")
QUIRK_AGENT = str(Path(__file__).with_name("quirk_agent.py"))
EYES, SPEECH = "\U0001f440", "\U0001f4ac"


async def publish(client: RelayClient, event: Event) -> Event:
    result = await client.publish(event)
    assert result.accepted, (event.kind, result.message)
    return event


async def create_channel(client: RelayClient, owner: Identity, name: str, visibility: str = "open") -> str:
    channel = new_channel_id()
    tags = [["h", channel], ["name", name], ["visibility", visibility]]
    await publish(client, Event.create(owner.secret, 9007, "", tags))
    return channel


async def add_member(
    client: RelayClient, actor: Identity, channel: str, pubkey: str, role: str = "member"
) -> None:
    await publish(
        client, Event.create(actor.secret, 9000, "", [["h", channel], ["p", pubkey], ["role", role]])
    )


async def set_profile(
    client: RelayClient, who: Identity, name: str, auth_tag: list[str] | None = None
) -> None:
    tags = [auth_tag] if auth_tag else []
    await publish(client, Event.create(who.secret, 0, orjson.dumps({"name": name}).decode(), tags))


def message(
    who: Identity,
    channel: str,
    content: str,
    *,
    mention: str | None = None,
    reply_to: Event | None = None,
    extra: list[list[str]] | None = None,
) -> Event:
    """A kind 9 in `channel`; `mention` adds `["p", …]`; `reply_to` a direct reply."""
    tags: list[list[str]] = [["h", channel]]
    if reply_to is not None:
        root = next((t[1] for t in reply_to.tags if len(t) >= 4 and t[0] == "e" and t[3] == "root"), None)
        parent_root = root or next(
            (t[1] for t in reply_to.tags if len(t) >= 4 and t[0] == "e" and t[3] == "reply"), None
        )
        if parent_root is None:
            tags.append(["e", reply_to.id, "", "reply"])
        else:
            tags += [["e", parent_root, "", "root"], ["e", reply_to.id, "", "reply"]]
    if mention is not None:
        tags.append(["p", mention])
    tags += extra or []
    return Event.create(who.secret, 9, content, tags)


def notice_kind(event: Event) -> str | None:
    return next((t[1] for t in event.tags if len(t) >= 2 and t[0] == "buzz:agent-notice"), None)


@dataclass
class Watcher:
    """Every event the observer's subscriptions delivered, in arrival order."""

    events: list[Event] = field(default_factory=list)
    changed: asyncio.Event = field(default_factory=asyncio.Event)

    async def pump(self, sub: Subscription) -> None:
        with contextlib.suppress(RelayError):  # the observer's connection closes at teardown
            async for event in sub:
                self.events.append(event)
                self.changed.set()

    async def wait_for(
        self, predicate: Callable[[Event], bool], timeout: float = 20.0, what: str = "event"
    ) -> Event:
        deadline = time.monotonic() + scaled(timeout)
        while True:
            for event in self.events:
                if predicate(event):
                    return event
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise AssertionError(
                    f"timed out waiting for {what}; saw {[(e.kind, e.content[:60]) for e in self.events]}"
                )
            self.changed.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.changed.wait(), remaining)

    def of(self, kind: int, author: str | None = None) -> list[Event]:
        return [e for e in self.events if e.kind == kind and (author is None or e.pubkey == author)]

    def replies_to(self, event: Event, author: str) -> list[Event]:
        return [
            e
            for e in self.events
            if e.kind == 9
            and e.pubkey == author
            and any(len(t) >= 4 and t[0] == "e" and t[1] == event.id for t in e.tags)
        ]

    def answers_to(self, event: Event, author: str) -> list[Event]:
        """Replies that are the agent's own answers, not harness notices."""
        return [e for e in self.replies_to(event, author) if not notice_kind(e)]

    def notices_to(self, event: Event, author: str, kind: str | None = None) -> list[Event]:
        """Harness notices (`["buzz:agent-notice", kind]`) replying to `event`."""
        return [
            e
            for e in self.replies_to(event, author)
            if notice_kind(e) and (kind is None or notice_kind(e) == kind)
        ]


@dataclass
class Workspace:
    relay: RunningRelay
    owner: Identity
    agent: Identity
    auth_tag: list[str]
    channel: str
    owner_client: RelayClient
    watcher: Watcher
    tmp: Path
    record_file: Path

    def records(self, kind: str | None = None) -> list[dict[str, Any]]:
        """What the rules agent recorded (JSON lines), optionally of one `type`."""
        if not self.record_file.exists():
            return []
        lines = [json.loads(line) for line in self.record_file.read_text().splitlines() if line.strip()]
        return [r for r in lines if kind is None or r["type"] == kind]

    async def post(self, who: Identity, content: str, **kw: Any) -> Event:
        client = self.owner_client if who == self.owner else None
        event = message(who, kw.pop("channel", self.channel), content, **kw)
        if client is not None:
            return await publish(client, event)
        async with self.relay.client(who) as other:
            return await publish(other, event)

    async def watch(self, channel: str) -> None:
        sub = await self.owner_client.subscribe([{"#h": [channel], "since": int(time.time()) - 5}])
        asyncio.get_running_loop().create_task(self.watcher.pump(sub))

    @staticmethod
    async def next_second() -> None:
        """Let the clock pass a second boundary: a harness started afterwards subscribes with a
        `since` later than everything posted so far (`since` is inclusive, in seconds)."""
        await asyncio.sleep(1.05 - (time.time() % 1))

    def config(self, **flags: Any):
        given = {
            "private_key": self.agent.secret,
            "relay": self.relay.url,
            "auth_tag": json.dumps(self.auth_tag),
            "agent_command": sys.executable,
            "agent_args": RULES_AGENT,
        }
        given.update(
            {k: (str(v) if isinstance(v, int) and not isinstance(v, bool) else v) for k, v in flags.items()}
        )
        return load_config(given, env={})

    @contextlib.asynccontextmanager
    async def harness(self, **flags: Any) -> AsyncIterator[Harness]:
        """The harness in this process (its agent subprocess is real), ready to receive."""
        config = self.config(**flags)
        harness = Harness(config, resolve_identity(config), cwd=str(self.tmp))
        task = asyncio.create_task(harness.run())
        try:
            ready = asyncio.create_task(harness.ready.wait())
            done, _ = await asyncio.wait(
                {ready, task}, timeout=scaled(30), return_when=asyncio.FIRST_COMPLETED
            )
            if task in done:
                task.result()
            assert ready in done, "harness did not become ready"
            yield harness
        finally:
            await harness.request_shutdown()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(task, scaled(30))


@contextlib.asynccontextmanager
async def workspace(
    relay: RunningRelay,
    owner: Identity,
    agent: Identity,
    tmp: Path,
    monkeypatch: Any,
    agent_profile: bool = True,
) -> AsyncIterator[Workspace]:
    """Owner creates `#general`, attests the agent, adds it as a bot; the agent publishes its
    profile with the auth tag (unless `agent_profile` is False: then the agent has never
    authenticated). The rules agent records to `tmp/record.jsonl`."""
    record = tmp / "record.jsonl"
    monkeypatch.setenv("RULES_AGENT_RECORD", str(record))
    auth_tag = build_auth_tag(owner.secret, agent.pubkey)
    async with relay.client(owner) as owner_client:
        await set_profile(owner_client, owner, "Olivia")
        channel = await create_channel(owner_client, owner, "general")
        await add_member(owner_client, owner, channel, agent.pubkey, "bot")
        if agent_profile:
            async with relay.client(agent, auth_tags=[auth_tag]) as agent_client:
                await set_profile(agent_client, agent, "Rulesbot", auth_tag)
        ws = Workspace(relay, owner, agent, auth_tag, channel, owner_client, Watcher(), tmp, record)
        await ws.watch(channel)
        yield ws
