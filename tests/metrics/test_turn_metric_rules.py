"""Kind 44200 turn metrics on the relay (relay.md §9 item 8, §5.3–§5.4, §11; agents.md §5.1
items 5–6; relay.md §18 items 57, 66, 67, 70). Real relay over WebSocket, both backends; the
agent is registered through AUTH with its NIP-OA tag, as the harness does."""

from __future__ import annotations

import time
from typing import Any

import orjson
import pytest

from buzz.client import RelayClient, RelayError
from buzz.core import nip44
from buzz.core.event import Event
from buzz.core.nip_oa import build_auth_tag
from buzz.relay.ingestion.rules.metrics import SlidingWindow
from tests.support.relay import Identity, RunningRelay

KIND = 44200
P_GATE = "restricted: p-gated events require #p matching your pubkey"
NOT_OWNER = "restricted: agent-turn-metric p tag must be the registered owner of this agent"


def _payload(n: int = 1) -> str:
    return orjson.dumps(
        {"harness": "buzz-agent-harness", "timestamp": "2025-01-01T00:00:00Z", "turnSeq": n}
    ).decode()


def _metric(
    agent: Identity,
    owner_pubkey: str,
    *,
    tags: list[list[str]] | None = None,
    content: str | None = None,
    plaintext: str | None = None,
) -> Event:
    if content is None:
        key = nip44.get_conversation_key(agent.secret, owner_pubkey)
        content = nip44.encrypt(plaintext or _payload(), key)
    if tags is None:
        tags = [["p", owner_pubkey], ["agent", agent.pubkey]]
    return Event.create(agent.secret, KIND, content, tags, int(time.time()))


def _agent_client(relay: RunningRelay, agent: Identity, owner: Identity) -> RelayClient:
    """The agent, authenticated with its owner's NIP-OA tag (registers agent → owner)."""
    return relay.client(agent, auth_tags=[build_auth_tag(owner.secret, agent.pubkey)])


async def _publish_ok(c: RelayClient, event: Event) -> None:
    result = await c.publish(event)
    assert (result.accepted, result.message) == (True, "")


async def _refused(c: RelayClient, flt: dict[str, Any]) -> str:
    with pytest.raises(RelayError) as err:
        await c.query([flt])
    return err.value.message


# -- agents.md §5.1: owner decrypts; §18 item 66 ---------------------------------------------
async def test_owner_reads_and_decrypts_agent_cannot_read_its_own(
    relay: RunningRelay, alice: Identity, bob: Identity
) -> None:
    agent, owner = alice, bob
    metric = _metric(agent, owner.pubkey)
    async with _agent_client(relay, agent, owner) as a:
        await _publish_ok(a, metric)
        # §18 item 66: the author is not exempt from the p-gate.
        assert await a.query([{"kinds": [KIND], "#p": [agent.pubkey]}]) == []
        assert await a.query([{"ids": [metric.id]}]) == []
        assert await _refused(a, {"kinds": [KIND], "authors": [agent.pubkey]}) == P_GATE
        assert await _refused(a, {"ids": [metric.id], "kinds": [KIND]}) == P_GATE
        assert await a.count([{"ids": [metric.id]}]) == 0
    async with relay.client(owner) as o:
        got = await o.query([{"kinds": [KIND], "#p": [owner.pubkey], "since": metric.created_at - 1}])
        assert [e.id for e in got] == [metric.id]
        assert got[0].tags == (("p", owner.pubkey), ("agent", agent.pubkey))
        assert got[0].first_tag("h") is None
        key = nip44.get_conversation_key(owner.secret, agent.pubkey)
        payload = orjson.loads(nip44.decrypt(got[0].content, key))
        assert payload["harness"] == "buzz-agent-harness" and payload["timestamp"]
        assert await o.count([{"kinds": [KIND], "#p": [owner.pubkey]}]) == 1
        # The owner may name the id too, as long as #p narrows to itself.
        assert [
            e.id for e in await o.query([{"ids": [metric.id], "kinds": [KIND], "#p": [owner.pubkey]}])
        ] == [metric.id]
    stored = await relay.relay.store.get(metric.id)
    assert stored is not None and stored.channel_id is None


# -- §18 item 57 and the per-event gate for a third key -----------------------------------------
async def test_third_key_cannot_read_by_filter_or_id(
    relay: RunningRelay, alice: Identity, bob: Identity, carol: Identity
) -> None:
    agent, owner, stranger = alice, bob, carol
    metric = _metric(agent, owner.pubkey)
    async with _agent_client(relay, agent, owner) as a:
        await _publish_ok(a, metric)
    async with relay.client(stranger) as s:
        assert await _refused(s, {"ids": [metric.id], "kinds": [KIND]}) == P_GATE  # §18 item 57
        assert await _refused(s, {"kinds": [KIND]}) == P_GATE
        assert await _refused(s, {"kinds": [KIND], "#p": [owner.pubkey]}) == P_GATE
        assert await s.query([{"ids": [metric.id]}]) == []
        assert await s.query([{"kinds": [KIND], "#p": [stranger.pubkey]}]) == []
        assert await s.count([{"ids": [metric.id]}]) == 0
        with pytest.raises(RelayError) as err:
            await s.count([{"ids": [metric.id], "kinds": [KIND]}])
        assert err.value.message == P_GATE


