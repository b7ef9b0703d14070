"""The messages model (relay.md §9 items 1, 3, 4, 11, §10.2, §6.2; agents.md §3; §18 items
35–38, 78–82, 101), over real WebSocket on both backends."""

from __future__ import annotations

import asyncio
import json

from buzz.core.event import Event
from buzz.core.nip_oa import build_auth_tag
from tests.support.relay import Identity, RunningRelay
from tests.workspace.helpers import (
    accepted,
    create_channel,
    drain,
    ids,
    live,
    message,
    put_user,
    refused,
    settle,
)


def _reply(who: Identity, channel_id: str, parent: Event, root: Event | None, content: str = "re") -> Event:
    """agents.md §3.3: a direct reply names only the parent; a deeper one also names the root."""
    if root is None or root.id == parent.id:
        tags = [["h", channel_id], ["e", parent.id, "", "reply"]]
    else:
        tags = [["h", channel_id], ["e", root.id, "", "root"], ["e", parent.id, "", "reply"]]
    return Event.create(who.secret, 9, content, tags)


async def _registered(relay: RunningRelay, agent: Identity, owner: Identity) -> None:
    async with relay.client(agent, auth_tags=[build_auth_tag(owner.secret, agent.pubkey)]):
        pass


# -- threads (§9 item 1, §18 item 82) -------------------------------------------------------------
async def test_thread_root_and_depth_are_recorded(relay: RunningRelay, alice: Identity) -> None:
    async with relay.client(alice) as a:
        c = await create_channel(a, alice)
        root = await message(a, alice, c, "root")
        first = _reply(alice, c, root, None)
        await accepted(a, first)
        second = _reply(alice, c, first, root)
        await accepted(a, second)
        plain = Event.create(alice.secret, 9, "unmarked e", [["h", c], ["e", root.id]])
        await accepted(a, plain)
    store = relay.relay.store
    assert await store.get_thread(root.id) is None
    assert await store.get_thread(first.id) == (root.id, 1)
    assert await store.get_thread(second.id) == (root.id, 2)
    assert await store.get_thread(plain.id) is None  # unmarked e tags are not thread links


async def test_thread_refusals(relay: RunningRelay, alice: Identity) -> None:
    async with relay.client(alice) as a:
        c = await create_channel(a, alice)
        other = await create_channel(a, alice, name="other")
        root = await message(a, alice, c, "root")
        elsewhere = await message(a, alice, other, "elsewhere")
        reply = _reply(alice, c, root, None)
        await accepted(a, reply)
        cross = _reply(alice, c, elsewhere, None)
        await refused(relay, a, cross, "invalid: reply parent not found in this channel")
        missing = Event.create(alice.secret, 9, "?", [["h", c], ["e", "ab" * 32, "", "reply"]])
        await refused(relay, a, missing, "invalid: reply parent not found in this channel")
        global_parent = Event.create(alice.secret, 1, "global")
        await accepted(a, global_parent)
        await refused(
            relay, a, _reply(alice, c, global_parent, None), "invalid: reply parent not found in this channel"
        )
        wrong_root = Event.create(
            alice.secret, 9, "x", [["h", c], ["e", elsewhere.id, "", "root"], ["e", reply.id, "", "reply"]]
        )
        await refused(relay, a, wrong_root, "invalid: thread root does not match parent")
        skips_root = Event.create(alice.secret, 9, "y", [["h", c], ["e", reply.id, "", "reply"]])
        await refused(relay, a, skips_root, "invalid: thread root does not match parent")


async def test_reply_depth_101_is_refused(relay: RunningRelay, alice: Identity) -> None:
    async with relay.client(alice) as a:
        c = await create_channel(a, alice)
        root = await message(a, alice, c, "root")
        chain = [root]
        for depth in range(1, 101):
            chain.append(_reply(alice, c, chain[-1], root, f"depth {depth}"))
        results = await asyncio.gather(*(a.publish(e) for e in chain[1:]))  # pipelined, ingested in order
        assert all(r.accepted for r in results), [r.message for r in results if not r.accepted][:1]
        assert await relay.relay.store.get_thread(chain[-1].id) == (root.id, 100)
        too_deep = _reply(alice, c, chain[-1], root, "depth 101")
        await refused(relay, a, too_deep, "invalid: thread depth exceeds 100")


