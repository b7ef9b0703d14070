"""The Redis bus's pure parts (relay.md §12.4): payload codec, echo cache, topic references.
No Redis needed: these are the real classes driven with a fake clock and a manual timer."""

from __future__ import annotations

import orjson
import pytest

from buzz.core.event import Event
from buzz.core.filters import Filter
from buzz.core.keys import generate_secret_key
from buzz.relay.delivery.bus_topics import TopicRefs, named_channels
from buzz.relay.replicas.bus_link import command, publish_command
from buzz.relay.replicas.bus_wire import (
    AccessChanged,
    BadPayload,
    EchoCache,
    Topics,
    decode_control,
    decode_event,
    echo_id,
    encode_access_changed,
    encode_event,
    encode_event_bytes,
)

CHANNEL = "3f0c2a4e-8b1d-4c6f-9a7e-2d5b8c1f0e93"
PUBKEY = "a" * 64


def test_topic_names() -> None:
    topics = Topics("acme")
    assert topics.global_ == "buzz:acme:global"
    assert topics.control == "buzz:acme:control"
    assert topics.for_event(CHANNEL) == f"buzz:acme:channel:{CHANNEL}"
    assert topics.for_event(None) == "buzz:acme:global"
    assert topics.presence_key(PUBKEY) == f"buzz:acme:presence:{PUBKEY}"


@pytest.mark.parametrize("channel_id", [CHANNEL, None])
def test_event_payload_round_trip(channel_id: str | None) -> None:
    event = Event.create(generate_secret_key(), 9, "hi ✓", [["h", CHANNEL]])
    data = encode_event(event.to_json(), channel_id)
    assert orjson.loads(data) == {"v": 1, "channel_id": channel_id, "event": event.to_dict()}
    assert decode_event(data) == (event, channel_id)


def test_a_bad_event_payload_is_refused() -> None:
    for bad in (
        b'{"v":1,"channel_id":null,"event":{"id":"x"}}',
        b'{"v":1,"channel_id":null,"event":{"id":[1]}}',
        b'{"v":2,"channel_id":null,"event":{"id":"x"}}',
    ):
        with pytest.raises(BadPayload):
            decode_event(bad)


def test_the_echo_id_is_read_off_the_raw_payload() -> None:
    """Decision 351: the id comes from the bytes, whatever the key order; text that looks like
    a key inside a string is escaped and never matches."""
    event = Event.create(generate_secret_key(), 9, 'say "id":"x" {"id":"y"}', [["h", CHANNEL]])
    data = encode_event_bytes(event, CHANNEL)
    assert data == encode_event(event.to_json(), CHANNEL)
    assert echo_id(data) == event.id
    reordered = orjson.dumps({"event": {"content": event.content, "id": event.id}, "v": 1})
    assert echo_id(reordered) == event.id
    assert echo_id(b'{"v":1, "event": {"id": "%s"}}' % event.id.encode()) is None  # spaced: parsed instead
    assert echo_id(b"not json") is None


def test_commands_are_resp_arrays_of_bulk_strings() -> None:
    assert command(b"SUBSCRIBE", b"a", b"bc") == b"*3\r\n$9\r\nSUBSCRIBE\r\n$1\r\na\r\n$2\r\nbc\r\n"
    assert publish_command(b"t", b"\r\n") == command(b"PUBLISH", b"t", b"\r\n")


def test_control_payload_round_trip() -> None:
    for change in (AccessChanged(CHANNEL, PUBKEY), AccessChanged(CHANNEL)):
        data = encode_access_changed(change)
        assert orjson.loads(data) == {
            "v": 1,
            "type": "access_changed",
            "channel_id": CHANNEL,
            "pubkey": change.pubkey,
        }
        assert decode_control(data) == change


