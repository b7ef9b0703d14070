"""Connection protocol (relay.md §7, §8, §14, §18), over real WebSocket on SQLite."""

from __future__ import annotations

import asyncio
import threading
import time

import aiohttp
import orjson
import pytest

from buzz.client import RelayClient, RelayError
from buzz.core.event import Event
from buzz.core.nip42 import build_auth_event
from tests.support.deadline import scaled
from tests.support.relay import Identity, RunningRelay, relay_on


async def _raw(url: str) -> tuple[aiohttp.ClientSession, aiohttp.ClientWebSocketResponse]:
    session = aiohttp.ClientSession()
    ws = await session.ws_connect(url, max_msg_size=0)
    return session, ws


async def _recv(ws: aiohttp.ClientWebSocketResponse, timeout: float = 5.0) -> list:
    msg = await ws.receive(timeout)
    assert msg.type == aiohttp.WSMsgType.TEXT, msg
    return orjson.loads(msg.data)


async def test_auth_challenge_is_first_message(sqlite_relay: RunningRelay) -> None:
    session, ws = await _raw(sqlite_relay.url)
    try:
        first = await _recv(ws)
        assert first[0] == "AUTH" and len(first[1]) == 64 and int(first[1], 16) >= 0
    finally:
        await ws.close()
        await session.close()


async def test_unauthenticated_requests_are_refused(sqlite_relay: RunningRelay, alice: Identity) -> None:
    async with sqlite_relay.client() as c:
        e = Event.create(alice.secret, 1, "hi")
        r = await c.publish(e)
        assert (r.accepted, r.message) == (False, "auth-required: not authenticated")
        with pytest.raises(RelayError) as err:
            await c.query([{"kinds": [1]}])
        assert err.value.message == "auth-required: not authenticated"
        with pytest.raises(RelayError) as err:
            await c.count([{"kinds": [1]}])
        assert err.value.message == "auth-required: not authenticated"


async def test_auth_again_and_auth_after_failure(sqlite_relay: RunningRelay, alice: Identity) -> None:
    """NIP-42 (issue 25 item 2): the same key again is accepted, and a failed attempt is not
    final: a valid AUTH after it authenticates the connection."""
    async with sqlite_relay.client(alice) as c:
        again = build_auth_event(alice.secret, await c.challenge, sqlite_relay.url)  # type: ignore[arg-type]
        r = await c._send_and_wait_ok("AUTH", again)
        assert (r.accepted, r.message) == (True, "")
    async with sqlite_relay.client(alice, auth=False) as c:
        challenge = await c.challenge  # type: ignore[misc]
        stale = build_auth_event(alice.secret, challenge, sqlite_relay.url, created_at=int(time.time()) - 61)
        r = await c._send_and_wait_ok("AUTH", stale)
        assert (r.accepted, r.message) == (False, "auth-required: verification failed")
        good = build_auth_event(alice.secret, challenge, sqlite_relay.url)
        r = await c._send_and_wait_ok("AUTH", good)
        assert (r.accepted, r.message) == (True, "")
        assert (await c.publish(Event.create(alice.secret, 1, "after a failed AUTH"))).accepted


async def test_auth_with_wrong_relay_tag_fails(sqlite_relay: RunningRelay, alice: Identity) -> None:
    async with sqlite_relay.client(alice, auth=False) as c:
        bad = build_auth_event(alice.secret, await c.challenge, "ws://elsewhere.example:3000")  # type: ignore[arg-type]
        r = await c._send_and_wait_ok("AUTH", bad)
        assert (r.accepted, r.message) == (False, "auth-required: verification failed")


async def test_unauthenticated_connection_closed_after_timeout(tmp_path, alice: Identity) -> None:
    async with relay_on(tmp_path, auth_timeout_s=0.5) as running:
        session, ws = await _raw(running.url)
        try:
            await _recv(ws)
            msg = await ws.receive(5)
            assert msg.type in (aiohttp.WSMsgType.CLOSE, aiohttp.WSMsgType.CLOSED)
        finally:
            await session.close()


