"""Hostile input found by a newcomer's probe: each is answered, nothing leaks, nobody else is hurt."""

from __future__ import annotations

import asyncio

import aiohttp
import orjson

from buzz.client import RelayClient
from buzz.core.event import Event
from buzz.core.nip42 import build_auth_event
from tests.support.deadline import scaled
from tests.support.relay import Identity, RunningRelay, relay_on


async def _raw_notice(url: str, frame: str) -> list:
    async with aiohttp.ClientSession() as s, s.ws_connect(url, max_msg_size=0) as ws:
        await ws.receive(5)  # AUTH challenge
        await ws.send_str(frame)
        return orjson.loads((await ws.receive(5)).data)


async def test_deeply_nested_frames_get_a_notice_and_leak_no_handler_slot(tmp_path, alice: Identity) -> None:
    async with relay_on(tmp_path, max_concurrent_handlers=8) as running:
        bomb = "[" * 5000 + "]" * 5000
        for _ in range(20):  # more bombs than handler slots
            answer = await _raw_notice(running.url, bomb)
            assert answer[0] == "NOTICE" and answer[1].startswith("invalid message:")
        # Connections that close with queued work give their slots back too.
        async with aiohttp.ClientSession() as s:
            for _ in range(10):
                async with s.ws_connect(running.url) as ws:
                    await ws.receive(5)
                    for _ in range(5):
                        await ws.send_str('["REQ","x",{"kinds":[1]}]')
        await asyncio.sleep(0.3)
        assert running.relay._handlers_in_flight == 0
        async with running.client(alice) as c:
            assert (await c.publish(Event.create(alice.secret, 1, "still serving"))).accepted


async def test_a_sub_id_with_a_lone_surrogate_is_refused_and_hurts_nobody(
    sqlite_relay: RunningRelay, alice: Identity, bob: Identity
) -> None:
    async with sqlite_relay.client(alice) as a, sqlite_relay.client(bob) as b:
        await a.send_raw('["REQ","\\ud800",{"kinds":[1]}]')
        sub = await b.subscribe([{"kinds": [1], "authors": [alice.pubkey]}])
        await sub.eose.wait()
        note = Event.create(alice.secret, 1, "hello")
        result = await a.publish(note)
        assert (result.accepted, result.message) == (True, "")
        assert (await sub.next()).id == note.id
        await asyncio.sleep(0.1)
        assert any(n.startswith("invalid message: subscription id") for n in a.notices)


async def test_filter_values_with_lone_surrogates_are_bad_filters(
    sqlite_relay: RunningRelay, alice: Identity
) -> None:
    for flt in ('{"kinds":[1],"#t":["\\ud800"]}', '{"kinds":[1],"search":"\\udfff"}'):
        raw = await _raw_closed(sqlite_relay, alice, flt)
        assert raw[0] == "CLOSED" and raw[2].startswith("invalid: bad filter:"), raw


async def _raw_closed(running: RunningRelay, who: Identity, flt: str) -> list:
    async with aiohttp.ClientSession() as s, s.ws_connect(running.url) as ws:
        challenge = orjson.loads((await ws.receive(5)).data)[1]
        await ws.send_str(
            orjson.dumps(["AUTH", build_auth_event(who.secret, challenge, running.url).to_dict()]).decode()
        )
        await ws.receive(5)
        await ws.send_str(f'["REQ","s",{flt}]')
        return orjson.loads((await ws.receive(5)).data)


async def test_auth_with_an_unparseable_relay_url_fails_cleanly(
    sqlite_relay: RunningRelay, alice: Identity
) -> None:
    async with sqlite_relay.client(alice, auth=False) as c:
        challenge = await c.challenge  # type: ignore[misc]
        bad = Event.create(alice.secret, 22242, "", [["relay", "ws://[::1"], ["challenge", challenge]])
        r = await c._send_and_wait_ok("AUTH", bad)
        assert (r.accepted, r.message) == (False, "auth-required: verification failed")


async def test_malformed_auths_count_as_failed_attempts(sqlite_relay: RunningRelay, alice: Identity) -> None:
    """Issue 25 item 2: failed attempts are rate-limited, not final. One malformed AUTH leaves
    the next valid one accepted; five in a row make the sixth attempt wait, valid or not."""

    async def malformed(c: RelayClient, event_id: str) -> tuple[bool, str]:
        fut = asyncio.get_running_loop().create_future()
        c._ok[event_id] = fut
        await c.send_raw(["AUTH", {"id": event_id, "kind": 22242}])
        r = await asyncio.wait_for(fut, scaled(5))
        return r.accepted, r.message

    async with sqlite_relay.client(alice, auth=False) as c:
        challenge = await c.challenge  # type: ignore[misc]
        accepted, message = await malformed(c, "a" * 64)
        assert not accepted and message.startswith("invalid: malformed event:")
        good = build_auth_event(alice.secret, challenge, sqlite_relay.url)
        r = await c._send_and_wait_ok("AUTH", good)
        assert (r.accepted, r.message) == (True, "")
    async with sqlite_relay.client(alice, auth=False) as c:
        challenge = await c.challenge  # type: ignore[misc]
        for i in range(5):
            accepted, message = await malformed(c, f"{i:x}" * 64)
            assert not accepted and message.startswith("invalid: malformed event:")
        good = build_auth_event(alice.secret, challenge, sqlite_relay.url)
        r = await c._send_and_wait_ok("AUTH", good)
        assert not r.accepted and r.message.startswith(
            "rate-limited: too many failed AUTH attempts; retry in "
        )


