"""Membership changes, reconnects, failures, heartbeats and inactivity (agents.md §4.3, §4.7,
§4.14; §9.2 items 16, 17, 24)."""

from __future__ import annotations

import asyncio
import time

from buzz.core.event import Event
from tests.agent.support import SPEECH, Workspace, add_member, create_channel, publish
from tests.support.deadline import scaled, wait_until


def _replied(ws: Workspace, event: Event):
    return lambda e: bool(ws.watcher.replies_to(event, ws.agent.pubkey))


async def _turn_ended(ws: Workspace, event: Event) -> None:
    """Wait for the removal of the 💬 reaction on `event` (the end of its turn)."""
    speech = await ws.watcher.wait_for(
        lambda e: (
            e.kind == 7
            and e.pubkey == ws.agent.pubkey
            and e.content == SPEECH
            and e.tag_values("e") == [event.id]
        ),
        what="💬",
    )
    await ws.watcher.wait_for(lambda e: e.kind == 5 and e.tag_values("e") == [speech.id], what="💬 removal")


async def test_added_and_removed_channels(ws: Workspace) -> None:
    async with ws.harness() as harness:
        later = await create_channel(ws.owner_client, ws.owner, "later")
        await ws.watch(later)
        await add_member(ws.owner_client, ws.owner, later, ws.agent.pubkey, "bot")
        for _ in range(100):  # 44100 → `ch-<C>` opened
            if harness.runtime.link.subscribed(f"ch-{later}"):
                break
            await asyncio.sleep(0.05)
        mention = await ws.post(ws.owner, "echo in later", mention=ws.agent.pubkey, channel=later)
        await ws.watcher.wait_for(_replied(ws, mention), what="reply in the new channel")
        assert harness.runtime.sessions.has_channel(later)
        await publish(
            ws.owner_client, Event.create(ws.owner.secret, 9001, "", [["h", later], ["p", ws.agent.pubkey]])
        )
        rt = harness.runtime
        for _ in range(100):  # 44101 → closed; sessions dropped (after an in-flight turn returns)
            if not rt.link.subscribed(f"ch-{later}") and not rt.sessions.has_channel(later):
                break
            await asyncio.sleep(0.05)
        assert not rt.link.subscribed(f"ch-{later}") and not rt.sessions.has_channel(later)
        assert later not in rt.channels
        ignored = await ws.post(ws.owner, "echo gone", mention=ws.agent.pubkey, channel=later)
        marker = await ws.post(ws.owner, "echo marker", mention=ws.agent.pubkey)
        await ws.watcher.wait_for(_replied(ws, marker), what="reply in #general")
    assert ws.watcher.replies_to(ignored, ws.agent.pubkey) == []


async def test_an_archived_channel_is_let_go_and_served_again_once_unarchived(ws: Workspace) -> None:
    """Decision 386: the harness follows a channel's archiving (its 39000) without a restart,
    and one started while the channel is archived serves it once it is unarchived."""
    incidents = await create_channel(ws.owner_client, ws.owner, "incidents")
    await ws.watch(incidents)

    changes = iter(range(100))

    async def archived(value: str) -> None:
        # A second apart: archiving twice in one second would sign the same event twice
        tags = [["h", incidents], ["archived", value]]
        at = int(time.time()) + next(changes)
        await publish(ws.owner_client, Event.create(ws.owner.secret, 9002, "", tags, at))

    async with ws.harness() as harness:
        rt = harness.runtime
        await add_member(ws.owner_client, ws.owner, incidents, ws.agent.pubkey, "bot")
        await wait_until(lambda: rt.link.subscribed(f"ch-{incidents}"), scaled(10), "subscribed once added")
        await archived("true")
        await wait_until(
            lambda: not rt.link.subscribed(f"ch-{incidents}"), scaled(10), "let go once archived"
        )
        assert incidents not in rt.channels
        await archived("false")
        await wait_until(
            lambda: rt.link.subscribed(f"ch-{incidents}"), scaled(10), "served again once unarchived"
        )
        mention = await ws.post(
            ws.owner, "echo after the archive", mention=ws.agent.pubkey, channel=incidents
        )
        await ws.watcher.wait_for(_replied(ws, mention), what="reply in the unarchived channel")
        await archived("true")
        await wait_until(
            lambda: not rt.link.subscribed(f"ch-{incidents}"), scaled(10), "let go once archived again"
        )

    async with ws.harness() as harness:  # started while the channel is archived
        rt = harness.runtime
        marker = await ws.post(ws.owner, "echo marker", mention=ws.agent.pubkey)
        await ws.watcher.wait_for(_replied(ws, marker), what="reply in #general: started")
        assert not rt.link.subscribed(f"ch-{incidents}") and incidents not in rt.channels
        await archived("false")
        await wait_until(lambda: rt.link.subscribed(f"ch-{incidents}"), scaled(10), "served once unarchived")
        mention = await ws.post(ws.owner, "echo unarchived", mention=ws.agent.pubkey, channel=incidents)
        await ws.watcher.wait_for(_replied(ws, mention), what="reply after a start while archived")


