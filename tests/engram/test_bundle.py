"""Memory bundles (core/engram_bundle.py, issue 16 item 4): sealed under the pair key, signed by
the agent, refused when altered, foreign or malformed."""

from __future__ import annotations

import base64

import orjson
import pytest

from buzz.core import engram
from buzz.core.engram_bundle import BundleError, open_bundle, read_header, seal
from buzz.core.event import Event
from buzz.core.keys import generate_secret_key, public_key

AGENT, OWNER, OTHER = (generate_secret_key() for _ in range(3))


def _events() -> list[Event]:
    bodies = [
        engram.CoreBody("I am Ada"),
        engram.MemoryBody("mem/a", "one"),
        engram.MemoryBody("mem/b", None),
    ]
    return [engram.build_event(AGENT, public_key(OWNER), b, 1_700_000_000 + i) for i, b in enumerate(bodies)]


def _key(secret: str, other: str) -> bytes:
    return engram.conversation_key(secret, public_key(other))


def test_agent_and_owner_open_what_the_agent_sealed() -> None:
    events = _events()
    data = seal(AGENT, public_key(OWNER), _key(AGENT, OWNER), events, 1_800_000_000)
    assert b"mem/a" not in data and events[0].content.encode() not in data
    for key in (_key(AGENT, OWNER), _key(OWNER, AGENT)):
        bundle = open_bundle(data, key)
        assert (bundle.agent, bundle.owner, bundle.exported_at) == (
            public_key(AGENT),
            public_key(OWNER),
            1_800_000_000,
        )
        assert list(bundle.events) == events


def test_a_foreign_key_an_altered_header_or_body_is_refused() -> None:
    data = seal(AGENT, public_key(OWNER), _key(AGENT, OWNER), _events(), 1_800_000_000)
    with pytest.raises(BundleError, match="does not open"):
        open_bundle(data, _key(OTHER, AGENT))
    obj = orjson.loads(data)
    for name, value in (("owner", public_key(OTHER)), ("exported_at", 1)):
        with pytest.raises(BundleError, match="signature"):
            open_bundle(orjson.dumps({**obj, name: value}), _key(AGENT, OWNER))
    ciphertext = bytearray(base64.b64decode(obj["ciphertext"]))
    ciphertext[0] ^= 1
    altered = {**obj, "ciphertext": base64.b64encode(bytes(ciphertext)).decode()}
    with pytest.raises(BundleError, match="signature"):
        open_bundle(orjson.dumps(altered), _key(AGENT, OWNER))
    # re-signed by someone else under the agent's name: the signature names the agent
    with pytest.raises(BundleError, match="signature"):
        forged = seal(OTHER, public_key(OWNER), _key(AGENT, OWNER), _events(), 1_800_000_000)
        open_bundle(orjson.dumps({**orjson.loads(forged), "agent": public_key(AGENT)}), _key(AGENT, OWNER))


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (b"not json", "not JSON"),
        (b"[]", "not a buzz-mem-bundle/1"),
        (b'{"format": "buzz-mem-bundle/2"}', "not a buzz-mem-bundle/1"),
        (b'{"format": "buzz-mem-bundle/1", "agent": "zz"}', "agent must be"),
    ],
)
def test_malformed_files_are_refused(data: bytes, reason: str) -> None:
    with pytest.raises(BundleError, match=reason):
        read_header(data)
