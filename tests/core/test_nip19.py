"""NIP-19 vectors both directions, checksum rejection, unknown TLVs ignored."""

from __future__ import annotations

import json
from typing import Any

import pytest
from bech32 import bech32_encode, convertbits

from buzz.core import nip19
from buzz.core.nip19 import AddressPointer, EventPointer, Profile
from tests.support.vectors import VECTORS_DIR

VECTORS = VECTORS_DIR
DATA: dict[str, Any] = json.loads((VECTORS / "nip19.vectors.json").read_text())

PK = "3bf0c63fcb93463407af97a5e5ee64fa883d107ef9e558472c4eb9aaaefa459d"
EID = "5c83da77af1dec6d7289834998ad7aafbd9e2191396d75ec3cc27f5a77226f36"


def _expected(hrp: str, entry: dict[str, Any]) -> nip19.Decoded:
    if hrp in ("npub", "nsec", "note"):
        return entry["hex"]
    if hrp == "nprofile":
        return Profile(entry["pubkey"], tuple(entry["relays"]))
    if hrp == "nevent":
        return EventPointer(entry["id"], tuple(entry["relays"]), entry.get("author"), entry.get("kind"))
    return AddressPointer(entry["identifier"], entry["pubkey"], entry["kind"], tuple(entry["relays"]))


CASES = [
    pytest.param(hrp, entry, id=f"{hrp}-{i}")
    for hrp in ("npub", "nsec", "note", "nprofile", "nevent", "naddr")
    for i, entry in enumerate(DATA[hrp])
]
INVALID = [pytest.param(e["bech32"], id=f"invalid-{i}") for i, e in enumerate(DATA["invalid"])]


def _raw(hrp: str, payload: bytes) -> str:
    words = convertbits(payload, 8, 5)
    assert words is not None
    return bech32_encode(hrp, words)


def test_every_section_has_entries() -> None:
    assert len(CASES) == 8
    assert INVALID


@pytest.mark.parametrize(("hrp", "entry"), CASES)
def test_decode(hrp: str, entry: dict[str, Any]) -> None:
    assert nip19.decode(entry["bech32"]) == (hrp, _expected(hrp, entry))


@pytest.mark.parametrize(("hrp", "entry"), CASES)
def test_encode(hrp: str, entry: dict[str, Any]) -> None:
    assert nip19.encode(hrp, _expected(hrp, entry)) == entry["bech32"]


@pytest.mark.parametrize("bad", INVALID)
def test_invalid_rejected(bad: str) -> None:
    with pytest.raises(ValueError, match="checksum"):
        nip19.decode(bad)


def test_uppercase_accepted_mixed_case_rejected() -> None:
    s = nip19.npub(PK)
    assert nip19.decode(s.upper()) == ("npub", PK)
    with pytest.raises(ValueError):
        nip19.decode(s[:10].upper() + s[10:])


def test_convenience_helpers() -> None:
    assert nip19.npub(PK) == DATA["npub"][0]["bech32"]
    assert nip19.nsec(DATA["nsec"][0]["hex"]) == DATA["nsec"][0]["bech32"]
    assert nip19.note(EID) == DATA["note"][0]["bech32"]


def test_unknown_tlv_ignored() -> None:
    # nprofile with an unknown type 9 before and a type 200 after the known TLVs.
    payload = (
        bytes([9, 3])
        + b"xyz"
        + bytes([0, 32])
        + bytes.fromhex(PK)
        + bytes([1, 5])
        + b"wss:/"
        + bytes([200, 0])
    )
    assert nip19.decode(_raw("nprofile", payload)) == ("nprofile", Profile(PK, ("wss:/",)))
    payload = bytes([0, 32]) + bytes.fromhex(EID) + bytes([7, 2, 1, 2])
    assert nip19.decode(_raw("nevent", payload)) == ("nevent", EventPointer(EID))


def test_long_strings_over_90_chars() -> None:
    relays = tuple(f"wss://relay{i}.example.com" for i in range(20))
    s = nip19.encode("nprofile", Profile(PK, relays))
    assert len(s) > 90
    assert nip19.decode(s) == ("nprofile", Profile(PK, relays))


def test_naddr_unicode_identifier_round_trip() -> None:
    ptr = AddressPointer("réunion ✨", PK, 30023)
    assert nip19.decode(nip19.encode("naddr", ptr)) == ("naddr", ptr)


@pytest.mark.parametrize(
    ("hrp", "payload", "why"),
    [
        ("npub", bytes(31), "32 bytes"),
        ("nprofile", bytes([1, 3]) + b"wss", "missing pubkey"),
        ("nprofile", bytes([0, 31]) + bytes(31), "32 bytes"),
        ("nevent", bytes([0, 32]) + bytes(32) + bytes([3, 2, 0, 1]), "4 bytes"),
        ("naddr", bytes([0, 1]) + b"x" + bytes([2, 32]) + bytes(32), "missing kind"),
        ("naddr", bytes([0, 1]) + b"x" + bytes([3, 4, 0, 0, 0, 1]), "missing pubkey"),
        ("nprofile", bytes([0, 32]) + bytes(10), "truncated"),
        ("nfoo", bytes(32), "unknown NIP-19 prefix"),
    ],
    ids=["npub-short", "nprofile-no-pubkey", "nprofile-short", "nevent-kind-2b", "naddr-no-kind",
         "naddr-no-pubkey", "truncated-tlv", "unknown-hrp"],
)  # fmt: skip
def test_bad_payload_rejected(hrp: str, payload: bytes, why: str) -> None:
    with pytest.raises(ValueError, match=why):
        nip19.decode(_raw(hrp, payload))


def test_encode_errors() -> None:
    with pytest.raises(ValueError):
        nip19.npub(PK.upper())
    with pytest.raises(ValueError):
        nip19.encode("nfoo", PK)
    with pytest.raises(TypeError):
        nip19.encode("nprofile", PK)
    with pytest.raises(ValueError, match="max 255"):
        nip19.encode("naddr", AddressPointer("x" * 256, PK, 30023))
    with pytest.raises(ValueError, match="2\\^32"):
        nip19.encode("nevent", EventPointer(EID, kind=2**32))


def test_too_long_rejected() -> None:
    with pytest.raises(ValueError, match="max 5000"):
        nip19.decode("npub1" + "q" * 5000)