# -- #h matching and live scope (§6.3; issue 25 item 5, decision 174) ------------------------------
async def test_channel_reactions_carry_their_channel(relay: RunningRelay, alice: Identity) -> None:
    """A reaction or deletion of a channel event must name that channel in `h` (with a reason
    that says to add it), so a `#h` filter matches it by NIP-01's tag rule, stored and live."""
    async with relay.client(alice) as a:
        c = await create_channel(a, alice)
        d = await create_channel(a, alice, name="other")
        note = await message(a, alice, c, "react to me")
        feed = await live(a, {"kinds": [7, 5], "#h": [c]})
        plain = Event.create(alice.secret, 7, "👍", [["e", note.id]])
        await refused(
            relay, a, plain, f'invalid: reactions of a channel event must carry its channel: add ["h","{c}"]'
        )
        elsewhere = Event.create(alice.secret, 7, "🎉", [["e", note.id], ["h", d]])
        await refused(relay, a, elsewhere, f"invalid: h tag must name the target's channel {c}")
        tagged = Event.create(alice.secret, 7, "🎉", [["e", note.id], ["h", c]])
        await accepted(a, tagged)
        assert await ids(a, {"kinds": [7], "#h": [c]}) == {tagged.id}
        assert (await feed.next()).id == tagged.id
        undo = Event.create(alice.secret, 5, "", [["e", tagged.id]])
        await refused(
            relay, a, undo, f'invalid: deletions of a channel event must carry its channel: add ["h","{c}"]'
        )
        undo = Event.create(alice.secret, 5, "", [["e", tagged.id], ["h", c]])
        await accepted(a, undo)
        assert (await feed.next()).id == undo.id
        note_1 = Event.create(alice.secret, 1, "global")
        await accepted(a, note_1)
        global_tagged = Event.create(alice.secret, 7, "+", [["e", note_1.id], ["h", c]])
        await refused(
            relay, a, global_tagged, "invalid: reactions of events outside channels carry no h tag: remove it"
        )
        await accepted(a, Event.create(alice.secret, 7, "+", [["e", note_1.id]]))
    stored = await relay.relay.store.get(tagged.id, include_deleted=True)
    assert stored is not None and stored.channel_id == c


async def test_live_channel_events_need_h_filters(
    relay: RunningRelay, alice: Identity, bob: Identity
) -> None:
    async with relay.client(alice) as a, relay.client(bob) as b:
        c = await create_channel(a, alice)
        named = await live(b, {"kinds": [9], "#h": [c]})
        unnamed = await live(b, {"kinds": [9]})
        note = await message(a, alice, c, "live")
        assert (await named.next()).id == note.id
        await settle(b)
        assert drain(unnamed) == []
        assert await ids(b, {"ids": [note.id]}) == {note.id}  # stored lookup without #h
        assert note.id in await ids(b, {"kinds": [9], "authors": [alice.pubkey]})


async def test_message_kinds_are_regular(relay: RunningRelay, alice: Identity) -> None:
    async with relay.client(alice) as a:
        c = await create_channel(a, alice)
        one = await message(a, alice, c, "one")
        two = await message(a, alice, c, "two")
        edits = [
            Event.create(alice.secret, 40003, text, [["h", c], ["e", one.id]]) for text in ("uno", "eins")
        ]
        for edit in edits:
            await accepted(a, edit)
        assert await ids(a, {"kinds": [9, 40003], "#h": [c]}) == {one.id, two.id, *(e.id for e in edits)}


