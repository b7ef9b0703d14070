"""The HTTP bridge over real HTTP on both backends (relay.md §15; §18 items 91–93, 96)."""

from __future__ import annotations

import time
import uuid
from pathlib import Path

import aiohttp
import pytest

from buzz.core.event import Event
from buzz.core.nip98 import build_auth_header
from buzz.relay.http.bridge import EVENT_STATUS, READ_STATUS, event_status, read_status
from tests.bridge.helpers import post, publish, signed_headers
from tests.support.relay import Identity, RunningRelay, relay_on


# -- §18 item 91: POST /events -------------------------------------------------------------------
async def test_events_without_nip98_gets_401(relay: RunningRelay, alice: Identity) -> None:
    event = Event.create(alice.secret, 1, "hello")
    status, body = await post(relay, "/events", event.to_dict(), None)
    assert (status, body) == (401, {"error": "NIP-98: missing Authorization header"})
    async with relay.client(alice) as c:  # nothing was stored
        assert await c.query([{"ids": [event.id]}]) == []


async def test_events_with_nip98_behaves_as_event(
    relay: RunningRelay, alice: Identity, bob: Identity
) -> None:
    event = Event.create(alice.secret, 1, "hello over http")
    status, body = await publish(relay, alice, event)
    assert (status, body) == (200, {"event_id": event.id, "accepted": True, "message": ""})
    async with relay.client(bob) as c:
        assert [e.id for e in await c.query([{"ids": [event.id]}])] == [event.id]
    # re-sending is an accepted duplicate: 200 with the duplicate: message
    status, body = await publish(relay, alice, event)
    assert status == 200 and body["accepted"] is True and body["message"].startswith("duplicate:")
    # the NIP-98 pubkey is the session pubkey (§8 item 4)
    status, body = await publish(relay, bob, Event.create(alice.secret, 1, "not bob's"))
    assert status == 400
    assert body["message"] == "invalid: event pubkey does not match authenticated identity"


async def test_events_are_fanned_out_live(relay: RunningRelay, alice: Identity, bob: Identity) -> None:
    async with relay.client(bob) as c:
        sub = await c.subscribe([{"kinds": [1], "authors": [alice.pubkey]}])
        await sub.eose.wait()
        event = Event.create(alice.secret, 1, "live")
        assert (await publish(relay, alice, event))[0] == 200
        assert (await sub.next()).id == event.id


# -- §18 item 92: replay guard and the u tag --------------------------------------------------------
async def test_reused_nip98_event_gets_401(relay: RunningRelay, alice: Identity) -> None:
    url = relay.http_url + "/events"
    first = Event.create(alice.secret, 1, "one").to_json().encode()
    headers = signed_headers(alice, url, first)
    assert (await post(relay, "/events", None, alice, headers=headers, raw=first))[0] == 200
    status, body = await post(relay, "/events", None, alice, headers=headers, raw=first)
    assert (status, body) == (401, {"error": "NIP-98: event already used"})


async def test_u_tag_for_another_path_gets_401(relay: RunningRelay, alice: Identity) -> None:
    body = Event.create(alice.secret, 1, "x").to_json().encode()
    headers = signed_headers(alice, relay.http_url + "/query", body)
    status, answer = await post(relay, "/events", None, alice, headers=headers, raw=body)
    # the refusal says which URL it expects: the Host dialled (RELAY_URL is the default here,
    # which names no real address, so it is not listed; issue 24 item 6)
    assert (status, answer) == (
        401,
        {"error": "NIP-98: u tag does not match the request URL", "expected": [relay.http_url + "/events"]},
    )


@pytest.mark.parametrize(
    ("mutate", "reason"),
    [
        ({"method": "GET"}, "method tag does not match the request method"),
        ({"created_at": -61}, "created_at is more than 60 seconds from server time"),
        ({"created_at": 61}, "created_at is more than 60 seconds from server time"),
        ({"body": b"{}"}, "payload tag does not match the SHA-256 of the body"),
    ],
)
async def test_nip98_check_failures_get_401(
    sqlite_relay: RunningRelay, alice: Identity, mutate: dict, reason: str
) -> None:
    url = sqlite_relay.http_url + "/events"
    body = Event.create(alice.secret, 1, "x").to_json().encode()
    header = build_auth_header(
        alice.secret,
        url,
        mutate.get("method", "POST"),
        mutate.get("body", body),
        int(time.time()) + mutate.get("created_at", 0),
    )
    status, answer = await post(
        sqlite_relay, "/events", None, alice, headers={"Authorization": header}, raw=body
    )
    assert (status, answer) == (401, {"error": f"NIP-98: {reason}"})


