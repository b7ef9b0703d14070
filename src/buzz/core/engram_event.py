"""Engram events: the conversation key, `d` addresses, building and opening kind 30174 events.

Rule source: engram.md §2 (NIP-44 v2), §4 (addressing), §5 (event shape), §7
(`validate_and_decrypt`). Pure: no I/O, no clock. Re-exported by `buzz.core.engram`.
"""

from __future__ import annotations

import hashlib
import hmac

from buzz.core import nip44
from buzz.core.engram_body import (
    D_DOMAIN,
    KIND_ENGRAM,
    Body,
    Decrypt,
    InvalidEnvelope,
    InvalidKey,
    decode_body,
    encode_body,
    validate_slug,
)
from buzz.core.event import Event
from buzz.core.keys import is_hex


def conversation_key(my_seckey: str | bytes, their_pubkey: str | bytes) -> bytes:
    """`K_c`, the 32-byte NIP-44 v2 conversation key of the pair (engram.md §2.1), cached.

    The agent calls it with `(seckey_a, pubkey_o)`, the owner with `(seckey_o, pubkey_a)`; both
    get the same key. Raises InvalidKey (an EngramError and a nip44.InvalidKey) for a
    malformed key or a peer that is not a curve point, naming the peer hex.
    """
    try:
        return nip44.get_conversation_key(my_seckey, their_pubkey)
    except nip44.InvalidKey as exc:
        raise InvalidKey(exc.reason) from None


def d_tag(conversation_key: bytes, slug: str) -> str:
    """The address `d` of `slug`: 64 lowercase hex of HMAC-SHA256(K_c, D_DOMAIN ‖ 0x00 ‖ slug) (§4).

    `slug` is validated, never normalized. Raises InvalidSlug.
    """
    validate_slug(slug)
    return hmac.new(conversation_key, D_DOMAIN + b"\x00" + slug.encode("ascii"), hashlib.sha256).hexdigest()


def build_event(
    agent_keys: str | bytes,
    owner_pubkey: str,
    body: Body,
    created_at: int,
    *,
    nonce: bytes | None = None,
    aux: bytes | None = None,
) -> Event:
    """Build and sign the kind 30174 event that stores `body` (engram.md §5.1).

    `agent_keys` is the agent's secret key (64 hex or 32 bytes); `owner_pubkey` is 64 hex
    (written lowercased in `p`); `created_at` is unix seconds (see `monotonic_created_at`).
    Tags are exactly `[["d", d], ["p", owner]]`; content is NIP-44 v2 of `encode_body(body)`
    under `K_c`. `nonce` (32 bytes) and `aux` (32 bytes) are test-only hooks that pin the
    NIP-44 nonce and the BIP-340 aux randomness; production leaves both None (fresh random).

    Order: serialize (BodyTooLarge), derive `K_c` (InvalidKey for a bad or off-curve owner,
    never a crash), derive `d`, encrypt, sign.
    """
    plaintext = encode_body(body)
    owner = owner_pubkey.lower() if isinstance(owner_pubkey, str) else ""
    if not is_hex(owner, 64):
        raise InvalidKey("owner pubkey must be 64 hex characters")
    key = conversation_key(agent_keys, owner)
    content = nip44.encrypt(plaintext.decode("utf-8"), key, nonce=nonce)
    tags = (("d", d_tag(key, body.slug)), ("p", owner))
    return Event.create(agent_keys, KIND_ENGRAM, content, tags, created_at, aux)


def _single_tag_value(event: Event, name: str) -> str:
    tags = [t for t in event.tags if t and t[0] == name]
    if len(tags) > 1:
        raise InvalidEnvelope(f"multiple {name} tags")
    if not tags or len(tags[0]) < 2:
        raise InvalidEnvelope(f"missing {name} tag")
    return tags[0][1]


def validate_and_decrypt(
    event: Event,
    expected_agent: str,
    expected_owner: str,
    my_seckey: str | bytes,
    their_pubkey: str | bytes,
) -> Body:
    """Check an engram event's envelope, decrypt it and return its body (engram.md §7).

    `expected_agent` is always pubkey_a and `expected_owner` always pubkey_o; the agent passes
    `(seckey_a, pubkey_o)` as `(my_seckey, their_pubkey)`, the owner `(seckey_o, pubkey_a)`.
    Does NOT verify the id or signature: callers verify first (§8 step 2).

    Checks, in order: kind 30174; author; exactly one `d` tag with a value; `d` is 64 lowercase
    hex; exactly one `p` tag with a value; `p` equals the owner (case-insensitive); decrypt
    (Decrypt on any failure, off-curve peer included); `decode_body` (InvalidBody /
    InvalidSlug); the body's slug re-derives to `d` (InvalidEnvelope).
    Raises InvalidEnvelope, Decrypt, InvalidBody or InvalidSlug.
    """
    if event.kind != KIND_ENGRAM:
        raise InvalidEnvelope(f"wrong kind: {event.kind}")
    if not isinstance(expected_agent, str) or event.pubkey != expected_agent.lower():
        raise InvalidEnvelope("event author is not the expected agent")
    d_value = _single_tag_value(event, "d")
    if not is_hex(d_value, 64):
        raise InvalidEnvelope("d tag must be 64 lowercase hex characters")
    p_value = _single_tag_value(event, "p")
    if not isinstance(expected_owner, str) or p_value.lower() != expected_owner.lower():
        raise InvalidEnvelope("p tag is not the expected owner")
    try:
        key = nip44.get_conversation_key(my_seckey, their_pubkey)
        plaintext = nip44.decrypt(event.content, key)
    except nip44.Nip44Error as exc:
        raise Decrypt(f"content is not decryptable: {exc.reason}") from None
    body = decode_body(plaintext)
    if d_tag(key, body.slug) != d_value:
        raise InvalidEnvelope("body slug does not re-derive to d tag")
    return body
