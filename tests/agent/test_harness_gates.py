"""The author gate and the DM rule against a live harness (agents.md §4.5, §4.6)."""

from __future__ import annotations

import asyncio

import orjson

from buzz.core.event import Event
from buzz.core.nip_oa import build_auth_tag
from tests.agent.support import EYES, Workspace, publish, set_profile
from tests.support.relay import Identity


def _replied(ws: Workspace, event: Event):
    return lambda e: bool(ws.watcher.replies_to(event, ws.agent.pubkey))


def _eyes_on(ws: Workspace, event: Event) -> list[Event]:
    return [
        e for e in ws.watcher.of(7, ws.agent.pubkey) if e.tag_values("e") == [event.id] and e.content == EYES
    ]


async def test_stranger_ignored_under_owner_only_answered_under_anyone(ws: Workspace, bob: Identity) -> None:
    async with ws.harness():
        stranger = await ws.post(bob, "ping", mention=ws.agent.pubkey)
        marker = await ws.post(ws.owner, "echo marker", mention=ws.agent.pubkey)
        await ws.watcher.wait_for(_replied(ws, marker), what="owner's reply")
    # dropped before any reaction was added (agents.md §9.2 item 21)
    assert ws.watcher.answers_to(stranger, ws.agent.pubkey) == [] and _eyes_on(ws, stranger) == []
    await ws.next_second()
    async with ws.harness(respond_to="anyone", catch_up=0):  # only what is posted from now on
        again = await ws.post(bob, "echo hello from bob", mention=ws.agent.pubkey)
        # a non-owner's command text is an ordinary message (agents.md §9.2 item 20)
        fake = await ws.post(bob, "!shutdown", mention=ws.agent.pubkey)
        await ws.watcher.wait_for(_replied(ws, again), what="reply to the stranger")
        await ws.watcher.wait_for(_replied(ws, fake), what="reply to the stranger's !shutdown")
    assert "heard: !shutdown" in ws.watcher.replies_to(fake, ws.agent.pubkey)[0].content
    assert not [e for e in ws.watcher.of(40099, ws.agent.pubkey)]


async def test_allowlist_admits_listed_authors(ws: Workspace, bob: Identity, carol: Identity) -> None:
    async with ws.harness(respond_to="allowlist", respond_to_allowlist=bob.pubkey):
        listed = await ws.post(bob, "echo listed", mention=ws.agent.pubkey)
        unlisted = await ws.post(carol, "echo unlisted", mention=ws.agent.pubkey)
        await ws.watcher.wait_for(_replied(ws, listed), what="reply to the allowlisted author")
        marker = await ws.post(ws.owner, "echo marker", mention=ws.agent.pubkey)
        await ws.watcher.wait_for(_replied(ws, marker), what="owner's reply")
    assert ws.watcher.answers_to(unlisted, ws.agent.pubkey) == []


async def test_sibling_agent_is_admitted_other_agents_are_not(ws: Workspace, bob: Identity) -> None:
    sibling, foreign = Identity.new(), Identity.new()
    sibling_tag = build_auth_tag(ws.owner.secret, sibling.pubkey)
    foreign_tag = build_auth_tag(bob.secret, foreign.pubkey)
    for who, name, tag in ((sibling, "Sister", sibling_tag), (foreign, "Stranger", foreign_tag)):
        async with ws.relay.client(who, auth_tags=[tag]) as client:
            await set_profile(client, who, name, tag)
    async with ws.harness():
        other = await ws.post(foreign, "echo foreign", mention=ws.agent.pubkey)
        sister = await ws.post(sibling, "echo from your sibling", mention=ws.agent.pubkey)
        await ws.watcher.wait_for(_replied(ws, sister), what="reply to the sibling")
    assert ws.watcher.answers_to(other, ws.agent.pubkey) == [] and _eyes_on(ws, other) == []
    # a batch from agents only gets no forced reply anchor (agents.md §4.12 step 1)
    context = next(b for b in ws.records("prompt")[0]["blocks"] if b.startswith("[Context]"))
    assert "A human is waiting" not in context


async def _open_dm(ws: Workspace, who: Identity) -> str:
    async with ws.relay.client(who) as client:
        result = await client.publish(Event.create(who.secret, 41010, "", [["p", ws.agent.pubkey]]))
    assert result.accepted and result.message.startswith("response:"), result.message
    return orjson.loads(result.message[len("response:") :])["channel_id"]


async def test_dm_from_a_stranger_is_never_answered(ws: Workspace, bob: Identity) -> None:
    async with ws.harness(respond_to="anyone"):
        bob_dm = await _open_dm(ws, bob)
        owner_dm = await _open_dm(ws, ws.owner)
        async with ws.relay.client(bob) as bob_client:
            stranger = await publish(
                bob_client, Event.create(bob.secret, 9, "ping", [["h", bob_dm], ["p", ws.agent.pubkey]])
            )
            await ws.watch(owner_dm)
            from_owner = await ws.post(ws.owner, "echo in a dm", mention=ws.agent.pubkey, channel=owner_dm)
            await ws.watcher.wait_for(_replied(ws, from_owner), what="reply in the owner's DM")
            await asyncio.sleep(0.5)
            seen_by_bob = await bob_client.query([{"#h": [bob_dm], "authors": [ws.agent.pubkey]}])
            reactions = await bob_client.query([{"kinds": [7], "#e": [stranger.id]}])
    assert seen_by_bob == [] and reactions == []
    prompts = ws.records("prompt")
    assert len(prompts) == 1 and all(stranger.id not in b for b in prompts[0]["blocks"])
    assert "Scope: dm" in next(b for b in prompts[0]["blocks"] if b.startswith("[Context]"))