async def test_u_tag_may_name_relay_url_host(tmp_path: Path, alice: Identity) -> None:
    """RELAY_URL's host is accepted even when the request's Host differs (§15 item 1)."""
    async with relay_on(tmp_path, relay_url="wss://relay.example.com") as running:
        body = Event.create(alice.secret, 1, "via proxy name").to_json().encode()
        headers = signed_headers(alice, "https://relay.example.com/events", body)
        status, answer = await post(running, "/events", None, alice, headers=headers, raw=body)
        assert status == 200 and answer["accepted"] is True
        # the scheme comes from RELAY_URL (wss → https): http:// for the Host does not match
        headers = signed_headers(alice, running.http_url + "/events", body)
        status, answer = await post(running, "/events", None, alice, headers=headers, raw=body)
        host_port = running.http_url.removeprefix("http://")
        assert (status, answer) == (
            401,
            {
                "error": "NIP-98: u tag does not match the request URL",
                "expected": [f"https://{host_port}/events", "https://relay.example.com/events"],
                "relay_url": "wss://relay.example.com",
            },
        )


# -- §18 item 96 and the transport rule ---------------------------------------------------------------
async def test_gift_wrap_and_ephemeral_kinds_are_websocket_only(relay: RunningRelay, alice: Identity) -> None:
    wrap = Event.create(alice.secret, 1059, "sealed", [["p", alice.pubkey]])
    status, body = await publish(relay, alice, wrap)
    assert (status, body) == (
        400,
        {
            "event_id": wrap.id,
            "accepted": False,
            "message": "invalid: kind 1059 is only accepted via WebSocket",
        },
    )
    presence = Event.create(alice.secret, 20001, "online")
    status, body = await publish(relay, alice, presence)
    assert (status, body["message"]) == (400, "invalid: kind 20001 is only accepted via WebSocket")


# -- status mapping (§15 item 2) -----------------------------------------------------------------------
async def test_event_status_mapping_over_http(relay: RunningRelay, alice: Identity) -> None:
    unknown = Event.create(alice.secret, 1063, "")
    assert await publish(relay, alice, unknown) == (
        400,
        {"event_id": unknown.id, "accepted": False, "message": "restricted: unknown event kind"},
    )
    bad_profile = Event.create(alice.secret, 0, "not json")
    status, body = await publish(relay, alice, bad_profile)
    assert (status, body["message"]) == (400, "invalid: profile content must be a JSON object")
    no_h = Event.create(alice.secret, 9, "lost")
    status, body = await publish(relay, alice, no_h)
    assert (status, body["message"]) == (400, "invalid: channel-scoped events must include an h tag")
    relay_only = Event.create(alice.secret, 39000, "", [["d", str(uuid.uuid4())]])
    assert (await publish(relay, alice, relay_only))[1]["message"] == "restricted: relay-only kind"


async def test_malformed_event_body(relay: RunningRelay, alice: Identity) -> None:
    status, body = await post(relay, "/events", None, alice, raw=b"{not json")
    assert status == 400
    assert body == {
        "event_id": None,
        "accepted": False,
        "message": "invalid: malformed event: body is not valid JSON",
    }
    bad = Event.create(alice.secret, 1, "x").to_dict() | {"kind": 65536}
    status, body = await post(relay, "/events", bad, alice)
    assert status == 400 and body["event_id"] == bad["id"]
    assert body["message"] == "invalid: malformed event: kind must be an integer between 0 and 65535"


