"""A mention becomes a turn (agents.md §4.4, §4.12, §4.13, §5.1): real relay, real harness, the
example rules agent as the real ACP subprocess replying with `buzz messages send`."""

from __future__ import annotations

import orjson

from buzz.core import nip19, nip44
from tests.agent.support import EYES, SPEECH, Workspace


# Status reactions and their removals carry the channel's h (docs/decisions.md 174).
def _reaction_on(ws: Workspace, target: str, emoji: str):
    return lambda e: (
        e.kind == 7
        and e.pubkey == ws.agent.pubkey
        and e.content == emoji
        and [list(t) for t in e.tags] == [["e", target], ["h", ws.channel]]
    )


def _removal_of(ws: Workspace, reaction_id: str):
    return lambda e: (
        e.kind == 5
        and e.pubkey == ws.agent.pubkey
        and [list(t) for t in e.tags] == [["e", reaction_id], ["h", ws.channel]]
    )


async def test_mention_gets_threaded_reply_and_status_reactions(ws: Workspace) -> None:
    async with ws.harness():
        mention = await ws.post(ws.owner, "ping", mention=ws.agent.pubkey)
        reply = await ws.watcher.wait_for(
            lambda e: bool(ws.watcher.replies_to(mention, ws.agent.pubkey)), what="reply"
        )
        reply = ws.watcher.replies_to(mention, ws.agent.pubkey)[0]
        eyes = await ws.watcher.wait_for(_reaction_on(ws, mention.id, EYES), what="👀")
        speech = await ws.watcher.wait_for(_reaction_on(ws, mention.id, SPEECH), what="💬")
        await ws.watcher.wait_for(_removal_of(ws, eyes.id), what="👀 removal")
        await ws.watcher.wait_for(_removal_of(ws, speech.id), what="💬 removal")
    # the reply is the agent's own `buzz messages send`, a direct reply in the mention's thread
    assert reply.content.startswith("pong [session=rules-")
    assert [list(t) for t in reply.tags] == [["h", ws.channel], ["e", mention.id, "", "reply"]]
    order = [e.id for e in ws.watcher.events]
    assert order.index(eyes.id) < order.index(speech.id) < order.index(reply.id)
    typing = [e for e in ws.watcher.of(20002, ws.agent.pubkey)]
    assert typing and all([list(t) for t in e.tags] == [["h", ws.channel]] for e in typing)
    # the harness posted no kind 9 of its own (§4.13 item 1): the only agent message is the reply
    assert [e.id for e in ws.watcher.of(9, ws.agent.pubkey)] == [reply.id]
    # the prompt carried the §4.12 sections
    prompt = ws.records("prompt")[0]["blocks"]
    context = next(b for b in prompt if b.startswith("[Context]"))
    assert "Scope: channel" in context and f"(#{ws.channel})" in context
    assert f"--reply-to {mention.id}" in context
    block = next(b for b in prompt if b.startswith("[Buzz event: @mention]"))
    for field in (
        "Event ID: " + mention.id,
        "Kind: 9",
        "From: Olivia (npub1",
        "Time: ",
        "Content:\nping",
        "Tags: ",
        "Parsed: ",
    ):
        assert field in block


async def test_name_in_text_or_notify_never_wakes(ws: Workspace) -> None:
    async with ws.harness():
        silent = [
            await ws.post(ws.owner, "@Rulesbot ping"),
            await ws.post(ws.owner, "ping everyone", extra=[["notify", "channel"]]),
            await ws.post(ws.owner, f"nostr:{nip19.npub(ws.agent.pubkey)} ping"),
        ]
        woken = await ws.post(ws.owner, "echo marker", mention=ws.agent.pubkey)
        await ws.watcher.wait_for(
            lambda e: bool(ws.watcher.replies_to(woken, ws.agent.pubkey)), what="marker reply"
        )
    for event in silent:
        assert ws.watcher.replies_to(event, ws.agent.pubkey) == []
        assert not [e for e in ws.watcher.of(7, ws.agent.pubkey) if e.tag_values("e") == [event.id]]
    assert len(ws.records("prompt")) == 1


async def test_fs_and_terminal_requests_get_method_not_found(ws: Workspace) -> None:
    async with ws.harness(no_typing=True):
        mention = await ws.post(ws.owner, "probe", mention=ws.agent.pubkey)
        await ws.watcher.wait_for(
            lambda e: bool(ws.watcher.replies_to(mention, ws.agent.pubkey)), what="probe reply"
        )
    reply = ws.watcher.replies_to(mention, ws.agent.pubkey)[0]
    assert reply.content.startswith("fs=-32601 terminal=-32601")
    assert ws.watcher.of(20002) == []  # --no-typing