# -- reactions (§9 item 3, §10.1 item 4; §18 item 80) ----------------------------------------------
async def test_reactions(relay: RunningRelay, alice: Identity, bob: Identity) -> None:
    async with relay.client(alice) as a, relay.client(bob) as b:
        c = await create_channel(a, alice)
        note = await message(a, alice, c, "react")
        h = ["h", c]
        first = Event.create(bob.secret, 7, "👍", [["e", note.id], h])
        await accepted(b, first)
        second = Event.create(bob.secret, 7, "👍", [["e", note.id], h, ["x", "another event"]])
        await refused(relay, b, second, "duplicate: reaction already exists")
        await accepted(b, Event.create(bob.secret, 7, "🎉", [["e", note.id], h]))
        await accepted(a, Event.create(alice.secret, 7, "👍", [["e", note.id], h]))
        missing = Event.create(bob.secret, 7, "👍", [["e", "cd" * 32], h])
        await refused(relay, b, missing, "invalid: reaction target event not found")
        no_target = Event.create(bob.secret, 7, "👍", [["p", alice.pubkey], h])
        await refused(relay, b, no_target, "invalid: reaction must reference a target event via e tag")
        long = Event.create(bob.secret, 7, "x" * 65, [["e", note.id], h])
        await refused(relay, b, long, "invalid: reaction content too long (max 64)")
        await accepted(b, Event.create(bob.secret, 7, "😀" * 64, [["e", note.id], h]))  # 64 code points
        await accepted(b, Event.create(bob.secret, 5, "", [["e", first.id], h]))  # removing the reaction
        assert await relay.relay.store.has_reaction(bob.pubkey, note.id, "👍") is False
        await accepted(b, second)  # the same reaction may be given again


async def test_reaction_in_private_channel_needs_membership(
    relay: RunningRelay, alice: Identity, bob: Identity
) -> None:
    async with relay.client(alice) as a, relay.client(bob) as b:
        c = await create_channel(a, alice, "private")
        note = await message(a, alice, c, "members only")
        await refused(
            relay,
            b,
            Event.create(bob.secret, 7, "👀", [["e", note.id], ["h", c]]),
            "restricted: not a channel member",
        )


# -- edits (§9 item 4; §18 item 81) ----------------------------------------------------------------
async def test_edits(relay: RunningRelay, alice: Identity, bob: Identity, carol: Identity) -> None:
    agent = Identity.new()
    await _registered(relay, agent, carol)
    async with relay.client(alice) as a, relay.client(bob) as b, relay.client(carol) as o:
        c = await create_channel(a, alice, "private")
        other = await create_channel(a, alice, "private", name="other")
        for who in (bob, agent):
            await put_user(a, alice, c, who.pubkey)
        async with relay.client(agent) as g:
            by_agent = await message(g, agent, c, "agent text")
        note = await message(b, bob, c, "bob's text")
        await accepted(b, Event.create(bob.secret, 40003, "bob's fixed text", [["h", c], ["e", note.id]]))
        # bad input: an edit of a third party's message
        third = Event.create(alice.secret, 40003, "alice rewrites bob", [["h", c], ["e", note.id]])
        await refused(relay, a, third, "invalid: must be event author to edit")
        wrong_channel = Event.create(bob.secret, 40003, "moved", [["h", other], ["e", note.id]])
        await refused(relay, b, wrong_channel, "invalid: must be event author to edit")
        missing = Event.create(bob.secret, 40003, "?", [["h", c], ["e", "ef" * 32]])
        await refused(relay, b, missing, "invalid: must be event author to edit")
        await accepted(
            o, Event.create(carol.secret, 40003, "owner fixes agent", [["h", c], ["e", by_agent.id]])
        )
        await accepted(a, Event.create(alice.secret, 9001, "", [["h", c], ["p", bob.pubkey]]))
        late = Event.create(bob.secret, 40003, "after removal", [["h", c], ["e", note.id]])
        await refused(relay, b, late, "invalid: must be event author to edit")


