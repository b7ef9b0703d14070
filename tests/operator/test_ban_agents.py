"""Banning an owner ends the open sessions of its agents (issue 24 item 14; relay.md §7.3 item
2.3): the ban gate already refused their next AUTH, but sessions open at the ban kept
publishing, reading and sending huddle audio. The relay's ban watch (a 5 s poll) now closes
every session whose AUTH the ban would refuse: the agent's own NIP-OA owner, and each owner of
the NIP-AA chain that admitted it, as the owner's own sessions are closed. Bystanders keep
theirs. Real relay, real sockets; the ban is written through the store as `buzz admin ban`
writes it."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import orjson

from buzz.client import RelayClient
from buzz.core.event import Event
from buzz.core.nip42 import AUTH_KIND
from buzz.core.nip_oa import build_auth_tag
from tests.huddle.support import (
    BAN_POLL_WAIT_S,
    NOT_RELAY_MEMBER,
    AudioPeer,
    ChannelSpec,
    join,
    make_channel,
    sees_left,
)
from tests.support.deadline import scaled
from tests.support.relay import Identity, RunningRelay, relay_on

BANNED = "blocked: you are banned from this community"
CLOSED = {"require_relay_membership": True, "allow_nip_oa_auth": True, "nip_aa_max_depth": 2}


async def _join_as_agent(
    running: RunningRelay, agent: Identity, tag: list[str], channel_id: str
) -> AudioPeer:
    """An audio seat whose auth event carries the agent's NIP-OA `auth` tag (admitted through it)."""
    peer = await AudioPeer.connect(running, channel_id)
    challenge = await peer.challenge()
    event = Event.create(agent.secret, AUTH_KIND, "", [["relay", running.url], ["challenge", challenge], tag])
    auth = {"type": "auth", "parent_channel_id": None, "event": event.to_dict(), "protocol_version": 2}
    await peer.ws.send_str(orjson.dumps(auth).decode())
    peer.joined = await peer.recv_json()
    assert peer.joined["type"] == "joined", peer.joined
    return peer


async def test_banning_an_owner_closes_its_agents_sessions_and_seats_down_the_chain(tmp_path: Path) -> None:
    alice, bob, agent, sub_agent = Identity.new(), Identity.new(), Identity.new(), Identity.new()
    agent_tag = build_auth_tag(alice.secret, agent.pubkey)
    sub_tag = build_auth_tag(agent.secret, sub_agent.pubkey)  # an agent of the agent: two hops
    async with relay_on(tmp_path, **CLOSED) as running:
        store: Any = running.relay.store
        for member in (alice, bob):
            await store.put_relay_member(member.pubkey, "member")
        cid = await make_channel(running, ChannelSpec(alice, members=[bob], bots=[agent]))
        async with running.client(agent, auth_tags=[agent_tag]) as a:  # the profile that links the chain
            assert (await a.publish(Event.create(agent.secret, 0, '{"name":"agent"}', [agent_tag]))).accepted

        async with (
            running.client(agent, auth_tags=[agent_tag]) as a,
            running.client(sub_agent, auth_tags=[sub_tag]) as s,
            running.client(bob) as b,
        ):
            live = await a.subscribe([{"kinds": [9], "#h": [cid]}])
            await asyncio.wait_for(live.eose.wait(), scaled(5))
            pb = await _join_as_agent(running, agent, agent_tag, cid)
            pbob = await join(running, bob, cid)
            agent_index = pb.joined["peer_index"]  # type: ignore[index]

            await store.ban(alice.pubkey, "spam")  # neither agent is banned itself

            for client in (a, s):
                await asyncio.wait_for(client.wait_closed(), BAN_POLL_WAIT_S)
                assert BANNED in client.notices
            texts = await pb.expect_close(BAN_POLL_WAIT_S)
            assert texts[-1] == NOT_RELAY_MEMBER and pb.close_frame == (1008, "blocked"), texts
            await sees_left([pbob], agent.pubkey, agent_index)
            assert not b.closed and await b.count([{"kinds": [9], "#h": [cid]}]) == 0  # bob keeps his
            assert not pbob.ws.closed
            for peer in (pb, pbob):
                await peer.close()

        # the next AUTH of either is refused too (as before)
        for who, tag in ((agent, agent_tag), (sub_agent, sub_tag)):
            try:
                async with RelayClient(running.url, who.secret, auth_tags=[tag]):
                    raise AssertionError("an agent of a banned owner was admitted")
            except Exception as exc:  # RelayError with the relay's refusal
                assert BANNED in str(exc) or "not a relay member" in str(exc), exc


async def test_an_agent_of_a_banned_owner_in_an_open_workspace_is_closed_too(tmp_path: Path) -> None:
    """Open workspace, no NIP-AA: the agent's AUTH names its owner in its `auth` tag."""
    alice, agent = Identity.new(), Identity.new()
    tag = build_auth_tag(alice.secret, agent.pubkey)
    async with relay_on(tmp_path) as running:
        async with running.client(agent, auth_tags=[tag]) as a, running.client(agent) as bare:
            await running.relay.store.ban(alice.pubkey, "")  # type: ignore[attr-defined]
            await asyncio.wait_for(a.wait_closed(), BAN_POLL_WAIT_S)
            assert BANNED in a.notices
            # the same key without the tag is just a key: not an agent of alice there
            assert not bare.closed and await bare.count([{"kinds": [1]}]) == 0