def test_status_tables_cover_every_prefix() -> None:
    assert event_status(True, "") == 200
    assert event_status(True, "duplicate: already have this event") == 200
    assert event_status(True, 'response:{"channel_id":"x","created":true}') == 200
    expected = {
        "invalid: x": 400,
        "restricted: x": 400,
        "duplicate: reaction already exists": 400,
        "auth-required: not authenticated": 401,
        "blocked: you are banned from this community": 403,
        "rate-limited: too many concurrent requests": 429,
        "conflict: workflow changed since it was loaded": 409,  # workflows.md §2.2 item 4
        "error: internal server error": 500,
    }
    assert {m: event_status(False, m) for m in expected} == expected
    assert set(EVENT_STATUS) == {m.split(":")[0] for m in expected}
    reads = {
        "invalid: bad filter: x": 400,
        "error: mixed search and non-search filters not supported": 400,
        "restricted: not a channel member": 403,
        "auth-required: not authenticated": 401,
        "error: database error": 500,
    }
    assert {m: read_status(m) for m in reads} == reads
    assert READ_STATUS["rate-limited"] == 429


# -- §18 item 93: POST /query ---------------------------------------------------------------------------
async def _seed(relay: RunningRelay, who: Identity) -> list[Event]:
    now = int(time.time())
    events = [
        Event.create(who.secret, 1, "oldest note", created_at=now - 30),
        Event.create(who.secret, 1, "tie one", created_at=now - 20),
        Event.create(who.secret, 1, "tie two", created_at=now - 20),
        Event.create(who.secret, 1, "newest note", created_at=now - 10),
    ]
    for event in events:
        assert (await publish(relay, who, event))[0] == 200
    return events


def _order(events: list[Event]) -> list[str]:
    return [e.id for e in sorted(events, key=lambda e: (-e.created_at, e.id))]


async def test_query_returns_created_at_descending(
    relay: RunningRelay, alice: Identity, bob: Identity
) -> None:
    events = await _seed(relay, alice)
    status, body = await post(relay, "/query", {"kinds": [1], "authors": [alice.pubkey]}, bob)
    assert status == 200
    assert [e["id"] for e in body] == _order(events)
    assert all(Event.from_json(e) in events for e in body)
    # several filters: filter by filter, earlier results are not repeated (§6.4 item 2)
    newest = _order(events)[0]
    filters = [{"ids": [newest]}, {"kinds": [1], "authors": [alice.pubkey], "limit": 2}]
    status, body = await post(relay, "/query", filters, bob)
    assert [e["id"] for e in body] == [newest, _order(events)[1]]
    # search is allowed
    status, body = await post(relay, "/query", {"kinds": [1], "search": "newest"}, bob)
    assert (status, [e["content"] for e in body]) == (200, ["newest note"])


async def test_query_applies_the_same_gates_as_req(relay: RunningRelay, alice: Identity) -> None:
    cases = [
        ({"kinds": [1059]}, 403, "restricted: p-gated events require #p matching your pubkey"),
        ({"kinds": [30174]}, 403, "restricted: agent-engram reads require authors=[self] or #p=[self]"),
        ({"kinds": [30300]}, 403, "restricted: author-only kinds require authors=[self]"),
        ({"kinds": [9], "#h": [str(uuid.uuid4())]}, 403, "restricted: not a channel member"),
        (
            [{"kinds": [1], "search": "x"}, {"kinds": [1]}],
            400,
            "error: mixed search and non-search filters not supported",
        ),
        ([{"kinds": [1]}] * 11, 400, "invalid: too many filters (max 10)"),
        ([], 400, "invalid: at least one filter is required"),
        (
            {"kinds": [1], "#hh": ["x"]},
            400,
            "invalid: bad filter: tag filter key must be # and one letter, got '#hh'",
        ),
        ("kinds", 400, "invalid: body must be a filter object or an array of filters"),
    ]
    for payload, status, message in cases:
        assert await post(relay, "/query", payload, alice) == (status, {"error": message}), payload
    # A filter without kinds is served, each gated event dropped (issue 25 item 3, decision 171).
    assert await post(relay, "/query", {"authors": [alice.pubkey]}, alice) == (200, [])
    # the same refusal over REQ, word for word
    async with relay.client(alice) as c:
        with pytest.raises(Exception) as err:
            await c.query([{"kinds": [1059]}])
        assert str(err.value) == "restricted: p-gated events require #p matching your pubkey"


async def test_query_and_count_require_nip98(relay: RunningRelay) -> None:
    for path in ("/query", "/count"):
        assert await post(relay, path, {"kinds": [1]}, None) == (
            401,
            {"error": "NIP-98: missing Authorization header"},
        )