async def test_event_answers_in_pipeline_order(sqlite_relay: RunningRelay, alice: Identity) -> None:
    async with sqlite_relay.client(alice) as c:
        now = int(time.time())
        cases = {
            "auth kind": (
                Event.create(alice.secret, 22242, ""),
                "invalid: AUTH events cannot be submitted via EVENT",
            ),
            "unknown kind": (Event.create(alice.secret, 1063, ""), "restricted: unknown event kind"),
            "reserved kind": (Event.create(alice.secret, 9009, ""), "restricted: unknown event kind"),
            "49001": (Event.create(alice.secret, 49001, ""), "restricted: unknown event kind"),
            "relay-only": (
                Event.create(alice.secret, 39000, "", [["d", "x"]]),
                "restricted: relay-only kind",
            ),
            "membership notice": (
                Event.create(alice.secret, 44100, ""),
                "invalid: membership notifications are relay-signed only",
            ),
            "too old": (
                Event.create(alice.secret, 1, "", created_at=now - 1000),
                "invalid: event timestamp too far from server time",
            ),
            "future": (
                Event.create(alice.secret, 1, "", created_at=now + 1000),
                "invalid: event timestamp too far from server time",
            ),
            "content size": (
                Event.create(alice.secret, 1, "x" * 262_145),
                "invalid: content exceeds maximum size of 262144 bytes (got 262145)",
            ),
            "other pubkey": (
                Event.create(Identity.new().secret, 1, "not me"),
                "invalid: event pubkey does not match authenticated identity",
            ),
            "d too long": (
                Event.create(alice.secret, 30023, "", [["d", "x" * 1025]]),
                "invalid: d tag too long (1025 bytes, max 1024)",
            ),
            "profile json": (
                Event.create(alice.secret, 0, "not json"),
                "invalid: profile content must be a JSON object",
            ),
        }
        for name, (event, expected) in cases.items():
            r = await c.publish(event)
            assert (r.accepted, r.message) == (False, expected), name
        ok = await c.publish(Event.create(alice.secret, 1, "", created_at=now - 899))
        assert ok.accepted, ok.message


async def test_bad_id_and_bad_signature(sqlite_relay: RunningRelay, alice: Identity) -> None:
    good = Event.create(alice.secret, 1, "signed")
    bad_sig = good.to_dict() | {"sig": "0" * 128}
    malformed = good.to_dict() | {"created_at": 1.0, "id": "f" * 64}
    async with sqlite_relay.client(alice) as c:
        fut = asyncio.get_running_loop().create_future()
        c._ok[good.id] = fut
        await c.send_raw(["EVENT", good.to_dict() | {"content": "changed"}])
        r = await asyncio.wait_for(fut, scaled(5))
        assert not r.accepted and r.message.startswith("invalid: invalid event id: computed ")
        assert r.message.endswith(f", got {good.id}")
        fut = asyncio.get_running_loop().create_future()
        c._ok[good.id] = fut
        await c.send_raw(["EVENT", bad_sig])
        r = await asyncio.wait_for(fut, scaled(5))
        assert (r.accepted, r.message) == (False, "invalid: invalid schnorr signature")
        fut = asyncio.get_running_loop().create_future()
        c._ok["f" * 64] = fut
        await c.send_raw(["EVENT", malformed])
        r = await asyncio.wait_for(fut, scaled(5))
        assert not r.accepted and r.message.startswith("invalid: malformed event:")


async def test_verification_runs_off_the_event_loop(
    sqlite_relay: RunningRelay, alice: Identity, monkeypatch
) -> None:
    import buzz.relay.ingestion.ingest as ingest_mod

    threads: list[str] = []
    real = ingest_mod.verify_stored

    def recording_verifier(event, received_at=None):
        threads.append(threading.current_thread().name)
        return real(event, received_at)

    monkeypatch.setattr(ingest_mod, "verify_stored", recording_verifier)
    async with sqlite_relay.client(alice) as c:
        assert (await c.publish(Event.create(alice.secret, 1, "threaded"))).accepted
    assert threads and all(name != threading.main_thread().name for name in threads)
    assert all(name.startswith("verify") for name in threads)


async def test_subscription_limits(sqlite_relay: RunningRelay, alice: Identity) -> None:
    async with sqlite_relay.client(alice) as c:
        with pytest.raises(RelayError) as err:
            await c.query([{"kinds": [1]}] * 11)
        assert err.value.message == "invalid: too many filters (max 10)"
        sub = await c.subscribe([{"kinds": [1]}], sub_id="x" * 65)
        await asyncio.wait_for(sub.eose.wait(), scaled(5))
        assert sub.closed_reason == "invalid: subscription id must be 1-64 characters"
        sub = await c.subscribe([{"kinds": [1], "authors": [alice.pubkey]}], sub_id="ü" * 64)
        await asyncio.wait_for(sub.eose.wait(), scaled(5))
        assert sub.closed_reason is None
        with pytest.raises(RelayError) as err:
            await c.query([])
        assert err.value.message == "invalid: at least one filter is required"


