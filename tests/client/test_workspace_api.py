"""The workspace client API used directly, as a new face would (issue 11): typed values, the one
error tree, memory and huddles — against a real relay over real HTTP and WebSocket."""

from __future__ import annotations

import pytest

from buzz.client.errors import Conflict, NotFound, UserError, WorkspaceError
from buzz.client.identity import Identity as ApiIdentity
from buzz.client.memory import sha256_hex
from buzz.client.models import ChannelSummary, Message, SentMessage, as_json
from buzz.client.workspace import Workspace
from buzz.core.nip_oa import build_auth_tag
from tests.support.relay import Identity, RunningRelay


def _ws(relay: RunningRelay, who: Identity, auth_tag: list[str] | None = None) -> Workspace:
    return Workspace(relay.url, ApiIdentity(who.secret, auth_tag))


async def test_channels_and_messages_return_dataclasses(sqlite_relay: RunningRelay, alice: Identity) -> None:
    async with _ws(sqlite_relay, alice) as ws:
        created = await ws.channels.create("design", visibility="private", description="UI")
        listed = await ws.channels.listing(member=True)
        assert listed == [
            ChannelSummary(created.channel_id, "design", "stream", "private", "UI", False, True)
        ]
        channel = await ws.channels.get(created.channel_id)
        assert (channel.role, channel.member, channel.about) == ("owner", True, "UI")

        sent = await ws.messages.send(created.channel_id, "hello")
        assert isinstance(sent, SentMessage) and sent.channel_id == created.channel_id
        reply = await ws.messages.send(created.channel_id, "reply", reply_to=sent.event_id)
        assert (reply.reply_to, reply.root) == (sent.event_id, sent.event_id)
        await ws.messages.edit(sent.event_id, "hello, edited")

        got = await ws.messages.get(created.channel_id)
        assert [type(m) for m in got] == [Message, Message]
        by_id = {m.id: m for m in got}
        assert (by_id[sent.event_id].content, by_id[reply.event_id].reply_to) == (
            "hello, edited",
            sent.event_id,
        )
        thread = await ws.messages.thread(created.channel_id, reply.event_id)
        assert thread.root == sent.event_id and [m.id for m in thread.messages] == [
            sent.event_id,
            reply.event_id,
        ]
        # the JSON value a face prints keeps the CLI's key order
        assert list(as_json(by_id[sent.event_id]))[:7] == [
            "id",
            "pubkey",
            "created_at",
            "kind",
            "tags",
            "content",
            "sig",
        ]


async def test_failures_are_one_error_tree(
    sqlite_relay: RunningRelay, alice: Identity, bob: Identity
) -> None:
    async with _ws(sqlite_relay, alice) as ws:
        with pytest.raises(UserError) as bad:
            await ws.messages.get("not-a-channel")
        assert bad.value.to_dict() == {
            "error": "user_error",
            "message": "invalid channel id 'not-a-channel': expected a canonical UUID (8-4-4-4-12 hex)",
            "retryable": False,
        }
        with pytest.raises(UserError) as nil:  # canonical, but no channel can have it
            await ws.messages.get("00000000-0000-0000-0000-000000000000")
        assert "the nil UUID names no channel" in nil.value.message
        with pytest.raises(NotFound):
            await ws.channels.get("3f2b7c1e-8a4d-4e2f-9c1a-5b6d7e8f9a0b")
        channel = (await ws.channels.create("general", visibility="private")).channel_id
        sent = await ws.messages.send(channel, "react to me")
        await ws.reactions.add(sent.event_id, "👍")
        with pytest.raises(Conflict) as twice:
            await ws.reactions.add(sent.event_id, "👍")
        assert twice.value.category == "conflict" and twice.value.relay_message.startswith("duplicate:")
        assert isinstance(twice.value, WorkspaceError)
    async with _ws(sqlite_relay, bob) as outsider:
        with pytest.raises(WorkspaceError) as refused:  # not a member: the relay's refusal
            await outsider.messages.send(channel, "let me in")
        assert refused.value.category == "error" and refused.value.relay_message is not None


async def test_keys_that_are_not_curve_points_are_refused_before_the_relay(
    sqlite_relay: RunningRelay, alice: Identity, bob: Identity
) -> None:
    """Decision 107: one check in the API, so the CLI, MCP and every other face refuse the same."""
    async with _ws(sqlite_relay, alice) as ws:
        channel = (await ws.channels.create("keys", visibility="private")).channel_id
        for call in (
            lambda: ws.channels.add_member(channel, "f" * 64, "member"),
            lambda: ws.dms.open([bob.pubkey, "0" * 64]),
            lambda: ws.huddles.start(channel, agents=["f" * 64]),
        ):
            with pytest.raises(UserError, match="is not a secp256k1 public key"):
                await call()
        assert [m.pubkey for m in await ws.channels.members(channel)] == [alice.pubkey]
        assert await ws.huddles.listing(channel) == []
        assert await ws.dms.listing() == []