# -- §18 item 67: p must be the registered owner ------------------------------------------------
async def test_p_not_registered_owner_is_restricted(
    relay: RunningRelay, alice: Identity, bob: Identity, carol: Identity
) -> None:
    agent, owner, other = alice, bob, carol
    async with relay.client(agent) as unregistered:  # no owner recorded yet
        result = await unregistered.publish(_metric(agent, owner.pubkey))
        assert (result.accepted, result.message) == (False, NOT_OWNER)
    async with _agent_client(relay, agent, owner) as a:
        result = await a.publish(_metric(agent, other.pubkey))
        assert (result.accepted, result.message) == (False, NOT_OWNER)
        await _publish_ok(a, _metric(agent, owner.pubkey))
    # Another key claiming to be the agent's owner's agent has no mapping of its own.
    async with relay.client(other) as c:
        result = await c.publish(_metric(other, owner.pubkey))
        assert (result.accepted, result.message) == (False, NOT_OWNER)


# -- relay.md §9 item 8: the envelope ------------------------------------------------------------
async def test_envelope_refusals(
    relay: RunningRelay, alice: Identity, bob: Identity, carol: Identity
) -> None:
    agent, owner = alice, bob
    o, a = owner.pubkey, agent.pubkey
    good = _metric(agent, o).content
    cases: list[tuple[list[list[str]], str, str]] = [
        (
            [["p", o], ["agent", a], ["h", "7f8c2a1e-2c1d-4d0e-9c4b-0a1b2c3d4e5f"]],
            good,
            "invalid: agent-turn-metric must not carry an h tag",
        ),
        ([["agent", a]], good, "invalid: agent-turn-metric requires exactly one p tag (got 0)"),
        (
            [["p", o], ["p", o], ["agent", a]],
            good,
            "invalid: agent-turn-metric requires exactly one p tag (got 2)",
        ),
        ([["p", o]], good, "invalid: agent-turn-metric requires exactly one agent tag (got 0)"),
        (
            [["p", o], ["agent", a], ["agent", a]],
            good,
            "invalid: agent-turn-metric requires exactly one agent tag (got 2)",
        ),
        (
            [["p", o.upper()], ["agent", a]],
            good,
            "invalid: agent-turn-metric p tag must be 64 lowercase hex characters",
        ),
        (
            [["p", o], ["agent", a[:63]]],
            good,
            "invalid: agent-turn-metric agent tag must be 64 lowercase hex characters",
        ),
        (
            [["p", o], ["agent", carol.pubkey]],
            good,
            "invalid: agent-turn-metric agent tag must equal the event pubkey",
        ),
        (
            [["p", o], ["agent", a]],
            '{"harness":"x"}',
            "invalid: agent-turn-metric content is not a NIP-44 v2 payload: content is not standard base64",
        ),
        (
            [["p", o], ["agent", a]],
            "",
            "invalid: agent-turn-metric content is not a NIP-44 v2 payload: content is empty",
        ),
    ]
    async with _agent_client(relay, agent, owner) as c:
        for tags, content, message in cases:
            result = await c.publish(_metric(agent, o, tags=tags, content=content))
            assert (result.accepted, result.message) == (False, message), tags
        await _publish_ok(c, _metric(agent, o))


# -- §18 item 70: never indexed for search ---------------------------------------------------------
async def test_metric_is_never_a_search_hit(relay: RunningRelay, alice: Identity, bob: Identity) -> None:
    agent, owner = alice, bob
    metric = _metric(agent, owner.pubkey)
    async with _agent_client(relay, agent, owner) as a:
        await _publish_ok(a, metric)
    async with relay.client(owner) as o:
        # The only text a 44200 carries is its ciphertext: searching for it verbatim finds nothing.
        assert await o.query([{"kinds": [KIND], "#p": [owner.pubkey], "search": metric.content}]) == []
        assert await o.query([{"kinds": [KIND], "#p": [owner.pubkey]}]) != []


# -- relay.md §9 item 8: 60 per minute per agent ----------------------------------------------------
async def test_rate_limit_60_per_minute_per_agent(
    sqlite_relay: RunningRelay, alice: Identity, bob: Identity, carol: Identity
) -> None:
    owner = bob
    async with _agent_client(sqlite_relay, alice, owner) as a, _agent_client(sqlite_relay, carol, owner) as c:
        for n in range(60):
            await _publish_ok(a, _metric(alice, owner.pubkey, plaintext=_payload(n)))
        result = await a.publish(_metric(alice, owner.pubkey, plaintext=_payload(60)))
        assert (result.accepted, result.message) == (
            False,
            "rate-limited: agent-turn-metric rate exceeded (60/min per agent)",
        )
        await _publish_ok(c, _metric(carol, owner.pubkey))  # another agent has its own window
    async with sqlite_relay.client(owner) as o:
        assert await o.count([{"kinds": [KIND], "#p": [owner.pubkey], "authors": [alice.pubkey]}]) == 60


def test_sliding_window_frees_slots_as_hits_age() -> None:
    now = [0.0]
    window = SlidingWindow(2, 60.0, clock=lambda: now[0])
    assert window.allow("a")
    now[0] = 30.0
    assert window.allow("a")
    assert not window.allow("a")  # a refusal records nothing
    assert window.allow("b")
    now[0] = 59.9
    assert not window.allow("a")
    now[0] = 60.0  # the hit at 0 has left the window; the one at 30 has not
    assert window.allow("a")
    assert not window.allow("a")
    now[0] = 90.0
    assert window.allow("a")