async def test_1025th_subscription_is_refused_and_ids_are_reusable(
    sqlite_relay: RunningRelay, alice: Identity
) -> None:
    async with sqlite_relay.client(alice) as c:
        flt = {"kinds": [1], "authors": [alice.pubkey], "limit": 0}
        for i in range(1024):
            await c.send_raw(["REQ", f"s{i}", flt])
        sub = await c.subscribe([flt], sub_id="one-too-many")
        await asyncio.wait_for(sub.eose.wait(), scaled(10))
        assert sub.closed_reason == "error: too many subscriptions"
        reuse = await c.subscribe([flt], sub_id="s7")
        await asyncio.wait_for(reuse.eose.wait(), scaled(10))
        assert reuse.closed_reason is None


async def test_limit_is_clamped_to_1000(sqlite_relay: RunningRelay, alice: Identity) -> None:
    async with sqlite_relay.client(alice) as c:
        now = int(time.time())
        events = [Event.create(alice.secret, 1, f"n{i}", created_at=now - i % 300) for i in range(1005)]
        await asyncio.gather(*(c.publish(e) for e in events))
        assert (
            len(await c.query([{"kinds": [1], "authors": [alice.pubkey], "limit": 5000}], timeout=30)) == 1000
        )
        assert len(await c.query([{"kinds": [1], "authors": [alice.pubkey]}], timeout=30)) == 1000


async def test_duplicates_across_filters_sent_once(sqlite_relay: RunningRelay, alice: Identity) -> None:
    async with sqlite_relay.client(alice) as c:
        e = Event.create(alice.secret, 1, "dup", [["t", "a"]])
        await c.publish(e)
        got = await c.query(
            [{"kinds": [1], "#t": ["a"]}, {"authors": [alice.pubkey], "kinds": [1]}, {"ids": [e.id[:8]]}]
        )
        assert [x.id for x in got] == [e.id]


async def test_ids_prefix_of_8(sqlite_relay: RunningRelay, alice: Identity) -> None:
    async with sqlite_relay.client(alice) as c:
        e = Event.create(alice.secret, 1, "prefix")
        await c.publish(e)
        assert [x.id for x in await c.query([{"ids": [e.id[:8]]}])] == [e.id]


async def test_event_accepted_during_stored_query_arrives_once(
    sqlite_relay: RunningRelay, alice: Identity
) -> None:
    async with sqlite_relay.client(alice) as writer, sqlite_relay.client(alice) as reader:
        flt = {"kinds": [1], "authors": [alice.pubkey]}
        burst = [Event.create(alice.secret, 1, f"b{i}") for i in range(200)]
        publishing = asyncio.gather(*(writer.publish(e) for e in burst))
        subs = [await reader.subscribe([flt]) for _ in range(5)]
        await publishing
        await asyncio.sleep(0.5)
        for sub in subs:
            await asyncio.wait_for(sub.eose.wait(), scaled(10))
            ids = []
            while not sub.queue.empty():
                ids.append(sub.queue.get_nowait().id)  # type: ignore[union-attr]
            assert len(ids) == len(set(ids)) == 200


async def test_req_with_existing_id_replaces_it(sqlite_relay: RunningRelay, alice: Identity) -> None:
    async with sqlite_relay.client(alice) as c:
        first = await c.subscribe([{"kinds": [1], "#t": ["one"]}], sub_id="same")
        await first.eose.wait()
        second = await c.subscribe([{"kinds": [1], "#t": ["two"]}], sub_id="same")
        await asyncio.sleep(0.2)
        await c.publish(Event.create(alice.secret, 1, "1", [["t", "one"]]))
        two = Event.create(alice.secret, 1, "2", [["t", "two"]])
        await c.publish(two)
        assert (await second.next()).id == two.id
        assert second.queue.empty()


async def test_close_is_not_answered(sqlite_relay: RunningRelay, alice: Identity) -> None:
    """NIP-01: CLOSED is the relay ending a subscription; a client's CLOSE gets no answer (issue
    25 item 8), for an open subscription and for an id never opened."""
    session, ws = await _raw(sqlite_relay.url)
    try:
        challenge = (await _recv(ws))[1]
        auth = build_auth_event(alice.secret, challenge, sqlite_relay.url)
        await ws.send_str(orjson.dumps(["AUTH", auth.to_dict()]).decode())
        assert (await _recv(ws))[2] is True
        await ws.send_str('["REQ","open",{"kinds":[1],"authors":["' + alice.pubkey + '"]}]')
        assert await _recv(ws) == ["EOSE", "open"]
        await ws.send_str('["CLOSE","open"]')
        await ws.send_str('["CLOSE","never-opened"]')
        await ws.send_str('["COUNT","after",{"kinds":[1],"authors":["' + alice.pubkey + '"]}]')
        assert await _recv(ws) == ["COUNT", "after", {"count": 0}]  # the first answer after the CLOSEs
    finally:
        await ws.close()
        await session.close()


