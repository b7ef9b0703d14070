"""NIP-19 bech32 entities: npub, nsec, note, nprofile, nevent, naddr.

Shapes (the `data` of `encode` and the second item `decode` returns):

    npub, nsec, note   64 lowercase hex (a public key, a secret key, an event id)
    nprofile           Profile(pubkey, relays)
    nevent             EventPointer(id, relays, author, kind)
    naddr              AddressPointer(identifier, pubkey, kind, relays)

TLV types (NIP-19): 0 special (32 bytes, or the `d` value as UTF-8 for naddr), 1 relay
(UTF-8, repeatable), 2 author (32 bytes), 3 kind (32-bit unsigned big-endian). Unknown TLV
types are ignored on decode. TLVs are written in the order 0, 2, 3, 1 (what nostr-sdk writes),
so encoding a decoded pointer gives back the same string.

The bech32 checksum and 5/8-bit regrouping come from the `bech32` package, whose decoder has
no BIP-173 90-character limit (TLV entities are longer). NIP-19 asks for at most 5000
characters; longer strings are refused here.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from bech32 import bech32_decode, bech32_encode, convertbits

from buzz.core.keys import is_hex

MAX_LENGTH = 5000  # NIP-19: bech32 strings SHOULD be at most 5000 characters

_TLV_SPECIAL, _TLV_RELAY, _TLV_AUTHOR, _TLV_KIND = 0, 1, 2, 3
_BARE = frozenset({"npub", "nsec", "note"})


@dataclass(frozen=True, slots=True)
class Profile:
    """nprofile: a public key (64 hex) and relays where it may be found."""

    pubkey: str
    relays: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class EventPointer:
    """nevent: an event id (64 hex), relays, optional author (64 hex) and kind (None = absent)."""

    id: str
    relays: tuple[str, ...] = ()
    author: str | None = None
    kind: int | None = None


@dataclass(frozen=True, slots=True)
class AddressPointer:
    """naddr: an addressable or replaceable event by `d` value, author (64 hex) and kind.

    `identifier` is the `d` tag value; `""` for a plain replaceable kind.
    """

    identifier: str
    pubkey: str
    kind: int
    relays: tuple[str, ...] = ()


Decoded = str | Profile | EventPointer | AddressPointer


# -- encoding ----------------------------------------------------------------------------------
def _hex32(value: object, what: str) -> bytes:
    if not isinstance(value, str) or not is_hex(value, 64):
        raise ValueError(f"{what} must be 64 lowercase hex characters")
    return bytes.fromhex(value)


def _tlv(kind: int, value: bytes) -> bytes:
    if len(value) > 255:
        raise ValueError(f"TLV {kind} value is {len(value)} bytes, max 255")
    return bytes((kind, len(value))) + value


def _kind_tlv(kind: int) -> bytes:
    if type(kind) is not int or not 0 <= kind <= 0xFFFFFFFF:
        raise ValueError("kind must be an integer between 0 and 2^32-1")
    return _tlv(_TLV_KIND, kind.to_bytes(4, "big"))


def _relay_tlvs(relays: Iterable[str]) -> bytes:
    return b"".join(_tlv(_TLV_RELAY, r.encode("utf-8")) for r in relays)


def _to_bech32(hrp: str, payload: bytes) -> str:
    words = convertbits(payload, 8, 5)
    assert words is not None  # padding on: regrouping 8 -> 5 bits cannot fail
    out = bech32_encode(hrp, words)
    if len(out) > MAX_LENGTH:
        raise ValueError(f"NIP-19 string would be {len(out)} characters, max {MAX_LENGTH}")
    return out


def encode(hrp: str, data: Decoded) -> str:
    """Encode `data` under the NIP-19 prefix `hrp` (see the module docstring for shapes).

    Raises ValueError for an unknown prefix, bad hex, a TLV value over 255 bytes, a kind
    outside 32 bits or a result over MAX_LENGTH; TypeError when `data` has the wrong shape
    for `hrp`.
    """
    if hrp in _BARE:
        if not isinstance(data, str):
            raise TypeError(f"{hrp} data must be a 64-hex str")
        return _to_bech32(hrp, _hex32(data, hrp))
    if hrp == "nprofile":
        if not isinstance(data, Profile):
            raise TypeError("nprofile data must be a Profile")
        payload = _tlv(_TLV_SPECIAL, _hex32(data.pubkey, "pubkey")) + _relay_tlvs(data.relays)
    elif hrp == "nevent":
        if not isinstance(data, EventPointer):
            raise TypeError("nevent data must be an EventPointer")
        payload = _tlv(_TLV_SPECIAL, _hex32(data.id, "id"))
        if data.author is not None:
            payload += _tlv(_TLV_AUTHOR, _hex32(data.author, "author"))
        if data.kind is not None:
            payload += _kind_tlv(data.kind)
        payload += _relay_tlvs(data.relays)
    elif hrp == "naddr":
        if not isinstance(data, AddressPointer):
            raise TypeError("naddr data must be an AddressPointer")
        payload = (
            _tlv(_TLV_SPECIAL, data.identifier.encode("utf-8"))
            + _tlv(_TLV_AUTHOR, _hex32(data.pubkey, "pubkey"))
            + _kind_tlv(data.kind)
            + _relay_tlvs(data.relays)
        )
    else:
        raise ValueError(f"unknown NIP-19 prefix {hrp!r}")
    return _to_bech32(hrp, payload)


def npub(pubkey_hex: str) -> str:
    """The npub of a 64-hex public key."""
    return encode("npub", pubkey_hex)


def nsec(secret_hex: str) -> str:
    """The nsec of a 64-hex secret key."""
    return encode("nsec", secret_hex)


def note(event_id_hex: str) -> str:
    """The note of a 64-hex event id."""
    return encode("note", event_id_hex)


# -- decoding ----------------------------------------------------------------------------------
def _parse_tlv(payload: bytes) -> dict[int, list[bytes]]:
    out: dict[int, list[bytes]] = {}
    i = 0
    while i < len(payload):
        if i + 2 > len(payload):
            raise ValueError("truncated TLV header")
        kind, length = payload[i], payload[i + 1]
        value = payload[i + 2 : i + 2 + length]
        if len(value) != length:
            raise ValueError(f"truncated TLV {kind} value")
        out.setdefault(kind, []).append(value)
        i += 2 + length
    return out


def _first(tlv: dict[int, list[bytes]], kind: int) -> bytes | None:
    values = tlv.get(kind)
    return values[0] if values else None


def _required32(tlv: dict[int, list[bytes]], kind: int, what: str) -> str:
    value = _first(tlv, kind)
    if value is None:
        raise ValueError(f"missing {what} TLV")
    if len(value) != 32:
        raise ValueError(f"{what} TLV must be 32 bytes, got {len(value)}")
    return value.hex()


def _utf8(value: bytes, what: str) -> str:
    try:
        return value.decode("utf-8")
    except UnicodeDecodeError:
        raise ValueError(f"{what} TLV is not valid UTF-8") from None


def _kind(value: bytes) -> int:
    if len(value) != 4:
        raise ValueError(f"kind TLV must be 4 bytes, got {len(value)}")
    return int.from_bytes(value, "big")


def _relays(tlv: dict[int, list[bytes]]) -> tuple[str, ...]:
    return tuple(_utf8(v, "relay") for v in tlv.get(_TLV_RELAY, ()))


def decode(s: str) -> tuple[str, Decoded]:
    """Decode a NIP-19 string into `(hrp, data)` (see the module docstring for shapes).

    A whole-uppercase string is accepted; mixed case is not (BIP-173). Raises ValueError for a
    bad bech32 string or checksum, an unknown prefix, a payload of the wrong size, a missing
    required TLV, or a string over MAX_LENGTH characters.
    """
    if not isinstance(s, str):
        raise TypeError("NIP-19 input must be a str")
    if len(s) > MAX_LENGTH:
        raise ValueError(f"NIP-19 string is {len(s)} characters, max {MAX_LENGTH}")
    hrp, words = bech32_decode(s)
    if hrp is None or words is None:
        raise ValueError("invalid bech32 string (bad character, mixed case or checksum mismatch)")
    regrouped = convertbits(words, 5, 8, False)
    if regrouped is None:
        raise ValueError("invalid bech32 padding")
    payload = bytes(regrouped)
    if hrp in _BARE:
        if len(payload) != 32:
            raise ValueError(f"{hrp} payload must be 32 bytes, got {len(payload)}")
        return hrp, payload.hex()
    if hrp not in ("nprofile", "nevent", "naddr"):
        raise ValueError(f"unknown NIP-19 prefix {hrp!r}")
    tlv = _parse_tlv(payload)
    if hrp == "nprofile":
        return hrp, Profile(_required32(tlv, _TLV_SPECIAL, "pubkey"), _relays(tlv))
    if hrp == "nevent":
        author = _first(tlv, _TLV_AUTHOR)
        if author is not None and len(author) != 32:
            raise ValueError(f"author TLV must be 32 bytes, got {len(author)}")
        kind = _first(tlv, _TLV_KIND)
        return hrp, EventPointer(
            _required32(tlv, _TLV_SPECIAL, "id"),
            _relays(tlv),
            None if author is None else author.hex(),
            None if kind is None else _kind(kind),
        )
    identifier = _first(tlv, _TLV_SPECIAL)
    kind = _first(tlv, _TLV_KIND)
    if identifier is None:
        raise ValueError("missing identifier TLV")
    if kind is None:
        raise ValueError("missing kind TLV")
    return hrp, AddressPointer(
        _utf8(identifier, "identifier"), _required32(tlv, _TLV_AUTHOR, "pubkey"), _kind(kind), _relays(tlv)
    )


def parse_key_text(text: str, kind: str) -> str:
    """A key as people type it → 64 lowercase hex (agents.md §1.1 item 2).

    `kind` is "nsec" (secret key: 64 hex in any case, or `nsec1…`) or "npub" (public key: 64
    hex in any case, or `npub1…`). Surrounding whitespace is ignored. Raises ValueError with a
    reason that never repeats the key.
    """
    value = text.strip()
    prefix = kind + "1"
    if value.startswith(prefix):
        try:
            hrp, data = decode(value)
        except ValueError as exc:
            raise ValueError(f"not a valid {kind}: {exc}") from None
        if hrp != kind or not isinstance(data, str):
            raise ValueError(f"expected an {kind}")
        return data
    if is_hex(value.lower(), 64):
        return value.lower()
    raise ValueError(f"expected 64 hex characters or {prefix}…")
