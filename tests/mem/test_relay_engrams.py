"""Kind 30174 on the relay (relay.md §5.3–§5.4, §9 item 5, §11; engram.md §11): the envelope
check, replacement, the read gate and the per-event gate, search exclusion. Real relay, real
WebSocket, both backends."""

from __future__ import annotations

import base64
import re
import time
from typing import Any

import pytest

from buzz.client import RelayClient, RelayError
from buzz.core import engram
from buzz.core.event import Event
from tests.bridge.helpers import post
from tests.support.relay import Identity, RunningRelay

GATE = "restricted: agent-engram reads require authors=[self] or #p=[self]"


def _now() -> int:
    return int(time.time())


def _memory(
    agent: Identity, owner: Identity, slug: str, value: str | None, created_at: int | None = None
) -> Event:
    body = engram.MemoryBody(slug, value)
    return engram.build_event(agent.secret, owner.pubkey, body, created_at or _now())


def _raw(agent: Identity, tags: list[list[str]], content: str) -> Event:
    return Event.create(agent.secret, engram.KIND_ENGRAM, content, tags, _now())


async def _mine(c: RelayClient, agent: Identity) -> list[Event]:
    return await c.query([{"kinds": [30174], "authors": [agent.pubkey]}])


async def _refused(c: RelayClient, flt: dict[str, Any]) -> str:
    with pytest.raises(RelayError) as err:
        await c.query([flt])
    return err.value.message


async def _count_refused(c: RelayClient, flt: dict[str, Any]) -> str:
    with pytest.raises(RelayError) as err:
        await c.count([flt])
    return err.value.message


# -- §18 item 11: replacement ---------------------------------------------------------------------
async def test_same_d_replaces_and_different_d_coexist(
    relay: RunningRelay, alice: Identity, bob: Identity
) -> None:
    t = _now()
    v1 = _memory(alice, bob, "mem/a", "one", t - 10)
    v2 = _memory(alice, bob, "mem/a", "two", t - 5)
    other = _memory(alice, bob, "mem/b", "bee", t - 10)
    async with relay.client(alice) as c:
        for e in (v1, v2, other):
            r = await c.publish(e)
            assert (r.accepted, r.message) == (True, "")
        assert {e.id for e in await _mine(c, alice)} == {v2.id, other.id}
        # A dominated version and a repeated id are answered duplicate: and change nothing; the
        # dominated one is never served, so it is `OK false` (issue 25 item 4).
        older = _memory(alice, bob, "mem/a", "zero", t - 20)
        r = await c.publish(older)
        assert (r.accepted, r.message) == (False, "duplicate: have a newer version")
        r = await c.publish(v2)
        assert (r.accepted, r.message) == (True, "duplicate:")
        assert {e.id for e in await _mine(c, alice)} == {v2.id, other.id}


async def test_equal_created_at_lower_id_wins(relay: RunningRelay, alice: Identity, bob: Identity) -> None:
    t = _now()
    a, b = _memory(alice, bob, "mem/tie", "x", t), _memory(alice, bob, "mem/tie", "y", t)
    low, high = sorted((a, b), key=lambda e: e.id)
    async with relay.client(alice) as c:
        assert (await c.publish(high)).message == ""
        assert (await c.publish(low)).message == ""
        assert (await c.publish(high)).message.startswith("duplicate:")
        assert [e.id for e in await _mine(c, alice)] == [low.id]


# -- §9 item 5: the envelope ----------------------------------------------------------------------
GOOD_D = "ab" * 32


def _content(first_byte: int = 2, n: int = 99) -> str:
    return base64.b64encode(bytes([first_byte]) + b"\x00" * (n - 1)).decode()


ENVELOPE_CASES = {
    "no-d": ([["p", "cd" * 32]], _content(), "requires exactly one d tag (got 0)"),
    "two-d": (
        [["d", GOOD_D], ["d", "ef" * 32], ["p", "cd" * 32]],
        _content(),
        "requires exactly one d tag (got 2)",
    ),
    "no-p": ([["d", GOOD_D]], _content(), "requires exactly one p tag (got 0)"),
    "two-p": (
        [["d", GOOD_D], ["p", "cd" * 32], ["p", "ef" * 32]],
        _content(),
        "requires exactly one p tag (got 2)",
    ),
    "uppercase-d": ([["d", GOOD_D.upper()], ["p", "cd" * 32]], _content(), "d tag must be 64 lowercase hex"),
    "uppercase-p": (
        [["d", GOOD_D], ["p", ("cd" * 32).upper()]],
        _content(),
        "p tag must be 64 lowercase hex",
    ),
    "non-hex-d": ([["d", "mem/notes"], ["p", "cd" * 32]], _content(), "d tag must be 64 lowercase hex"),
    "short-p": ([["d", GOOD_D], ["p", "cd" * 31]], _content(), "p tag must be 64 lowercase hex"),
    "empty-content": ([["d", GOOD_D], ["p", "cd" * 32]], "", "content is not a NIP-44 v2 payload"),
    "not-base64": (
        [["d", GOOD_D], ["p", "cd" * 32]],
        "not base64 at all!" * 10,
        "content is not a NIP-44 v2 payload",
    ),
    "bad-padding": (
        [["d", GOOD_D], ["p", "cd" * 32]],
        _content()[:-4] + "A=A=",
        "content is not a NIP-44 v2 payload",
    ),
    "too-short": ([["d", GOOD_D], ["p", "cd" * 32]], _content(n=98), "content is not a NIP-44 v2 payload"),
    "wrong-version": (
        [["d", GOOD_D], ["p", "cd" * 32]],
        _content(first_byte=1),
        "content is not a NIP-44 v2 payload",
    ),
}