async def test_nip11_document(sqlite_relay: RunningRelay) -> None:
    async with aiohttp.ClientSession() as s:
        async with s.get(sqlite_relay.http_url + "/", headers={"Accept": "application/nostr+json"}) as resp:
            assert resp.headers["Content-Type"].startswith("application/nostr+json")
            assert resp.headers["Access-Control-Allow-Origin"] == "*"
            doc = await resp.json(content_type=None)
    lim = doc["limitation"]
    assert lim["max_limit"] == 1000 and lim["default_limit"] == 1000
    assert lim["max_message_length"] == 524_288
    assert (lim["max_subscriptions"], lim["max_filters"], lim["max_subid_length"]) == (1024, 10, 64)
    assert lim["max_content_length"] == 262_144 and lim["auth_required"] is True
    assert doc["self"] == sqlite_relay.relay.pubkey
    assert doc["supported_nips"] == sorted(doc["supported_nips"]) and 42 in doc["supported_nips"]


async def test_frame_limit_is_configurable_and_enforced(tmp_path, alice: Identity) -> None:
    async with relay_on(tmp_path, max_frame_bytes=4096) as running:
        async with aiohttp.ClientSession() as s, s.get(running.http_url + "/info") as resp:
            assert (await resp.json(content_type=None))["limitation"]["max_message_length"] == 4096
        session, ws = await _raw(running.url)
        try:
            await _recv(ws)
            await ws.send_str('["REQ","big",{"search":"' + "x" * 5000 + '"}]')
            msg = await ws.receive(5)
            while msg.type == aiohttp.WSMsgType.TEXT:
                msg = await ws.receive(5)
            assert msg.type in (aiohttp.WSMsgType.CLOSE, aiohttp.WSMsgType.CLOSED)
            assert ws.close_code == 1009
        finally:
            await session.close()


async def test_relay_key_is_stable_across_restarts(tmp_path) -> None:
    async with relay_on(tmp_path) as first:
        key = first.relay.pubkey
    async with relay_on(tmp_path) as second:
        assert second.relay.pubkey == key
    assert (tmp_path / "relay.key").stat().st_mode & 0o777 == 0o600


async def test_auth_events_are_never_stored(sqlite_relay: RunningRelay, alice: Identity) -> None:
    async with sqlite_relay.client(alice) as c:
        assert await c.query([{"kinds": [22242], "authors": [alice.pubkey]}]) == []


async def test_slow_consumer_is_disconnected(tmp_path, alice: Identity) -> None:
    async with relay_on(tmp_path, send_buffer=5, slow_client_grace=3) as running:
        reader = RelayClient(running.url, alice.secret)
        await reader.connect()
        sub = await reader.subscribe([{"kinds": [1], "authors": [alice.pubkey]}])
        await sub.eose.wait()
        conn = next(iter(running.relay.connections))
        # Stop the writer from draining: fill the queue faster than it can send.
        for i in range(50):
            conn.send(f'["NOTICE","flood {i}"]')  # type: ignore[attr-defined]
        await asyncio.sleep(0.5)
        assert conn._closing  # type: ignore[attr-defined]
        assert running.relay.stats["dropped_messages"] >= 3
        await reader.close()


async def test_closed_workspace_refuses_non_member_auth(tmp_path, alice: Identity) -> None:
    async with relay_on(tmp_path, require_relay_membership=True) as running:
        async with running.client(alice, auth=False) as c:
            auth = build_auth_event(alice.secret, await c.challenge, running.url)  # type: ignore[arg-type]
            r = await c._send_and_wait_ok("AUTH", auth)
            assert (r.accepted, r.message) == (False, "restricted: not a relay member")


async def test_closed_workspace_admits_members_and_the_owner(
    tmp_path, alice: Identity, bob: Identity
) -> None:
    async with relay_on(tmp_path, require_relay_membership=True, owner_pubkey=alice.pubkey) as running:
        async with running.client(alice) as c:  # RELAY_OWNER_PUBKEY is ensured as a member at startup
            assert (await c.publish(Event.create(alice.secret, 1, "owner is in"))).accepted
        await running.relay.store.put_relay_member(bob.pubkey, "member")  # type: ignore[attr-defined]
        async with running.client(bob) as c:
            assert (await c.publish(Event.create(bob.secret, 1, "member is in"))).accepted
        async with aiohttp.ClientSession() as s:
            async with s.get(running.http_url + "/info") as resp:
                assert (await resp.json(content_type=None))["pubkey"] == alice.pubkey