async def test_memory_area(sqlite_relay: RunningRelay, alice: Identity, bob: Identity) -> None:
    tag = build_auth_tag(alice.secret, bob.pubkey)
    async with _ws(sqlite_relay, bob, tag) as agent:
        memory = agent.memory()  # agent side: the owner comes from the tag
        write = await memory.set("mem/notes/plan", "alpha\nbeta\n")
        assert (write.slug, len(write.event_id)) == ("mem/notes/plan", 64)
        assert await memory.get("mem/notes/plan") == "alpha\nbeta\n"
        assert [e.slug for e in (await memory.ls()).entries] == ["mem/notes/plan"]
        assert [e.slug for e in await memory.search("BETA")] == ["mem/notes/plan"]
        diff = "--- a\n+++ b\n@@ -1,2 +1,2 @@\n alpha\n-beta\n+gamma\n"
        patched = await memory.patch("mem/notes/plan", diff, sha256_hex("alpha\nbeta\n"))
        assert patched.write is not None and patched.sha256 == sha256_hex("alpha\ngamma\n")
        with pytest.raises(Conflict):
            await memory.patch("mem/notes/plan", diff, sha256_hex("alpha\nbeta\n"))
        await memory.rm("mem/notes/plan")
        assert await memory.value("mem/notes/plan") is None
        with pytest.raises(NotFound):
            await memory.get("mem/notes/plan")
    async with _ws(sqlite_relay, alice) as owner:
        with pytest.raises(UserError):
            owner.memory(owner=bob.pubkey, agent=bob.pubkey)
        await agent_write_seen_by_owner(sqlite_relay, bob, tag, owner)


async def agent_write_seen_by_owner(
    relay: RunningRelay, agent: Identity, tag: list[str], owner: Workspace
) -> None:
    async with _ws(relay, agent, tag) as ws:
        await ws.memory().set("core", "I am the release bot.")
    assert await owner.memory(agent=agent.pubkey).get("core") == "I am the release bot."


async def test_huddles_start_list_status(sqlite_relay: RunningRelay, alice: Identity, bob: Identity) -> None:
    async with _ws(sqlite_relay, alice) as ws:
        parent = (await ws.channels.create("standup")).channel_id
        assert await ws.huddles.listing(parent) == []
        started = await ws.huddles.start(parent, agents=[bob.pubkey])
        assert (started.parent_channel_id, started.started_by, started.ended_at) == (
            parent,
            alice.pubkey,
            None,
        )
        huddle_channel = await ws.channels.get(started.huddle_channel_id)
        assert (huddle_channel.visibility, huddle_channel.ttl_seconds) == ("private", 3600)
        members = {m.pubkey: m.role for m in await ws.channels.members(started.huddle_channel_id)}
        assert members == {alice.pubkey: "owner", bob.pubkey: "bot"}
        listed = await ws.huddles.listing(parent)
        assert [h.huddle_channel_id for h in listed] == [started.huddle_channel_id]
        status = await ws.huddles.status(parent)
        assert (status.event_id, status.participants) == (started.event_id, [])
        with pytest.raises(NotFound):
            await ws.huddles.status(parent, huddle="3f2b7c1e-8a4d-4e2f-9c1a-5b6d7e8f9a0b")


async def test_a_start_beside_a_live_huddle_gives_the_live_one_back(
    sqlite_relay: RunningRelay, alice: Identity, bob: Identity
) -> None:
    """Decision 81: a second start in a channel with a live huddle starts nothing and returns
    the live one (in the same second too, whatever the event ids)."""
    async with _ws(sqlite_relay, alice) as owner:
        parent = (await owner.channels.create("standup")).channel_id
        await owner.channels.add_member(parent, bob.pubkey)
        first = await owner.huddles.start(parent)
    async with _ws(sqlite_relay, bob) as ws:
        second = await ws.huddles.start(parent)
        assert (second.huddle_channel_id, second.event_id, second.started_by) == (
            first.huddle_channel_id,
            first.event_id,
            alice.pubkey,
        )
        listed = await ws.huddles.listing(parent)
        assert [(h.huddle_channel_id, h.ended_at) for h in listed] == [(first.huddle_channel_id, None)]


async def test_relay_key_is_nip11_self_not_the_operator_contact(tmp_path, alice: Identity) -> None:
    """Relay-signed events are trusted with NIP-11 `self`; `pubkey` is the operator's contact and
    names another key when BUZZ_OWNER_PUBKEY is set (a huddle roster would then be distrusted)."""
    from buzz.client.session import Session
    from tests.support.relay import relay_on

    operator = Identity.new()
    async with relay_on(tmp_path, owner_pubkey=operator.pubkey) as running:
        async with Session(running.http_url, ApiIdentity(alice.secret)) as s:
            key = await s.relay_pubkey()
        assert key == running.relay.pubkey != operator.pubkey
