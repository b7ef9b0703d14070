"""NIP-01 events at the core level: relay.md §2.1–§2.4 and §18 items 1, 2, 3, 6, 8."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from typing import Any

import pytest

from buzz.core.errors import InvalidId, InvalidSignature, MalformedEvent
from buzz.core.event import Event, canonical_bytes, compute_id, verify_event
from buzz.core.stored import (
    StoredEvent,
    UnverifiedEnvelope,
    from_storage,
    relay_signed,
    require_verified,
    verify_stored,
)

SECRET = "0000000000000000000000000000000000000000000000000000000000000003"
AUX = bytes(32)
# BIP-340 vectors 5 and 14: x-only keys that are not curve points (14 exceeds the field size).
OFF_CURVE = [
    "eefdea4cdb677750a420fee807eacf21eb9898ae79b9768766e4faa04a2d4a34",
    "fffffffffffffffffffffffffffffffffffffffffffffffffffffffefffffc30",
]


def _stdlib(pubkey: str, created_at: int, kind: int, tags: Any, content: str) -> bytes:
    """relay.md §2.2 item 4: the reference serialization."""
    text = json.dumps([0, pubkey, created_at, kind, tags, content], ensure_ascii=False, separators=(",", ":"))
    return text.encode("utf-8")


def _event(**overrides: Any) -> dict[str, Any]:
    """A valid event as a decoded JSON object, with some fields replaced."""
    obj = Event.create(SECRET, 1, "hello", [["t", "x"]], created_at=1_700_000_000, aux=AUX).to_dict()
    obj.update(overrides)
    return obj


def _malformed(obj: Any) -> str:
    with pytest.raises(MalformedEvent) as info:
        Event.from_json(obj)
    message = str(info.value)
    assert message.startswith("invalid: malformed event: ")
    return message


# -- §2.2 canonical serialization ----------------------------------------------------------------
ESCAPE_CASES = [
    *[pytest.param(chr(c), id=f"U+{c:04X}") for c in range(0x20)],
    pytest.param('"', id="quote"),
    pytest.param("\\", id="backslash"),
    pytest.param("/", id="slash"),
    pytest.param("\x7f", id="U+007F"),
    pytest.param("\u2028", id="U+2028"),
    pytest.param("\u2029", id="U+2029"),
    pytest.param("😀", id="emoji"),
    pytest.param("é ü 中文 \ufeff \U0010ffff", id="non-ascii"),
    pytest.param('a"b\\c\nd\re\tf\bg\fh\x01i/j\u2028k😀', id="mixed"),
]


@pytest.mark.parametrize("text", ESCAPE_CASES)
def test_canonical_bytes_equal_stdlib(text: str) -> None:
    pubkey = "a" * 64
    tags = [["t", text], [text, "v", text]]
    assert canonical_bytes(pubkey, 1, 1, tags, text) == _stdlib(pubkey, 1, 1, tags, text)


def test_checklist_1_escaped_content_id() -> None:
    content = 'q"b\\n\nr\rt\tb\bf\fc\x01s/ls\u2028e😀'
    ev = Event.create(SECRET, 1, content, created_at=1, aux=AUX)
    serial = _stdlib(ev.pubkey, 1, 1, [], content)
    assert ev.id == hashlib.sha256(serial).hexdigest()
    raw = canonical_bytes(ev.pubkey, 1, 1, (), content)
    assert b'q\\"b\\\\n\\nr\\rt\\tb\\bf\\fc\\u0001s/ls' in raw
    assert "\u2028e😀".encode() in raw


def test_id_is_sha256_of_canonical_bytes() -> None:
    args = ("b" * 64, 1_700_000_000, 30023, (("d", "x"), ("t", "y", "z")), "body")
    assert compute_id(*args) == hashlib.sha256(canonical_bytes(*args)).hexdigest()


def test_sdk_accepts_escaped_event() -> None:
    nostr_sdk = pytest.importorskip("nostr_sdk")
    ev = Event.create(SECRET, 1, 'a"\\\n\x01/\u2028😀\x7f', [["t", "\u2029\x1f"]], created_at=5, aux=AUX)
    sdk_event = nostr_sdk.Event.from_json(ev.to_json())
    assert sdk_event.id().to_hex() == ev.id
    assert sdk_event.verify()


# -- §2.3 verification: two steps, two messages (§18 items 2, 3) ---------------------------------
def test_checklist_2_wrong_id_and_signature() -> None:
    good = Event.from_json(_event())
    wrong_id = "f" * 64
    bad = Event.from_json(_event(id=wrong_id, sig="1" * 128))
    with pytest.raises(InvalidId) as info:
        verify_event(bad)
    assert str(info.value) == f"invalid: invalid event id: computed {good.id}, got {wrong_id}"


def test_checklist_3_bad_signature() -> None:
    ev = Event.from_json(_event(sig="0" * 128))
    with pytest.raises(InvalidSignature) as info:
        verify_event(ev)
    assert str(info.value) == "invalid: invalid schnorr signature"


def test_signature_of_other_event_rejected() -> None:
    other = Event.create(SECRET, 1, "other", created_at=1, aux=AUX)
    with pytest.raises(InvalidSignature):
        verify_event(Event.from_json(_event(sig=other.sig)))


@pytest.mark.parametrize("pubkey", OFF_CURVE, ids=["bip340-row5", "bip340-row14"])
def test_pubkey_not_on_curve_is_invalid_signature(pubkey: str) -> None:
    eid = compute_id(pubkey, 1, 1, (), "")
    ev = Event.from_json(
        {"id": eid, "pubkey": pubkey, "created_at": 1, "kind": 1, "tags": [], "content": "", "sig": "ab" * 64}
    )
    with pytest.raises(InvalidSignature) as info:
        verify_event(ev)
    assert str(info.value) == "invalid: invalid schnorr signature"


def test_create_round_trip() -> None:
    ev = Event.create(SECRET, 30023, "text ✨", [["d", "slug"], ["t", "a", "b"]], created_at=42, aux=AUX)
    again = Event.from_json(json.loads(ev.to_json()))
    assert again == ev
    verify_event(again)
    assert again.d_tag == "slug"
    assert again.tag_values("t") == ["a"]
    assert ev.pubkey == "f9308a019258c31049344f85f89d5229b531c845836f99b08601f113bce036f9"


def test_create_without_aux_verifies() -> None:
    verify_event(Event.create(SECRET, 1, "x"))


# -- §2.1 shape (§18 item 8) -----------------------------------------------------------------------
@pytest.mark.parametrize(
    "created_at",
    [1.0, 1e3, True, False, -1, 2**53, "1", None],
    ids=["float-1.0", "exp-1e3", "true", "false", "negative", "2^53", "string", "null"],
)
def test_created_at_rejected(created_at: object) -> None:
    _malformed(_event(created_at=created_at))


@pytest.mark.parametrize("text", ["1.0", "1e3", "1E3", "true", "-1", "9007199254740992"])
def test_created_at_rejected_from_json_text(text: str) -> None:
    obj = json.loads(json.dumps(_event()).replace('"created_at": 1700000000', f'"created_at": {text}'))
    assert obj["created_at"] != 1_700_000_000
    _malformed(obj)


def test_created_at_bounds_accepted() -> None:
    for value in (0, 2**53 - 1):
        assert Event.from_json(_event(created_at=value)).created_at == value


@pytest.mark.parametrize(
    "kind", [65536, -1, 1.0, True, "1"], ids=["65536", "negative", "float", "bool", "string"]
)
def test_kind_rejected(kind: object) -> None:
    _malformed(_event(kind=kind))


def test_kind_65535_accepted() -> None:
    assert Event.from_json(_event(kind=65535)).kind == 65535


@pytest.mark.parametrize("field", ["id", "pubkey", "sig"])
def test_uppercase_hex_rejected(field: str) -> None:
    obj = _event()
    obj[field] = obj[field].upper()
    _malformed(obj)


@pytest.mark.parametrize(
    ("field", "value"),
    [("id", "a" * 63), ("id", "g" * 64), ("pubkey", "a" * 65), ("sig", "a" * 127), ("id", 5)],
    ids=["id-short", "id-nonhex", "pubkey-long", "sig-short", "id-int"],
)
def test_bad_hex_fields_rejected(field: str, value: object) -> None:
    _malformed(_event(**{field: value}))


@pytest.mark.parametrize(
    "tags",
    [{}, "[]", None, [[]], [["t", 1]], [["t", None]], [["t", ["x"]]], ["t"], [["t"], []]],
    ids=["dict", "string", "null", "inner-empty", "int-element", "null-element", "nested", "flat",
         "second-empty"],
)  # fmt: skip
def test_bad_tags_rejected(tags: object) -> None:
    _malformed(_event(tags=tags))


def test_checklist_8_messages() -> None:
    assert _malformed(_event(created_at=1.0)).startswith("invalid: malformed event:")
    assert _malformed(_event(kind=65536)).startswith("invalid: malformed event:")
    assert _malformed(_event(id=_event()["id"].upper())).startswith("invalid: malformed event:")
    assert _malformed(_event(tags=[["t", 1]])).startswith("invalid: malformed event:")


@pytest.mark.parametrize("where", ["content", "tag"])
def test_lone_surrogate_rejected(where: str) -> None:
    lone = json.loads('"\\ud800"')
    obj = _event(content=lone) if where == "content" else _event(tags=[["t", "a" + lone]])
    message = _malformed(obj)
    assert "surrogate" in message


@pytest.mark.parametrize("missing", ["id", "pubkey", "created_at", "kind", "tags", "content", "sig"])
def test_missing_field_rejected(missing: str) -> None:
    obj = _event()
    del obj[missing]
    assert _malformed(obj) == f"invalid: malformed event: missing field '{missing}'"


@pytest.mark.parametrize("obj", [[], "x", None, 1], ids=["list", "str", "null", "int"])
def test_non_object_rejected(obj: object) -> None:
    _malformed(obj)


def test_content_must_be_string() -> None:
    _malformed(_event(content=1))
    _malformed(_event(content=None))


def test_extra_members_ignored() -> None:
    obj = _event(extra=1, seen_on=["wss://x"], relays={"a": 1})
    ev = Event.from_json(obj)
    verify_event(ev)
    assert set(ev.to_dict()) == {"id", "pubkey", "created_at", "kind", "tags", "content", "sig"}


# -- §2.4 StoredEvent envelope (§18 item 6) ------------------------------------------------------
def test_stored_event_from_client_input_is_unverified() -> None:
    stored = StoredEvent(Event.from_json(_event()))
    assert stored.verified is False
    with pytest.raises(UnverifiedEnvelope):
        require_verified(stored)
    with pytest.raises(UnverifiedEnvelope):
        require_verified(stored.with_channel("c"))


def test_no_public_setter_for_verified() -> None:
    ev = Event.from_json(_event())
    with pytest.raises(TypeError):
        StoredEvent(ev, 0, None, True)  # type: ignore[call-arg]
    with pytest.raises(ValueError):
        dataclasses.replace(StoredEvent(ev), _verified=True)
    with pytest.raises(PermissionError):
        StoredEvent._trusted(object(), ev, 0, None)
    # Frozen and slotted; on 3.11 the frozen check trips over the slots class with a TypeError.
    with pytest.raises((AttributeError, TypeError)):
        StoredEvent(ev).verified = True  # type: ignore[misc]


def test_verify_stored_marks_verified() -> None:
    stored = verify_stored(Event.from_json(_event()), received_at=7)
    assert stored.verified and stored.received_at == 7 and stored.channel_id is None
    require_verified(stored)
    moved = stored.with_channel("chan")
    assert moved.verified and moved.channel_id == "chan"
    require_verified(moved)


def test_verify_stored_raises_on_bad_event() -> None:
    with pytest.raises(InvalidSignature):
        verify_stored(Event.from_json(_event(sig="0" * 128)))
    with pytest.raises(InvalidId):
        verify_stored(Event.from_json(_event(content="changed")))


def test_relay_signed_and_from_storage_are_verified() -> None:
    ev = Event.from_json(_event())
    assert relay_signed(ev, "c").verified
    row = from_storage(ev, 5, "c")
    assert row.verified and row.received_at == 5 and row.channel_id == "c"