# -- 9005 moderation (§10.2; §18 items 78, 79) ------------------------------------------------------
async def test_moderation_deletion(
    relay: RunningRelay, alice: Identity, bob: Identity, carol: Identity
) -> None:
    async with relay.client(alice) as a, relay.client(bob) as b, relay.client(carol) as c:
        ch = await create_channel(a, alice)
        other = await create_channel(a, alice, name="other")
        await put_user(a, alice, ch, bob.pubkey, "admin")
        await put_user(a, alice, ch, carol.pubkey)
        note = await message(c, carol, ch, "off topic")
        # bad input: a 9005 by a non-admin (on someone else's message)
        mine = await message(a, alice, ch, "the owner's message")
        by_member = Event.create(carol.secret, 9005, "", [["h", ch], ["e", mine.id]])
        await refused(relay, c, by_member, "invalid: must be event author or channel owner/admin")
        cross = Event.create(bob.secret, 9005, "", [["h", other], ["e", note.id]])
        await refused(relay, b, cross, "invalid: target event belongs to a different channel")
        global_note = Event.create(carol.secret, 1, "global")
        await accepted(c, global_note)
        no_channel = Event.create(bob.secret, 9005, "", [["h", ch], ["e", global_note.id]])
        await refused(relay, b, no_channel, "invalid: target event has no channel")
        two = Event.create(bob.secret, 9005, "", [["h", ch], ["e", note.id], ["e", mine.id]])
        await refused(
            relay,
            b,
            two,
            "invalid: deletion events must reference exactly one target via e or a tag (got e=2, a=0)",
        )
        bad_action = Event.create(bob.secret, 9005, "", [["h", ch], ["e", note.id], ["action_id", "nope"]])
        await refused(relay, b, bad_action, "invalid: invalid action_id tag")
        tags = [
            ["h", ch],
            ["e", note.id],
            ["action_id", "0f0e0d0c-0b0a-4908-8706-050403020100"],
            ["reason_code", "off_topic"],
        ]
        moderation = Event.create(bob.secret, 9005, "", tags)
        await accepted(b, moderation)
        assert await ids(a, {"ids": [note.id]}) == set()
        assert await ids(a, {"ids": [moderation.id]}) == {moderation.id}
        gone = Event.create(bob.secret, 9005, "", [["h", ch], ["e", note.id], ["x", "again"]])
        await refused(relay, b, gone, "invalid: target event not found")
        own = await message(c, carol, ch, "my own mistake")
        await accepted(c, Event.create(carol.secret, 9005, "", [["h", ch], ["e", own.id]]))
        assert await ids(a, {"ids": [own.id]}) == set()


# -- 40099 from clients (§9 item 11) ----------------------------------------------------------------
async def test_client_system_messages(relay: RunningRelay, alice: Identity, bob: Identity) -> None:
    agent = Identity.new()
    await _registered(relay, agent, bob)
    async with relay.client(alice) as a, relay.client(agent) as g:
        c = await create_channel(a, alice)
        outcome = json.dumps(
            {"type": "agent_cancel_noop", "actor": bob.pubkey, "target": agent.pubkey, "channel_id": c}
        )
        human = Event.create(alice.secret, 40099, outcome, [["h", c]])
        await refused(relay, a, human, "restricted: system messages are relay-signed")
        other_type = Event.create(agent.secret, 40099, '{"type":"member_joined"}', [["h", c]])
        await refused(relay, g, other_type, "restricted: system messages are relay-signed")
        await refused(
            relay,
            g,
            Event.create(agent.secret, 40099, "not json", [["h", c]]),
            "restricted: system messages are relay-signed",
        )
        await accepted(g, Event.create(agent.secret, 40099, outcome, [["h", c]]))


