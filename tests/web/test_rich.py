"""Browser: messages people and agents can read (issue 26, items 1 and 2) — Markdown, code,
emoji, mentions, channel links; grouping, days, avatars, edits, profile cards, long answers;
permalinks and search results that open the channel at the message."""

from __future__ import annotations

import base64
import struct
import time
import zlib
from pathlib import Path

import orjson
import pytest

from buzz.core import nip19, nip_oa
from buzz.core.event import Event
from tests.agent.support import add_member, create_channel
from tests.support.relay import Identity, RunningRelay, relay_on
from tests.web.browser import assert_all_passed, require_browser, run_scenario

CHECKS = [
    "markdown renders: emphasis, lists, quote, table, links, inline code",
    "a fenced code block is highlighted and Copy code copies it exactly",
    "a long code block is folded until Show all",
    "emoji shortcodes become emoji",
    "mentions are chips, a mention of me is highlighted, a channel name links to it",
    "one author's consecutive messages are grouped under one name",
    "days have headings: Today, Yesterday and a date",
    "avatars: a profile picture, else a generated initial",
    "an edit is marked (edited)",
    "a name opens a profile card with about, npub and the agent owner",
    "a long agent answer shows its first lines and Show more",
    "Copy link copies the message's permalink",
    "screenshots at 1280×800 and 390×844",
    "a search result opens its channel scrolled to the message, highlighted",
    "a permalink opens the channel at the message, history loaded back to it",
    "a permalink to a thread reply opens the thread with the reply highlighted",
    "the CSP reported nothing",
]
SHOWCASE = (
    "Here is the **plan** for _today_ ~~not tomorrow~~ :tada:\n\n"
    "1. ship the renderer\n2. review it together\n\n"
    "> Quotes look like this\n\n"
    "| step | owner |\n|---|---|\n| build | Bob |\n| test | Carol |\n\n"
    "Docs at https://example.com/docs and `inline code` too."
)
CODE = "def greet(name):\n    return f'hello {name}'"
FILLERS = 120
DAY = 86_400


def _png(size: int = 48) -> bytes:
    """A small gradient PNG (the avatar the test's image host serves)."""
    rows = b"".join(
        b"\x00" + bytes(c for x in range(size) for c in (40 + 4 * x, 120, 200 - 3 * y)) for y in range(size)
    )

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = struct.pack(">IIBBBBB", size, size, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(rows))
        + chunk(b"IEND", b"")
    )


def _noon_timezone(now: int) -> str:
    """An Etc/GMT zone where it is about noon now, so that "today" starts hours ago whenever
    the test runs (POSIX sign: Etc/GMT-2 is two hours ahead of UTC)."""
    offset = 12 - time.gmtime(now).tm_hour
    offset = offset - 24 if offset > 14 else offset
    return "Etc/GMT" + (f"{-offset:+d}" if offset else "")


@pytest.mark.timeout(300)
async def test_rich_messages_and_a_scannable_timeline(
    tmp_path: Path, alice: Identity, bob: Identity, carol: Identity
) -> None:
    require_browser()
    # Messages of past days: the relay takes created_at up to a week back.
    async with relay_on(tmp_path, max_past_drift_s=7 * DAY) as relay:
        await _scenario(relay, alice, bob, carol)


async def _scenario(sqlite_relay: RunningRelay, alice: Identity, bob: Identity, carol: Identity) -> None:
    agent = Identity.new()
    now = int(time.time())
    events: dict[str, Event] = {}

    async def publish(
        who: Identity, kind: int, content: str, tags: list[list[str]], at: int | None = None
    ) -> Event:
        async with sqlite_relay.client(who) as client:
            event = Event.create(who.secret, kind, content, tags, at)
            result = await client.publish(event)
            assert result.accepted, result.message
            return event

    def profile(name: str, **more: str) -> str:
        return orjson.dumps({"name": name} | more).decode()

    await publish(alice, 0, profile("Alice"), [])
    await publish(
        bob, 0, profile("Bob", picture="https://avatars.example/bob.png", about="Builds things."), []
    )
    await publish(carol, 0, profile("Carol"), [])
    auth = nip_oa.build_auth_tag(bob.secret, agent.pubkey)
    await publish(agent, 0, profile("Rulesbot", about="I answer questions about the build."), [auth])
    async with sqlite_relay.client(alice) as client:
        general = await create_channel(client, alice, "general")
        history = await create_channel(client, alice, "history")
        await create_channel(client, alice, "random")
        for who in (bob, carol, agent):
            await add_member(client, alice, general, who.pubkey)

    h = [["h", general]]
    await publish(carol, 9, "Kickoff notes are in the wiki.", h, now - 2 * DAY)
    await publish(bob, 9, "Yesterday's build was green.", h, now - DAY)
    t = now - 300
    showcase = await publish(bob, 9, SHOWCASE, h, t)
    await publish(bob, 9, f"```python\n{CODE}\n```", h, t + 20)
    more = await publish(bob, 9, "and one more thing", h, t + 40)
    ask = await publish(carol, 9, "@Alice can you check #random ?", [*h, ["p", alice.pubkey]], t + 60)
    events["reply"] = await publish(bob, 9, "on it", [*h, ["e", ask.id, "", "reply"]], t + 70)
    await publish(bob, 9, "@Rulesbot, summarise the build please", [*h, ["p", agent.pubkey]], t + 80)
    log = "\n".join(f"step {i:02d}: ok" for i in range(40))
    await publish(agent, 9, f"Here is the full log:\n\n```text\n{log}\n```", h, t + 90)
    summary = "\n".join(f"- point {i}: the build step {i} passed in {i * 3} s" for i in range(24))
    await publish(agent, 9, f"Summary of the build:\n\n{summary}", h, t + 100)
    await publish(bob, 40003, "and one more thing, corrected", [*h, ["e", more.id]], t + 110)

    needle = await publish(alice, 9, "needle in the haystack", [["h", history]], now - 3 * DAY)
    for i in range(FILLERS):
        await publish(alice, 9, f"filler {i:03d}", [["h", history]], now - 3 * DAY + 1 + i)
    assert showcase.id

    report = await run_scenario(
        "rich",
        {
            "url": sqlite_relay.http_url + "/",
            "secret": alice.secret,
            "general": general,
            "history": history,
            "needle": needle.id,
            "reply": events["reply"].id,
            "fillers": FILLERS,
            "code": CODE,
            "agentNpub": nip19.npub(agent.pubkey),
            "bobNpub": nip19.npub(bob.pubkey),
            "avatarPng": base64.b64encode(_png()).decode(),
            "timezone": _noon_timezone(now),
        },
        timeout=280,
    )
    assert_all_passed(report, CHECKS)
