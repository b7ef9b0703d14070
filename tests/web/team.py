"""The browser tests' small workspace: Alice owns #general, with Bob and her agent Rulesbot
(a bot member with its NIP-OA tag), each with a display name."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

from buzz.client import RelayClient
from buzz.core.nip_oa import build_auth_tag
from tests.agent.support import add_member, create_channel, set_profile
from tests.support.relay import Identity, RunningRelay

# A workflow that asks `approver` (format it with their pubkey) to approve each version it is sent.
APPROVAL = """name: Deploy
trigger: {{on: webhook}}
steps:
  - {{id: ok, action: request_approval, from: "{approver}", message: "Ship {{{{trigger.version}}}}?", timeout: 1h}}
"""


@dataclass
class Team:
    a: RelayClient  # Alice's connection
    b: RelayClient  # Bob's
    g: RelayClient  # the agent's
    agent: Identity
    tag: list[str]  # the agent's auth tag, signed by Alice
    general: str  # the channel id


@asynccontextmanager
async def team_with_agent(relay: RunningRelay, alice: Identity, bob: Identity) -> AsyncIterator[Team]:
    agent = Identity.new()
    tag = build_auth_tag(alice.secret, agent.pubkey)
    async with relay.client(alice) as a, relay.client(agent, auth_tags=[tag]) as g, relay.client(bob) as b:
        await set_profile(a, alice, "Alice")
        await set_profile(b, bob, "Bob")
        await set_profile(g, agent, "Rulesbot", list(tag))
        general = await create_channel(a, alice, "general")
        await add_member(a, alice, general, bob.pubkey)
        await add_member(a, alice, general, agent.pubkey, "bot")
        yield Team(a, b, g, agent, list(tag), general)
