"""Registered owner (relay.md §7.3 item 4): a verified NIP-OA `auth` tag on a successful AUTH
records agent → owner, first write wins; an invalid tag never fails the AUTH. Over real
WebSocket on both backends; the mapping is observed through its effect (an owner's kind 5
deleting the agent's note, §10.1 item 2) and through the store itself."""

from __future__ import annotations

import time

from buzz.core.event import Event
from buzz.core.nip_oa import build_auth_tag
from tests.support.relay import Identity, RunningRelay


async def _auth_with(relay: RunningRelay, agent: Identity, *tags: list[str]) -> None:
    """AUTH as `agent` with `tags` added to the AUTH event; the AUTH must succeed."""
    async with relay.client(agent, auth_tags=tags) as c:
        assert c.pubkey == agent.pubkey


async def _owner_can_delete(relay: RunningRelay, agent: Identity, owner: Identity) -> bool:
    """The agent publishes a note; the owner tries to delete it (kind 5 `e`)."""
    async with relay.client(agent) as a:
        note = Event.create(agent.secret, 1, "agent note")
        assert (await a.publish(note)).accepted
    async with relay.client(owner) as o:
        deletion = Event.create(owner.secret, 5, "", [["e", note.id]])
        result = await o.publish(deletion)
        if not result.accepted:
            assert result.message == "invalid: must be event author"
        return result.accepted


async def test_valid_tag_registers_the_owner(relay: RunningRelay, alice: Identity, bob: Identity) -> None:
    agent, owner = alice, bob
    assert await relay.relay.store.get_agent_owner(agent.pubkey) is None
    assert not await _owner_can_delete(relay, agent, owner)
    await _auth_with(relay, agent, build_auth_tag(owner.secret, agent.pubkey))
    assert await relay.relay.store.get_agent_owner(agent.pubkey) == owner.pubkey
    assert await _owner_can_delete(relay, agent, owner)


async def test_first_write_wins(relay: RunningRelay, alice: Identity, bob: Identity, carol: Identity) -> None:
    agent = alice
    await _auth_with(relay, agent, build_auth_tag(bob.secret, agent.pubkey))
    await _auth_with(relay, agent, build_auth_tag(carol.secret, agent.pubkey))
    assert await relay.relay.store.get_agent_owner(agent.pubkey) == bob.pubkey
    assert not await _owner_can_delete(relay, agent, carol)
    assert await _owner_can_delete(relay, agent, bob)


async def test_invalid_tags_do_not_fail_auth_and_record_nothing(
    relay: RunningRelay, alice: Identity, bob: Identity, carol: Identity
) -> None:
    agent = alice
    good = build_auth_tag(bob.secret, agent.pubkey)
    forged = [*good[:3], "0" * 128]
    for_other_agent = build_auth_tag(bob.secret, carol.pubkey)
    expired = build_auth_tag(bob.secret, agent.pubkey, f"created_at<{int(time.time()) - 30}")
    not_yet = build_auth_tag(bob.secret, agent.pubkey, f"created_at>{int(time.time()) + 30}")
    three_elements = good[:3]
    uppercase_owner = [good[0], good[1].upper(), good[2], good[3]]
    for tags in ([forged], [for_other_agent], [expired], [not_yet], [three_elements], [uppercase_owner]):
        await _auth_with(relay, agent, *tags)
    await _auth_with(relay, agent, good, build_auth_tag(carol.secret, agent.pubkey))  # two tags: none valid
    await _auth_with(relay, agent, good, good)
    assert await relay.relay.store.get_agent_owner(agent.pubkey) is None
    assert not await _owner_can_delete(relay, agent, bob)


async def test_self_attestation_records_nothing(relay: RunningRelay, alice: Identity) -> None:
    from buzz.core.keys import sign
    from buzz.core.nip_oa import auth_message

    tag = ["auth", alice.pubkey, "", sign(alice.secret, auth_message(alice.pubkey, ""))]
    await _auth_with(relay, alice, tag)
    assert await relay.relay.store.get_agent_owner(alice.pubkey) is None


async def test_time_clauses_use_the_auth_event_and_kind_is_not_evaluated(
    relay: RunningRelay, alice: Identity, bob: Identity, carol: Identity
) -> None:
    now = int(time.time())
    conditions = f"kind=1&created_at>{now - 30}&created_at<{now + 30}"
    await _auth_with(relay, alice, build_auth_tag(bob.secret, alice.pubkey, conditions))
    assert await relay.relay.store.get_agent_owner(alice.pubkey) == bob.pubkey
    await _auth_with(relay, carol, build_auth_tag(bob.secret, carol.pubkey, "kind=7"))
    assert await relay.relay.store.get_agent_owner(carol.pubkey) == bob.pubkey