async def test_reconnect_resubscribes_without_prompting_twice(ws: Workspace) -> None:
    async with ws.harness() as harness:
        first = await ws.post(ws.owner, "echo before", mention=ws.agent.pubkey)
        await ws.watcher.wait_for(_replied(ws, first), what="first reply")
        await _turn_ended(ws, first)
        link = harness.runtime.link
        assert link.connections == 1
        for conn in list(ws.relay.relay.connections):  # the relay drops the agent's socket
            if getattr(conn.session, "pubkey", None) == ws.agent.pubkey:
                await conn.ws.close()
        for _ in range(200):
            if link.connections == 2 and link.connected.is_set():
                break
            await asyncio.sleep(0.05)
        assert link.connections == 2
        second = await ws.post(ws.owner, "echo after", mention=ws.agent.pubkey)
        await ws.watcher.wait_for(_replied(ws, second), what="reply after the reconnect")
    prompts = ws.records("prompt")
    assert len(prompts) == 2  # the 5 s overlap re-delivered `first`, which was not prompted again
    assert first.id in "".join(prompts[0]["blocks"]) and first.id not in "".join(prompts[1]["blocks"])


async def test_dead_lettered_batch_gets_one_failure_notice(ws: Workspace) -> None:
    async with ws.harness(max_attempts=1):  # dead-letter on the first failure
        failing = await ws.post(ws.owner, "fail", mention=ws.agent.pubkey)
        notice = await ws.watcher.wait_for(_replied(ws, failing), what="failure notice")
        await asyncio.sleep(0.3)
    notice = ws.watcher.replies_to(failing, ws.agent.pubkey)
    assert len(notice) == 1
    assert notice[0].content == "Sorry, I could not process this message."
    assert [list(t) for t in notice[0].tags] == [
        ["h", ws.channel],
        ["e", failing.id, "", "reply"],
        ["buzz:agent-notice", "failure"],
    ]  # no p tags; the marker keeps sibling agents from waking on it (issue 14 item 6)
    assert len(ws.records("session_new")) == 1


async def test_heartbeat_runs_in_its_own_session_without_memory(ws: Workspace) -> None:
    async with ws.harness() as harness:
        assert await harness.dispatcher.heartbeat_once("[Heartbeat]\nanything to do?")
        mention = await ws.post(ws.owner, "ping", mention=ws.agent.pubkey)
        await ws.watcher.wait_for(_replied(ws, mention), what="reply")
    sessions = ws.records("session_new")
    prompts = ws.records("prompt")
    assert len(sessions) == 2 and prompts[0]["session_id"] != prompts[1]["session_id"]
    heartbeat = prompts[0]["blocks"]
    assert heartbeat[-1] == "[Heartbeat]\nanything to do?"
    assert not any("<core-memory>" in b for b in heartbeat)
    assert any("<core-memory>" in b for b in prompts[1]["blocks"])  # the channel session has it


async def test_exit_after_inactivity(ws: Workspace) -> None:
    config = ws.config(exit_after_inactivity=1)
    from buzz.agent.harness import Harness
    from buzz.agent.identity import resolve_identity

    started = time.monotonic()
    code = await asyncio.wait_for(
        Harness(config, resolve_identity(config), cwd=str(ws.tmp)).run(), scaled(20)
    )
    assert code == 0 and time.monotonic() - started < 10


async def test_two_channels_run_in_parallel_in_two_sessions(ws: Workspace) -> None:
    other = await create_channel(ws.owner_client, ws.owner, "other")
    await add_member(ws.owner_client, ws.owner, other, ws.agent.pubkey, "bot")
    await ws.watch(other)
    await ws.next_second()
    async with ws.harness(agents=2):
        slow = await ws.post(ws.owner, "sleep 1.5", mention=ws.agent.pubkey)
        fast = await ws.post(ws.owner, "ping", mention=ws.agent.pubkey, channel=other)
        await ws.watcher.wait_for(_replied(ws, fast), what="reply in the other channel")
        assert ws.watcher.replies_to(slow, ws.agent.pubkey) == []  # still sleeping: not serialized
        await ws.watcher.wait_for(_replied(ws, slow), what="slow reply")
    sessions = {r["session_id"] for r in ws.records("prompt")}
    assert len(sessions) == 2 and len(ws.records("session_new")) == 2