@pytest.mark.parametrize("case", list(ENVELOPE_CASES), ids=list(ENVELOPE_CASES))
async def test_envelope_refusals(relay: RunningRelay, alice: Identity, case: str) -> None:
    tags, content, reason = ENVELOPE_CASES[case]
    async with relay.client(alice) as c:
        r = await c.publish(_raw(alice, tags, content))
        assert not r.accepted
        assert r.message.startswith("invalid: agent-engram ") and reason in r.message
        assert await _mine(c, alice) == []  # store unchanged
        ok = await c.publish(_raw(alice, [["d", GOOD_D], ["p", "cd" * 32]], _content()))
        assert (ok.accepted, ok.message) == (True, "")  # the connection survives


async def test_envelope_counts_only_tags_with_two_elements(relay: RunningRelay, alice: Identity) -> None:
    tags = [["d"], ["d", GOOD_D], ["p"], ["p", "cd" * 32], ["alt", "encrypted agent memory record"]]
    async with relay.client(alice) as c:
        r = await c.publish(_raw(alice, tags, _content()))
        assert (r.accepted, r.message) == (True, "")


async def test_p_may_equal_the_author_and_h_is_ignored(relay: RunningRelay, alice: Identity) -> None:
    channel = "0b7e2b52-3f0e-4e7e-9a3c-1a2b3c4d5e6f"
    event = _raw(alice, [["d", GOOD_D], ["p", alice.pubkey], ["h", channel]], _content())
    async with relay.client(alice) as c:
        assert (await c.publish(event)).message == ""
    stored = await relay.relay.store.get(event.id)
    assert stored is not None and stored.channel_id is None  # 30174 is global-only


async def test_foreign_author_is_refused(relay: RunningRelay, alice: Identity, bob: Identity) -> None:
    forged = _memory(bob, alice, "mem/x", "written by someone else")
    async with relay.client(alice) as c:
        r = await c.publish(forged)
        assert (r.accepted, r.message) == (
            False,
            "invalid: event pubkey does not match authenticated identity",
        )
    assert await relay.relay.store.get(forged.id) is None


# -- §18 items 60, 61 and engram.md §15.3 items 15–16: the read gates -----------------------------
async def test_read_gate(relay: RunningRelay, alice: Identity, bob: Identity, carol: Identity) -> None:
    agent, owner, third = alice, bob, carol
    event = _memory(agent, owner, "mem/secret", "hidden")
    async with relay.client(agent) as a:
        assert (await a.publish(event)).accepted
    async with relay.client(third) as c:
        other = agent.pubkey
        assert await _refused(c, {"kinds": [30174]}) == GATE
        # Issue 25 item 3 (decision 171): a filter that can match an ungated kind is served, the
        # engram dropped for this reader.
        assert await c.query([{"kinds": [1, 30174], "authors": [other]}]) == []
        assert await _refused(c, {"kinds": [30174], "authors": [third.pubkey, other]}) == GATE
        assert await _refused(c, {"kinds": [30174], "#p": [owner.pubkey]}) == GATE
        assert await _refused(c, {"kinds": [30174], "search": "x"}) == GATE
        assert await _refused(c, {"ids": [event.id], "kinds": [30174]}) == GATE
        assert event.id not in {e.id for e in await c.query([{}])}  # served, without the engram
        assert await c.query([{"authors": [other], "#p": [third.pubkey]}]) == []  # #p=[self] passes
        assert await _count_refused(c, {"kinds": [30174]}) == GATE
        assert await _count_refused(c, {"kinds": [30174], "authors": [other]}) == GATE
        # Passing filters see nothing of another pair; a plain ids lookup returns nothing.
        assert await c.query([{"kinds": [30174], "authors": [third.pubkey]}]) == []
        assert await c.query([{"kinds": [30174], "#p": [third.pubkey]}]) == []
        assert await c.query([{"ids": [event.id]}]) == []
        assert await c.query([{"ids": [event.id[:8]]}]) == []
        assert await c.count([{"ids": [event.id]}]) == 0
        # A refused filter next to a passing one closes the whole request.
        with pytest.raises(RelayError) as err:
            await c.query([{"kinds": [30174], "authors": [third.pubkey]}, {"kinds": [30174]}])
        assert err.value.message == GATE
    async with relay.client(agent) as a:
        assert [e.id for e in await a.query([{"kinds": [30174], "authors": [agent.pubkey]}])] == [event.id]
        assert [e.id for e in await a.query([{"ids": [event.id]}])] == [event.id]
        assert await a.count([{"kinds": [30174], "authors": [agent.pubkey]}]) == 1
    async with relay.client(owner) as o:
        assert [e.id for e in await o.query([{"kinds": [30174], "#p": [owner.pubkey]}])] == [event.id]
        assert [e.id for e in await o.query([{"ids": [event.id]}])] == [event.id]
        assert await o.count([{"kinds": [30174], "#p": [owner.pubkey]}]) == 1


