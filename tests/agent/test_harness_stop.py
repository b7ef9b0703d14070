"""Stop means stop (issue 27 item 5): `!cancel` typed as people type it — after a mention of the
agent (`@Rulesbot !cancel`, as the browser sends it, or `nostr:npub1… !cancel`) — ends the turn
in flight; the person sees "stopped by <name>" in the turn's thread, the control outcome is
published, and the stopped request is never prompted again. The person who asked may stop
their own request (docs/decisions.md 334). Real harness, real relay, the rules agent as the
real ACP subprocess."""

from __future__ import annotations

import orjson

from buzz.agent.gates import control_command, stop_request, strip_self_mentions
from buzz.agent.queue import Batch, Item
from buzz.agent.stops import may_stop
from buzz.agent.turns import Turn
from buzz.core.event import Event
from buzz.core.nip19 import Profile as NProfile
from buzz.core.nip19 import encode, npub
from tests.agent.support import SPEECH, Workspace, publish, set_profile
from tests.support.relay import Identity

AGENT = "a" * 64
OWNER = "b" * 64


def _outcome(ws: Workspace, kind: str, actor: str):
    def match(e: Event) -> bool:
        if e.kind != 40099 or e.pubkey != ws.agent.pubkey:
            return False
        body = orjson.loads(e.content)
        return body["type"] == kind and body["actor"] == actor

    return match


async def _working(ws: Workspace, event: Event) -> None:
    await ws.watcher.wait_for(
        lambda e: e.kind == 7 and e.content == SPEECH and e.tag_values("e") == [event.id],
        what=f"the turn of {event.content!r} started",
    )


def _prompts_with(ws: Workspace, event: Event) -> int:
    return sum(1 for p in ws.records("prompt") if any(event.id in b for b in p["blocks"]))


async def test_owner_stops_with_a_mention_first(ws: Workspace) -> None:
    async with ws.harness():
        first = await ws.post(ws.owner, "@Rulesbot sleep 60", mention=ws.agent.pubkey)
        await _working(ws, first)
        # what the browser sends: the `@Name` stays in the text, the `p` tag names the agent
        await ws.post(ws.owner, "@Rulesbot !cancel", mention=ws.agent.pubkey)
        await ws.watcher.wait_for(
            lambda e: bool(ws.watcher.notices_to(first, ws.agent.pubkey, "stopped")), what="stopped by"
        )
        # …and its typing line ends now, not when its last typing event expires (decision 154)
        await ws.watcher.wait_for(
            lambda e: e.kind == 20002 and e.pubkey == ws.agent.pubkey and e.content == "stopped",
            what="typing stopped",
        )
        second = await ws.post(ws.owner, "@Rulesbot sleep 61", mention=ws.agent.pubkey)
        await _working(ws, second)
        await ws.post(ws.owner, f"nostr:{npub(ws.agent.pubkey)} !cancel", mention=ws.agent.pubkey)
        await ws.watcher.wait_for(
            lambda e: bool(ws.watcher.notices_to(second, ws.agent.pubkey, "stopped")), what="stopped by"
        )
        after = await ws.post(ws.owner, "@Rulesbot ping", mention=ws.agent.pubkey)
        await ws.watcher.wait_for(lambda e: bool(ws.watcher.answers_to(after, ws.agent.pubkey)), what="pong")
    for stopped in (first, second):
        assert [e.content for e in ws.watcher.notices_to(stopped, ws.agent.pubkey)] == ["stopped by Olivia"]
        assert ws.watcher.answers_to(stopped, ws.agent.pubkey) == []  # the turn ended unanswered
        assert _prompts_with(ws, stopped) == 1  # never sent again (no steer, no retry)
    outcomes = [orjson.loads(e.content)["type"] for e in ws.watcher.of(40099, ws.agent.pubkey)]
    # (two outcomes of one second are one event: the same content, tags and second)
    assert set(outcomes) == {"agent_turn_cancelled"}
    assert len(ws.records("cancelled")) == 2
    assert "pong" in ws.watcher.answers_to(after, ws.agent.pubkey)[0].content
    # the commands never reached the agent
    assert not any("!cancel" in b for p in ws.records("prompt") for b in p["blocks"])


async def test_the_requester_stops_their_own_request(ws: Workspace) -> None:
    bob = Identity.new()
    async with ws.relay.client(bob) as bob_client:
        await set_profile(bob_client, bob, "Bob")
        async with ws.harness(respond_to="anyone"):
            asked = await publish(bob_client, _message(bob, ws, "@Rulesbot sleep 60"))
            await _working(ws, asked)
            await publish(bob_client, _message(bob, ws, "@Rulesbot !cancel"))
            outcome = await ws.watcher.wait_for(
                _outcome(ws, "agent_turn_cancelled", bob.pubkey), what="outcome"
            )
            await ws.watcher.wait_for(
                lambda e: bool(ws.watcher.notices_to(asked, ws.agent.pubkey, "stopped")), what="stopped by"
            )
    assert orjson.loads(outcome.content)["actor"] == bob.pubkey
    assert [e.content for e in ws.watcher.notices_to(asked, ws.agent.pubkey)] == ["stopped by Bob"]
    assert ws.watcher.answers_to(asked, ws.agent.pubkey) == []
    assert _prompts_with(ws, asked) == 1


def _message(who: Identity, ws: Workspace, content: str) -> Event:
    return Event.create(who.secret, 9, content, [["h", ws.channel], ["p", ws.agent.pubkey]])


# -- the pure parts ----------------------------------------------------------------------------
def test_leading_mentions_of_the_agent_only_are_ignored() -> None:
    key = npub(AGENT)
    profile = encode("nprofile", NProfile(AGENT, ("wss://relay.example",)))
    for text in (
        "!cancel",
        "  @Rulesbot !cancel ",
        "@Rulesbot: !cancel",
        f"nostr:{key} !cancel",
        f"@{key} !cancel",
        f"nostr:{profile} !cancel",
        "@Rules bot @Rulesbot !cancel",
    ):
        assert strip_self_mentions(text, AGENT, ["Rulesbot", "Rules bot"]) == "!cancel", text
    for text in (
        "@Bob !cancel",  # a mention of someone else: not a command to this agent
        f"nostr:{npub(OWNER)} !cancel",
        "@Rulesbotx !cancel",
        "please !cancel",
    ):
        assert strip_self_mentions(text, AGENT, ["Rulesbot"]) != "!cancel", text


def test_who_may_stop() -> None:
    def event(author: str, content: str) -> Event:
        return Event(
            id="c" * 64,
            pubkey=author,
            created_at=1,
            kind=9,
            tags=(("p", AGENT),),
            content=content,
            sig="0" * 128,
        )

    assert control_command(event(OWNER, "@Rulesbot !cancel"), AGENT, OWNER, ["Rulesbot"]) is not None
    assert control_command(event("d" * 64, "@Rulesbot !cancel"), AGENT, OWNER, ["Rulesbot"]) is None
    assert stop_request(event("d" * 64, "@Rulesbot !cancel"), AGENT, ["Rulesbot"])
    assert not stop_request(event("d" * 64, "@Rulesbot !rotate"), AGENT, ["Rulesbot"])
    asker = "d" * 64
    turn = Turn("chan", 0, Batch("chan", [Item(event(asker, "sleep 9"), "chan", 0.0)]))
    assert may_stop(turn, asker)
    assert not may_stop(turn, "e" * 64)  # someone else's request
    assert not may_stop(None, asker)  # nothing in flight
    turn.job = "f" * 64
    assert not may_stop(turn, asker)  # a job is stopped by its 43005