# -- mentions (agents.md §3.2) ------------------------------------------------------------------------
async def test_at_most_fifty_mentions(relay: RunningRelay, alice: Identity) -> None:
    people = [Identity.new().pubkey for _ in range(51)]
    async with relay.client(alice) as a:
        c = await create_channel(a, alice)
        over = Event.create(alice.secret, 9, "hi all", [["h", c], *[["p", pk] for pk in people]])
        await refused(relay, a, over, "invalid: too many mentions (max 50)")
        await message(a, alice, c, "hi fifty", *[["p", pk] for pk in people[:50]], ["p", people[0]])


# -- pipelined channel events (docs/decisions.md 74) ------------------------------------------------
async def test_pipelined_channel_events_answer_as_if_sent_one_by_one(
    relay: RunningRelay, alice: Identity
) -> None:
    """Messages, replies to them, reactions and edits sent back to back on one connection: each
    dependent event (a reply, reaction or edit naming an event still in flight, a second
    identical reaction) still sees what came before it, as one-by-one sending would."""
    async with relay.client(alice) as a:
        c = await create_channel(a, alice)
        notes = [Event.create(alice.secret, 9, f"note {i}", [["h", c]]) for i in range(12)]
        batch: list[Event] = []
        for i, note in enumerate(notes):
            batch += [
                note,
                _reply(alice, c, note, None, f"reply {i}"),
                Event.create(alice.secret, 7, "👍", [["h", c], ["e", note.id]]),
                Event.create(alice.secret, 40003, f"edited {i}", [["h", c], ["e", note.id]]),
            ]
        again = Event.create(alice.secret, 7, "👍", [["h", c], ["e", notes[0].id], ["x", "same reaction"]])
        results = await asyncio.gather(*(a.publish(e) for e in [*batch, again]))
        answers = [(r.accepted, r.message) for r in results]
        assert answers[:-1] == [(True, "")] * len(batch)
        assert answers[-1] == (False, "duplicate: reaction already exists")
        assert await ids(a, {"kinds": [9, 7, 40003], "#h": [c]}) == {e.id for e in batch}
        for i, note in enumerate(notes):
            assert await relay.relay.store.get_thread(batch[4 * i + 1].id) == (note.id, 1)
            assert await relay.relay.store.has_reaction(alice.pubkey, note.id, "👍")


async def test_pipelined_events_naming_one_committed_target_answer_as_if_sent_one_by_one(
    relay: RunningRelay, alice: Identity
) -> None:
    """Replies, reactions and edits naming the same stored event, back to back: none of them
    waits for another (docs/decisions.md 100), yet each answer is the one-by-one answer — the
    second identical reaction is the duplicate, every reply gets the parent's thread position."""
    async with relay.client(alice) as a:
        c = await create_channel(a, alice)
        note = Event.create(alice.secret, 9, "the note", [["h", c]])
        assert (await a.publish(note)).accepted
        replies = [_reply(alice, c, note, None, f"reply {i}") for i in range(6)]
        reactions = [Event.create(alice.secret, 7, emoji, [["h", c], ["e", note.id]]) for emoji in "👍🎉👀"]
        same = Event.create(alice.secret, 7, "👍", [["h", c], ["e", note.id], ["x", "again"]])
        edits = [Event.create(alice.secret, 40003, f"edit {i}", [["h", c], ["e", note.id]]) for i in range(2)]
        batch = [
            replies[0],
            reactions[0],
            replies[1],
            same,
            edits[0],
            reactions[1],
            *replies[2:],
            reactions[2],
        ]
        batch.append(edits[1])
        results = await asyncio.gather(*(a.publish(e) for e in batch))
        answers = {e.id: (r.accepted, r.message) for e, r in zip(batch, results, strict=True)}
        assert answers.pop(same.id) == (False, "duplicate: reaction already exists")
        assert set(answers.values()) == {(True, "")}
        for reply in replies:
            assert await relay.relay.store.get_thread(reply.id) == (note.id, 1)
        for emoji in "👍🎉👀":
            assert await relay.relay.store.has_reaction(alice.pubkey, note.id, emoji)