async def test_superseded_versions_are_served_on_the_history_path_only(
    relay: RunningRelay, alice: Identity, bob: Identity, carol: Identity
) -> None:
    # relay.md §10.4: a superseded version is on none of the listed paths (REQ, ids, COUNT),
    # for the author and the owner no more than for anyone else; only the gated `POST /history`
    # (docs/decisions.md 81) serves it, to the pair only.
    agent, owner, third = alice, bob, carol
    t = _now()
    old = _memory(agent, owner, "mem/a", "one", t - 10)
    head = _memory(agent, owner, "mem/a", "two", t - 5)
    async with relay.client(agent) as a:
        for e in (old, head):
            assert (await a.publish(e)).accepted
    for who in (agent, owner):
        async with relay.client(who) as c:
            assert await c.query([{"ids": [old.id]}]) == []
            assert await c.count([{"ids": [old.id]}]) == 0
            mine = [{"kinds": [30174], "authors": [agent.pubkey], "#p": [owner.pubkey]}]
            assert [e.id for e in await c.query(mine)] == [head.id]
    async with relay.client(third) as c:
        assert await c.query([{"ids": [old.id]}]) == []
        assert await c.query([{"ids": [head.id]}]) == []
    ask = {"kind": 30174, "pubkey": agent.pubkey, "d": head.d_tag}
    for who in (agent, owner):
        status, answer = await post(relay, "/history", ask, who)
        assert (status, [e["id"] for e in answer["events"]]) == (200, [head.id, old.id])
    assert await post(relay, "/history", ask, third) == (200, {"events": [], "next": None})


async def test_unauthenticated_reader_gets_auth_required(relay: RunningRelay) -> None:
    async with relay.client() as c:
        with pytest.raises(RelayError) as err:
            await c.query([{"kinds": [30174], "authors": ["ab" * 32]}])
        assert err.value.message == "auth-required: not authenticated"


async def test_live_delivery_reaches_author_and_owner_only(
    relay: RunningRelay, alice: Identity, bob: Identity, carol: Identity
) -> None:
    agent, owner, third = alice, bob, carol
    async with relay.client(owner) as o, relay.client(third) as t, relay.client(agent) as a:
        owner_sub = await o.subscribe([{"kinds": [30174], "#p": [owner.pubkey]}])
        third_sub = await t.subscribe([{"kinds": [30174], "authors": [third.pubkey]}, {"kinds": [1]}])
        await owner_sub.eose.wait()
        await third_sub.eose.wait()
        event = _memory(agent, owner, "mem/live", "now")
        assert (await a.publish(event)).accepted
        note = Event.create(agent.secret, 1, "marker")
        assert (await a.publish(note)).accepted
        assert (await owner_sub.next()).id == event.id
        assert (await third_sub.next()).id == note.id  # the engram never arrived before the marker


async def test_engrams_are_never_searched(relay: RunningRelay, alice: Identity, bob: Identity) -> None:
    event = _memory(alice, bob, "mem/search", "x")
    token = max(re.findall(r"[A-Za-z0-9]+", event.content), key=len)
    note = Event.create(alice.secret, 1, f"plain {token} text")
    async with relay.client(alice) as c:
        assert (await c.publish(event)).accepted
        assert (await c.publish(note)).accepted
        hits = await c.query([{"kinds": [1, 30174], "authors": [alice.pubkey], "search": token}])
        assert [e.id for e in hits] == [note.id]
        assert await c.query([{"kinds": [30174], "authors": [alice.pubkey], "search": token}]) == []


async def test_http_bridge_applies_the_engram_gate(
    relay: RunningRelay, alice: Identity, bob: Identity, carol: Identity
) -> None:
    from buzz.client.http_bridge import BridgeClient, BridgeError

    event = _memory(alice, bob, "mem/bridge", "hidden")
    async with relay.client(alice) as c:
        assert (await c.publish(event)).accepted
    async with BridgeClient(relay.url, carol.secret) as third:
        for call in (third.query, third.count):
            with pytest.raises(BridgeError) as err:
                await call([{"kinds": [30174], "authors": [alice.pubkey]}])
            assert (err.value.status, err.value.relay_message) == (403, GATE)
        assert await third.query([{"ids": [event.id]}]) == []
    async with BridgeClient(relay.url, bob.secret) as owner:
        assert [e.id for e in await owner.query([{"kinds": [30174], "#p": [bob.pubkey]}])] == [event.id]