@pytest.mark.parametrize(
    "data",
    [
        b"not json",
        b"[]",
        b'{"v":2,"channel_id":null,"event":{}}',
        b'{"v":1,"channel_id":"general","event":{}}',
        b'{"v":1,"channel_id":null,"event":{"id":"x"}}',
    ],
)
def test_bad_event_payloads(data: bytes) -> None:
    with pytest.raises(BadPayload):
        decode_event(data)


@pytest.mark.parametrize(
    "body",
    [
        {"v": 1, "type": "something_else", "channel_id": CHANNEL, "pubkey": None},
        {"v": 1, "type": "access_changed", "channel_id": None, "pubkey": None},
        {"v": 1, "type": "access_changed", "channel_id": CHANNEL, "pubkey": "A" * 64},
        {"v": 0, "type": "access_changed", "channel_id": CHANNEL, "pubkey": None},
    ],
)
def test_bad_control_payloads(body: dict[str, object]) -> None:
    with pytest.raises(BadPayload):
        decode_control(orjson.dumps(body))


def test_echo_cache_forgets_after_60_s_and_on_discard() -> None:
    now = [1000.0]
    echo = EchoCache(clock=lambda: now[0])
    echo.add("e1")
    now[0] += 30
    echo.add("e2")
    assert "e1" in echo and "e2" in echo
    now[0] += 30.5
    assert "e1" not in echo and "e2" in echo
    echo.discard("e2")
    assert "e2" not in echo and len(echo) == 0


def test_echo_cache_is_bounded() -> None:
    echo = EchoCache(max_size=2, clock=lambda: 0.0)
    for event_id in ("a", "b", "c"):
        echo.add(event_id)
    assert "a" not in echo and "b" in echo and "c" in echo


class ManualTimers:
    """Timers that fire when the test says so (`fire`), recording each delay."""

    def __init__(self) -> None:
        self.pending: list[tuple[float, object, list[bool]]] = []

    def schedule(self, delay: float, callback):  # type: ignore[no-untyped-def]
        cancelled = [False]
        self.pending.append((delay, callback, cancelled))

        class _Handle:
            def cancel(self) -> None:
                cancelled[0] = True

        return _Handle()

    def fire(self) -> None:
        pending, self.pending = self.pending, []
        for _, callback, cancelled in pending:
            if not cancelled[0]:
                callback()  # type: ignore[operator]


def test_topic_refs_count_and_debounce_the_last_release() -> None:
    timers = ManualTimers()
    changes: list[frozenset[str]] = []
    refs = TopicRefs(lambda: changes.append(refs.wanted), schedule=timers.schedule)
    refs.acquire(CHANNEL)
    refs.acquire(CHANNEL)
    assert changes == [frozenset({CHANNEL})] and refs.count(CHANNEL) == 2
    refs.release(CHANNEL)
    refs.release(CHANNEL)
    assert [d for d, _, _ in timers.pending] == [0.5]
    assert refs.wanted == frozenset({CHANNEL})  # still subscribed during the debounce
    refs.acquire(CHANNEL)  # back within 500 ms: the pending release is cancelled
    timers.fire()
    assert refs.wanted == frozenset({CHANNEL}) and len(changes) == 1
    refs.release(CHANNEL)
    timers.fire()
    assert refs.wanted == frozenset() and changes[-1] == frozenset()
    refs.release(CHANNEL)  # an unknown release is ignored
    assert refs.count(CHANNEL) == 0


def test_named_channels_are_canonical_h_values_of_live_filters() -> None:
    other = "0b8e6f2a-1c3d-4e5f-8a9b-0c1d2e3f4a5b"
    filters = [
        Filter.parse({"#h": [CHANNEL, "general"]}),
        Filter.parse({"kinds": [9], "#h": [other]}),
        Filter.parse({"kinds": [], "#h": ["1e8e6f2a-1c3d-4e5f-8a9b-0c1d2e3f4a5b"]}),  # matches nothing
        Filter.parse({"kinds": [1]}),
    ]
    assert named_channels(filters) == frozenset({CHANNEL, other})