async def test_query_hides_author_only_events_of_others(
    relay: RunningRelay, alice: Identity, bob: Identity
) -> None:
    own = Event.create(alice.secret, 30300, "", [["d", "r1"], ["not_before", str(int(time.time()) + 60)]])
    assert (await publish(relay, alice, own))[0] == 200
    status, body = await post(relay, "/query", {"kinds": [30300], "authors": [alice.pubkey]}, alice)
    assert (status, [e["id"] for e in body]) == (200, [own.id])
    status, body = await post(relay, "/query", {"kinds": [30300, 0]}, bob)
    assert (status, body) == (200, [])
    status, body = await post(relay, "/query", {"ids": [own.id]}, bob)
    assert (status, body) == (200, [])


# -- POST /count -----------------------------------------------------------------------------------------
async def test_count(relay: RunningRelay, alice: Identity, bob: Identity) -> None:
    await _seed(relay, alice)
    assert await post(relay, "/count", {"kinds": [1], "authors": [alice.pubkey]}, bob) == (200, {"count": 4})
    assert await post(
        relay, "/count", [{"kinds": [1], "limit": 1}, {"authors": [alice.pubkey], "kinds": [1]}], bob
    ) == (
        200,
        {"count": 4},
    )
    assert await post(relay, "/count", {"kinds": [1], "search": "tie"}, bob) == (
        400,
        {"error": "invalid: search is not supported in COUNT"},
    )
    assert await post(relay, "/count", {"kinds": [44100]}, bob) == (
        403,
        {"error": "restricted: p-gated events require #p matching your pubkey"},
    )


# -- body limit, membership, switch ------------------------------------------------------------------------
async def test_body_over_one_mib_gets_413(sqlite_relay: RunningRelay, alice: Identity) -> None:
    big = b'{"kinds":[1],"search":"' + b"x" * (1 << 20) + b'"}'
    status, body = await post(sqlite_relay, "/query", None, alice, raw=big)
    assert (status, body) == (413, {"error": "invalid: request body exceeds 1048576 bytes"})
    at_limit = b'{"kinds":[1]}' + b" " * ((1 << 20) - 13)
    assert len(at_limit) == 1 << 20
    status, body = await post(sqlite_relay, "/query", None, alice, raw=at_limit)
    assert (status, body) == (200, [])


async def test_closed_workspace_refuses_non_members(tmp_path: Path, alice: Identity) -> None:
    async with relay_on(tmp_path, require_relay_membership=True) as running:
        status, body = await publish(running, alice, Event.create(alice.secret, 1, "let me in"))
        assert (status, body) == (403, {"error": "restricted: not a relay member"})
        assert await post(running, "/query", {"kinds": [1]}, alice) == (
            403,
            {"error": "restricted: not a relay member"},
        )


async def test_bridge_can_be_switched_off(tmp_path: Path, alice: Identity) -> None:
    async with relay_on(tmp_path, http_bridge=False) as running:
        status, _ = await publish(running, alice, Event.create(alice.secret, 1, "x"))
        assert status in (404, 405)
        async with aiohttp.ClientSession() as s, s.get(running.http_url + "/info") as resp:
            assert 98 not in (await resp.json(content_type=None))["supported_nips"]


async def test_reused_nip98_event_after_restart_gets_401(tmp_path: Path, alice: Identity) -> None:
    """The replay guard lives in the store: a restarted relay still knows the used id (issue 9 item 8)."""
    first = Event.create(alice.secret, 1, "before restart").to_json().encode()
    url = "http://relay.example.com/events"  # RELAY_URL's host: the same u tag on any port
    headers = signed_headers(alice, url, first)
    async with relay_on(tmp_path, relay_url="ws://relay.example.com") as running:
        assert (await post(running, "/events", None, alice, headers=headers, raw=first))[0] == 200
    async with relay_on(tmp_path, relay_url="ws://relay.example.com") as running:
        status, body = await post(running, "/events", None, alice, headers=headers, raw=first)
        assert (status, body) == (401, {"error": "NIP-98: event already used"})
        fresh = signed_headers(alice, url, first)
        status, body = await post(running, "/events", None, alice, headers=fresh, raw=first)
        assert status == 200 and body["message"].startswith("duplicate:")  # a new header is fine