async def test_thread_reply_gets_history_and_the_root_as_anchor(ws: Workspace) -> None:
    async with ws.harness():
        root = await ws.post(ws.owner, "echo first", mention=ws.agent.pubkey)
        await ws.watcher.wait_for(
            lambda e: bool(ws.watcher.replies_to(root, ws.agent.pubkey)), what="first reply"
        )
        answer = ws.watcher.replies_to(root, ws.agent.pubkey)[0]
        speech = await ws.watcher.wait_for(_reaction_on(ws, root.id, SPEECH), what="💬")
        await ws.watcher.wait_for(_removal_of(ws, speech.id), what="end of the first turn")
        nested = await ws.post(ws.owner, "echo second", mention=ws.agent.pubkey, reply_to=answer)
        await ws.watcher.wait_for(
            lambda e: bool(ws.watcher.replies_to(root, ws.agent.pubkey)[1:]), what="second reply"
        )
    second = ws.watcher.replies_to(root, ws.agent.pubkey)[1]
    # the agent answered at the thread root (agents.md §4.12 step 1; §9.2 item 29)
    assert [list(t) for t in second.tags] == [["h", ws.channel], ["e", root.id, "", "reply"]]
    blocks = ws.records("prompt")[1]["blocks"]
    context = next(b for b in blocks if b.startswith("[Context]"))
    assert (
        "Scope: thread" in context
        and f"Thread root: {root.id}" in context
        and f"Parent: {answer.id}" in context
    )
    assert f"--reply-to {root.id}" in context
    history = next(b for b in blocks if b.startswith("[History"))
    assert history.splitlines()[0] == "[History — this thread: 2 of 2 messages shown, oldest first]"
    assert history.splitlines()[1].endswith("Olivia: echo first") and "Rulesbot: first [session=" in history
    assert nested.id not in history  # the batch's own event is not history
    assert not any(b.startswith("[History") for b in ws.records("prompt")[0]["blocks"])  # top-level: none


async def test_owner_decrypts_a_turn_metric_per_turn(ws: Workspace) -> None:
    async with ws.harness():
        first = await ws.post(ws.owner, "ping", mention=ws.agent.pubkey)
        await ws.watcher.wait_for(
            lambda e: bool(ws.watcher.replies_to(first, ws.agent.pubkey)), what="reply 1"
        )
        second = await ws.post(ws.owner, "echo again", mention=ws.agent.pubkey)
        await ws.watcher.wait_for(
            lambda e: bool(ws.watcher.replies_to(second, ws.agent.pubkey)), what="reply 2"
        )
        await ws.watcher.wait_for(
            lambda e: (
                e.kind == 5 and e.pubkey == ws.agent.pubkey and len(ws.watcher.of(5, ws.agent.pubkey)) >= 4
            ),
            what="removals",
        )
    metrics = await ws.owner_client.query([{"kinds": [44200], "#p": [ws.owner.pubkey]}])
    assert len(metrics) == 2
    key = nip44.get_conversation_key(ws.owner.secret, ws.agent.pubkey)
    payloads = []
    for event in metrics:
        assert event.pubkey == ws.agent.pubkey
        assert [list(t) for t in event.tags] == [["p", ws.owner.pubkey], ["agent", ws.agent.pubkey]]
        payloads.append(orjson.loads(nip44.decrypt(event.content, key)))
    payloads.sort(key=lambda p: p["turnSeq"])
    session = ws.watcher.replies_to(first, ws.agent.pubkey)[0].content.split("session=")[1].split()[0]
    for seq, payload in enumerate(payloads, start=1):
        assert payload["harness"] == "buzz-agent-harness"
        assert payload["timestamp"].endswith("Z")
        assert (payload["channelId"], payload["sessionId"], payload["turnSeq"]) == (ws.channel, session, seq)
        assert payload["stopReason"] == "end_turn"
        assert payload["turn"]["inputTokens"] > 0 and payload["turn"]["totalTokens"] > 0
        assert payload["cumulative"]["costUsd"] > 0 and payload["deltaReliable"] is True
        assert "ping" not in orjson.dumps(payload).decode()  # no conversation content
    assert payloads[1]["cumulative"]["costUsd"] > payloads[0]["cumulative"]["costUsd"]
    # the agent itself cannot read its metrics back (agents.md §5.1 item 6)
    async with ws.relay.client(ws.agent) as agent_client:
        assert await agent_client.query([{"kinds": [44200], "#p": [ws.agent.pubkey]}]) == []
