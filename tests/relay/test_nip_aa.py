"""NIP-AA admission (relay.md §7.3 item 3, agents.md §1.5): in a closed workspace an agent is
admitted through its owner's attestation, per connection, without being enrolled."""

from __future__ import annotations

from pathlib import Path

import pytest

from buzz.client import RelayError
from buzz.core.event import Event
from buzz.core.nip_oa import build_auth_tag
from tests.support.relay import Identity, relay_on

CLOSED = {"require_relay_membership": True, "allow_nip_oa_auth": True}


async def _enrol(running, who: Identity) -> None:
    await running.relay.store.put_relay_member(who.pubkey, "member")


async def test_agent_of_a_member_is_admitted_without_enrolment(tmp_path: Path, alice: Identity) -> None:
    agent = Identity.new()
    tag = build_auth_tag(alice.secret, agent.pubkey)
    async with relay_on(tmp_path, **CLOSED) as running:
        await _enrol(running, alice)
        async with running.client(agent, auth_tags=[tag]) as c:
            assert (await c.publish(Event.create(agent.secret, 1, "admitted via my owner"))).accepted
        assert not await running.relay.store.is_relay_member(agent.pubkey)  # nothing written
        assert await running.relay.store.get_agent_owner(agent.pubkey) == alice.pubkey


async def test_refusals(tmp_path: Path, alice: Identity, bob: Identity) -> None:
    agent = Identity.new()
    async with relay_on(tmp_path, **CLOSED) as running:
        await _enrol(running, alice)
        cases = {
            "no tag": [],
            "owner not a member": [build_auth_tag(bob.secret, agent.pubkey)],
            "two tags": [build_auth_tag(alice.secret, agent.pubkey)] * 2,
            "tag for another agent": [build_auth_tag(alice.secret, bob.pubkey)],
            "expired": [build_auth_tag(alice.secret, agent.pubkey, "created_at<1000")],
        }
        for name, tags in cases.items():
            with pytest.raises(RelayError) as err:
                async with running.client(agent, auth_tags=tags):
                    pass
            assert err.value.message == "restricted: not a relay member", name


async def test_owner_chain_depth(tmp_path: Path, alice: Identity, bob: Identity) -> None:
    """alice (member) attests bob without conditions on bob's profile; bob attests the agent."""
    agent = Identity.new()
    for depth, admitted in ((1, False), (2, True)):
        data = tmp_path / f"d{depth}"
        async with relay_on(data, **CLOSED, nip_aa_max_depth=depth) as running:
            await _enrol(running, alice)
            # bob's profile (kind 0) carries alice's unconditional attestation; an enrolled member
            # publishes nothing for bob: bob publishes it himself through alice's attestation.
            bob_tag = build_auth_tag(alice.secret, bob.pubkey)
            async with running.client(bob, auth_tags=[bob_tag]) as c:
                r = await c.publish(Event.create(bob.secret, 0, '{"name":"bob"}', [bob_tag]))
                assert r.accepted, r.message
            agent_tag = build_auth_tag(bob.secret, agent.pubkey)
            if admitted:
                async with running.client(agent, auth_tags=[agent_tag]) as c:
                    assert (await c.publish(Event.create(agent.secret, 1, "two hops"))).accepted
            else:
                with pytest.raises(RelayError) as err:
                    async with running.client(agent, auth_tags=[agent_tag]):
                        pass
                assert err.value.message == "restricted: not a relay member"


async def test_nip_aa_off_by_default(tmp_path: Path, alice: Identity) -> None:
    agent = Identity.new()
    async with relay_on(tmp_path, require_relay_membership=True) as running:
        await _enrol(running, alice)
        with pytest.raises(RelayError):
            async with running.client(agent, auth_tags=[build_auth_tag(alice.secret, agent.pubkey)]):
                pass


async def test_bridge_admits_an_agent_through_x_auth_tag(tmp_path: Path, alice: Identity) -> None:
    from buzz.client.http_bridge import BridgeClient

    agent = Identity.new()
    tag = build_auth_tag(alice.secret, agent.pubkey)
    async with relay_on(tmp_path, **CLOSED) as running:
        await _enrol(running, alice)
        async with BridgeClient(running.url, agent.secret, auth_tag=tag) as bridge:
            result = await bridge.publish(Event.create(agent.secret, 1, "over HTTP"))
            assert result.accepted, result.message
