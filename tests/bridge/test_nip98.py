"""NIP-98 build and check, pure (relay.md §15 item 1, agents.md §2.1 item 3)."""

from __future__ import annotations

import base64
import hashlib

import pytest

from buzz.core.event import Event
from buzz.core.nip98 import (
    HTTP_AUTH_KIND,
    Nip98Error,
    build_auth_event,
    build_auth_header,
    decode_header,
    encode_header,
    http_base,
    request_urls,
    verify_request,
)
from tests.support.relay import Identity

NOW = 1_750_000_000
URL = "http://127.0.0.1:3000/events"
URLS = request_urls("ws://127.0.0.1:3000", "127.0.0.1:3000", "/events")
BODY = b'{"kinds":[9]}'


def _reason(header: str | None, urls=URLS, method: str = "POST", body: bytes = BODY, now: int = NOW) -> str:
    with pytest.raises(Nip98Error) as err:
        verify_request(header, urls, method, body, now)
    assert str(err.value) == f"NIP-98: {err.value.reason}"
    return err.value.reason


def test_built_event_has_u_method_payload_and_nonce(alice: Identity) -> None:
    ev = build_auth_event(alice.secret, URL, "post", BODY, created_at=NOW)
    assert ev.kind == HTTP_AUTH_KIND == 27235
    assert ev.tag_values("u") == [URL]
    assert ev.tag_values("method") == ["POST"]
    assert ev.tag_values("payload") == [hashlib.sha256(BODY).hexdigest()]
    assert len(ev.tag_values("nonce")) == 1
    other = build_auth_event(alice.secret, URL, "POST", BODY, created_at=NOW)
    assert other.tag_values("nonce") != ev.tag_values("nonce")  # fresh nonce, distinct ids
    assert other.id != ev.id


def test_header_round_trip_verifies(alice: Identity) -> None:
    header = build_auth_header(alice.secret, URL, "POST", BODY, created_at=NOW)
    assert header.startswith("Nostr ")
    event = verify_request(header, URLS, "POST", BODY, NOW)
    assert event.pubkey == alice.pubkey
    assert decode_header(header) == event


def test_freshness_window_is_60_seconds(alice: Identity) -> None:
    for delta in (-60, 60):
        verify_request(
            build_auth_header(alice.secret, URL, "POST", BODY, NOW + delta), URLS, "POST", BODY, NOW
        )
    for delta in (-61, 61):
        header = build_auth_header(alice.secret, URL, "POST", BODY, NOW + delta)
        assert _reason(header) == "created_at is more than 60 seconds from server time"


def test_url_method_and_payload_must_match(alice: Identity) -> None:
    other_path = build_auth_header(alice.secret, "http://127.0.0.1:3000/query", "POST", BODY, NOW)
    assert _reason(other_path) == "u tag does not match the request URL"
    other_host = build_auth_header(alice.secret, "http://example.com:3000/events", "POST", BODY, NOW)
    assert _reason(other_host) == "u tag does not match the request URL"
    get = build_auth_header(alice.secret, URL, "GET", BODY, NOW)
    assert _reason(get) == "method tag does not match the request method"
    header = build_auth_header(alice.secret, URL, "POST", BODY, NOW)
    assert _reason(header, body=b"{}") == "payload tag does not match the SHA-256 of the body"


def test_payload_tag_is_optional(alice: Identity) -> None:
    ev = build_auth_event(alice.secret, URL, "POST", None, created_at=NOW)
    assert ev.tag_values("payload") == []
    verify_request(encode_header(ev), URLS, "POST", b"anything", NOW)


def test_url_candidates_follow_relay_url_scheme_and_host() -> None:
    urls = request_urls("wss://relay.example.com", "10.0.0.5:8443", "/query?x=1")
    assert urls == frozenset({"https://relay.example.com/query?x=1", "https://10.0.0.5:8443/query?x=1"})
    # normalization as in §7.3: localhost → 127.0.0.1, default port dropped, scheme/host lowercased
    assert request_urls("ws://LOCALHOST:80", None, "/events") == frozenset({"http://127.0.0.1/events"})


def test_localhost_and_loopback_are_the_same_host(alice: Identity) -> None:
    header = build_auth_header(alice.secret, "http://localhost:3000/events", "POST", BODY, NOW)
    verify_request(header, URLS, "POST", BODY, NOW)


def test_header_shape_failures(alice: Identity) -> None:
    assert _reason(None) == "missing Authorization header"
    assert _reason("Bearer abc") == "Authorization scheme must be Nostr"
    assert _reason("Nostr !!!") == "Authorization token is not valid base64"
    assert (
        _reason("Nostr " + base64.b64encode(b"not json").decode())
        == "Authorization token is not a JSON event"
    )
    bad_shape = base64.b64encode(b'{"id":"x"}').decode()
    assert _reason("Nostr " + bad_shape).startswith("malformed event: ")


def test_wrong_kind_bad_id_and_bad_signature(alice: Identity) -> None:
    tags = [["u", URL], ["method", "POST"]]
    assert (
        _reason(encode_header(Event.create(alice.secret, 22242, "", tags, NOW))) == "event kind must be 27235"
    )
    good = build_auth_event(alice.secret, URL, "POST", BODY, NOW)
    forged_sig = Event(good.id, good.pubkey, good.created_at, good.kind, good.tags, good.content, "0" * 128)
    assert _reason(encode_header(forged_sig)) == "invalid signature"
    other = build_auth_event(alice.secret, URL, "POST", BODY, NOW)
    wrong_id = Event(other.id, good.pubkey, good.created_at, good.kind, good.tags, good.content, good.sig)
    assert _reason(encode_header(wrong_id)) == "invalid event id"


def test_duplicate_u_or_method_tags_are_refused(alice: Identity) -> None:
    two_u = Event.create(alice.secret, 27235, "", [["u", URL], ["u", URL], ["method", "POST"]], NOW)
    assert _reason(encode_header(two_u)) == "event must carry exactly one u tag"
    two_m = Event.create(alice.secret, 27235, "", [["u", URL], ["method", "POST"], ["method", "POST"]], NOW)
    assert _reason(encode_header(two_m)) == "method tag does not match the request method"


def test_http_base_maps_websocket_schemes() -> None:
    assert http_base("ws://127.0.0.1:3000") == "http://127.0.0.1:3000"
    assert http_base("wss://relay.example.com/") == "https://relay.example.com"
    assert http_base("https://relay.example.com/buzz") == "https://relay.example.com/buzz"
    with pytest.raises(ValueError):
        http_base("ftp://x")
