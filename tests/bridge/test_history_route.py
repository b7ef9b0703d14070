"""`POST /history` over real HTTP on both backends (issue 16 item 3, docs/decisions.md 81): the
request shape and its refusals, paging, and deletions that a history never undoes. Who may read
is the gate matrix's (tests/workspace/test_gates_matrix.py)."""

from __future__ import annotations

import time
from typing import Any

from buzz.core import engram
from buzz.core.event import Event
from tests.bridge.helpers import post, publish
from tests.support.relay import Identity, RunningRelay

KIND = engram.KIND_ENGRAM


async def _versions(relay: RunningRelay, agent: Identity, owner: Identity, n: int) -> list[Event]:
    """`n` versions of mem/notes/a, oldest first, each accepted (and superseding the last)."""
    now = int(time.time())
    out = []
    for i in range(n):
        body = engram.MemoryBody("mem/notes/a", f"value {i}")
        event = engram.build_event(agent.secret, owner.pubkey, body, now - n + i)
        status, answer = await publish(relay, agent, event)
        assert (status, answer["accepted"], answer["message"]) == (200, True, ""), answer
        out.append(event)
    return out


def _ids(answer: Any) -> list[str]:
    return [e["id"] for e in answer["events"]]


async def test_pages_newest_first(relay: RunningRelay, alice: Identity, bob: Identity) -> None:
    versions = await _versions(relay, alice, bob, 3)
    newest_first = [e.id for e in reversed(versions)]
    ask = {"kind": KIND, "pubkey": alice.pubkey, "d": versions[0].d_tag}
    status, answer = await post(relay, "/history", ask, alice)
    assert (status, _ids(answer), answer["next"]) == (200, newest_first, None)
    assert answer["events"] == [e.to_dict() for e in reversed(versions)]
    status, first = await post(relay, "/history", {**ask, "limit": 2}, bob)
    assert (status, _ids(first)) == (200, newest_first[:2])
    assert first["next"] == [versions[1].created_at, versions[1].id]
    status, rest = await post(relay, "/history", {**ask, "limit": 2, "before": first["next"]}, bob)
    assert (status, _ids(rest), rest["next"]) == (200, newest_first[2:], None)
    # a limit above the maximum is clamped, as a filter's is
    status, answer = await post(relay, "/history", {**ask, "limit": 10**9}, alice)
    assert (status, _ids(answer)) == (200, newest_first)


async def test_deleted_versions_never_come_back(relay: RunningRelay, alice: Identity, bob: Identity) -> None:
    versions = await _versions(relay, alice, bob, 3)
    d = versions[0].d_tag
    ask = {"kind": KIND, "pubkey": alice.pubkey, "d": d}
    # kind 5 `e` on a superseded version (relay.md §10.1 item 2: soft-deleted targets count)
    deletion = Event.create(alice.secret, 5, "", [["e", versions[1].id]])
    assert (await publish(relay, alice, deletion))[1]["accepted"]
    status, answer = await post(relay, "/history", ask, alice)
    assert (status, _ids(answer)) == (200, [versions[2].id, versions[0].id])
    # kind 5 `a` on the address: every version it covers goes
    erase = Event.create(alice.secret, 5, "", [["a", f"{KIND}:{alice.pubkey}:{d}"]])
    assert (await publish(relay, alice, erase))[1]["accepted"]
    status, answer = await post(relay, "/history", ask, alice)
    assert (status, answer) == (200, {"events": [], "next": None})


async def test_refusals(relay: RunningRelay, alice: Identity) -> None:
    good = {"kind": KIND, "pubkey": alice.pubkey, "d": "x"}
    cases: list[tuple[Any, int, str]] = [
        ([good], 400, "invalid: history body must be an object with kind, pubkey and d"),
        ({**good, "authors": [alice.pubkey]}, 400, "invalid: unknown history field 'authors'"),
        ({**good, "kind": "30174"}, 400, "invalid: history kind must be an integer 0..65535"),
        ({**good, "kind": True}, 400, "invalid: history kind must be an integer 0..65535"),
        (
            {**good, "pubkey": alice.pubkey.upper()},
            400,
            "invalid: history pubkey must be 64 lowercase hex characters",
        ),
        ({"kind": KIND, "pubkey": alice.pubkey}, 400, "invalid: history d must be a string"),
        ({**good, "d": "é" * 513}, 400, "invalid: history d too long (max 1024 bytes)"),
        ({**good, "limit": 0}, 400, "invalid: history limit must be a positive integer"),
        ({**good, "before": [1, "zz"]}, 400, "invalid: history before must be [created_at, event id]"),
        ({**good, "kind": 1}, 403, "restricted: history is served for kind 30174 only"),
        ({**good, "kind": 30175}, 403, "restricted: history is served for kind 30174 only"),
    ]
    for body, status, message in cases:
        assert await post(relay, "/history", body, alice) == (status, {"error": message}), body
    status, answer = await post(relay, "/history", None, alice, raw=b"{not json")
    assert (status, answer) == (
        400,
        {"error": "invalid: history body must be an object with kind, pubkey and d"},
    )
    status, answer = await post(relay, "/history", good, None)
    assert (status, answer) == (401, {"error": "NIP-98: missing Authorization header"})
    # the relay still answers normally afterwards
    assert await post(relay, "/history", good, alice) == (200, {"events": [], "next": None})