async def test_nan_is_not_json(sqlite_relay: RunningRelay) -> None:
    answer = await _raw_notice(sqlite_relay.url, '["REQ","s",{"limit":NaN}]')
    assert answer[0] == "NOTICE" and answer[1].startswith("invalid message:")


async def test_an_event_id_that_cannot_be_echoed_gets_one_answer_that_does_not_echo_it(
    sqlite_relay: RunningRelay, alice: Identity
) -> None:
    """Issue 9 item 10: exactly one answer for every EVENT, and every answer is encodable."""
    expected = ["NOTICE", "invalid: malformed event: id is not valid Unicode (unpaired surrogate)"]
    async with aiohttp.ClientSession() as s, s.ws_connect(sqlite_relay.url) as ws:
        await ws.receive(5)  # challenge
        for frame in ('["EVENT",{"id":"\\ud800","kind":1}]', '["AUTH",{"id":"ab\\udfff"}]'):
            await ws.send_str(frame)
            assert orjson.loads((await ws.receive(5)).data) == expected
        await ws.send_str('["REQ","next",{}]')  # nothing else was queued, and the connection serves on
        assert orjson.loads((await ws.receive(5)).data) == [
            "CLOSED",
            "next",
            "auth-required: not authenticated",
        ]


async def test_binary_frames_are_read_as_text_and_a_refused_one_says_it_was_binary(
    sqlite_relay: RunningRelay, alice: Identity
) -> None:
    """relay.md §7.1 item 1: a UTF-8 binary frame is handled as text (a REQ is answered as
    one); one that is not a message, or not UTF-8, gets a NOTICE that names the binary frame
    and the fix. The connection serves on after each."""
    hint = "send NIP-01 messages as JSON in text frames"
    async with aiohttp.ClientSession() as s, s.ws_connect(sqlite_relay.url) as ws:
        challenge = orjson.loads((await ws.receive(5)).data)[1]
        auth = build_auth_event(alice.secret, challenge, sqlite_relay.url)
        await ws.send_bytes(orjson.dumps(["AUTH", auth.to_dict()]))  # binary AUTH: accepted
        assert orjson.loads((await ws.receive(5)).data) == ["OK", auth.id, True, ""]
        await ws.send_bytes(b"OpusHead\x01\x02")  # UTF-8, not JSON (an audio client's header)
        notice = orjson.loads((await ws.receive(5)).data)
        assert notice[0] == "NOTICE" and notice[1].startswith(
            "invalid message: binary frame: not valid JSON ("
        ), notice
        assert notice[1].endswith(f"; {hint}"), notice
        await ws.send_bytes(b"\xff\xfe\x00")  # not UTF-8
        assert orjson.loads((await ws.receive(5)).data) == [
            "NOTICE", f"invalid message: binary frame is not valid UTF-8; {hint}",
        ]  # fmt: skip
        await ws.send_bytes(b"[]")
        assert orjson.loads((await ws.receive(5)).data) == [
            "NOTICE", f"invalid message: binary frame: frame must be a non-empty JSON array; {hint}",
        ]  # fmt: skip
        await ws.send_str("not json")  # a text frame's refusal names no frame type
        assert orjson.loads((await ws.receive(5)).data)[1].startswith("invalid message: not valid JSON (")
        await ws.send_bytes(b'["REQ","b",{"kinds":[1],"authors":["' + alice.pubkey.encode() + b'"]}]')
        assert orjson.loads((await ws.receive(5)).data) == ["EOSE", "b"]  # still serving, binary read as text


def test_relay_answers_are_always_encodable() -> None:
    """A reason quoting a lone surrogate goes out with U+FFFD instead of failing to encode."""
    from buzz.core import messages

    assert orjson.loads(messages.ok("ab", False, "invalid: bad \ud800 value")) == [
        "OK", "ab", False, "invalid: bad \ufffd value",
    ]  # fmt: skip
    assert orjson.loads(messages.notice("error: \udfff")) == ["NOTICE", "error: \ufffd"]
    assert orjson.loads(messages.closed("s", "restricted: \ud83d")) == ["CLOSED", "s", "restricted: \ufffd"]
