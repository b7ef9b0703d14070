"""NIP-17 rumors, seals and gift wraps (`buzz.core.nip59`): each layer checked on unwrap.
nostr-tools' own helper against ours is in tests/interop/test_private_dms.py."""

from __future__ import annotations

import time

import orjson
import pytest

from buzz.core import nip44, nip59
from buzz.core.event import Event
from buzz.core.keys import generate_secret_key, public_key

ALICE, BOB, EVE = generate_secret_key(), generate_secret_key(), generate_secret_key()
A, B = public_key(ALICE), public_key(BOB)


def test_wrap_opens_for_recipient_and_sender_copy_only() -> None:
    rumor = nip59.make_rumor(ALICE, [B], "hello bob", [["e", "ab" * 32]])
    to_bob, to_me = nip59.wrap_message(ALICE, rumor, [B, A])
    now = int(time.time())
    for wrap, receiver, secret in ((to_bob, B, BOB), (to_me, A, ALICE)):
        assert wrap.kind == 1059 and wrap.tag_values("p") == [receiver]
        assert wrap.pubkey not in (A, B)  # a one-time key
        assert now - nip59.RANDOM_PAST_S <= wrap.created_at <= now
        assert "hello" not in wrap.content
        opened = nip59.unwrap(secret, wrap)
        assert opened.rumor == rumor and opened.sender == A and opened.rumor.sig == ""
    assert to_bob.pubkey != to_me.pubkey
    with pytest.raises(nip59.UnwrapError, match="does not open with this key"):
        nip59.unwrap(EVE, to_bob)
    assert nip59.conversation_of(rumor, A) == (B,) and nip59.conversation_of(rumor, B) == (A,)


def _wrap_of(seal: Event, receiver: str) -> Event:
    return nip59.gift_wrap(seal, receiver)


def test_impersonation_and_wrong_layers_are_refused() -> None:
    # Eve seals a rumor that claims to be Alice's: the rumor's author is not the seal's signer.
    forged = nip59.make_rumor(ALICE, [B], "I am alice")
    key = nip44.get_conversation_key(EVE, B)
    bad_seal = Event.create(EVE, 13, nip44.encrypt(orjson.dumps(nip59.rumor_dict(forged)).decode(), key))
    with pytest.raises(nip59.UnwrapError, match="impersonation"):
        nip59.unwrap(BOB, _wrap_of(bad_seal, B))
    # A seal of another kind, a rumor of another kind, a rumor whose id lies.
    rumor = nip59.make_rumor(ALICE, [B], "hi")
    key = nip44.get_conversation_key(ALICE, B)
    not_seal = Event.create(ALICE, 1, nip44.encrypt(orjson.dumps(nip59.rumor_dict(rumor)).decode(), key))
    with pytest.raises(nip59.UnwrapError, match="not a seal"):
        nip59.unwrap(BOB, _wrap_of(not_seal, B))
    other = {**nip59.rumor_dict(rumor), "kind": 1}
    other["id"] = Event.create(ALICE, 1, "hi", rumor.tags, rumor.created_at).id
    with pytest.raises(nip59.UnwrapError, match="not a chat message"):
        nip59.unwrap(
            BOB, _wrap_of(Event.create(ALICE, 13, nip44.encrypt(orjson.dumps(other).decode(), key)), B)
        )
    lying = {**nip59.rumor_dict(rumor), "content": "changed"}
    with pytest.raises(nip59.UnwrapError, match="id does not match"):
        nip59.unwrap(
            BOB, _wrap_of(Event.create(ALICE, 13, nip44.encrypt(orjson.dumps(lying).decode(), key)), B)
        )
    # A wrap whose signature does not verify.
    good = nip59.wrap_message(ALICE, rumor, [B])[0]
    tampered = Event(good.id, good.pubkey, good.created_at, 1059, good.tags, good.content, "00" * 64)
    with pytest.raises(nip59.UnwrapError, match="signature"):
        nip59.unwrap(BOB, tampered)
    with pytest.raises(nip59.UnwrapError, match="not a gift wrap"):
        nip59.unwrap(BOB, Event.create(ALICE, 1, "x"))


def test_rumor_bounds() -> None:
    with pytest.raises(ValueError, match="at least one recipient"):
        nip59.make_rumor(ALICE, [], "x")
    with pytest.raises(ValueError, match="not a secp256k1"):
        nip59.make_rumor(ALICE, ["00" * 32], "x")
    with pytest.raises(ValueError, match="1-30000 bytes"):
        nip59.make_rumor(ALICE, [B], "")
    big = nip59.make_rumor(ALICE, [B], "é" * (nip59.MAX_CONTENT_BYTES // 2))
    (wrap,) = nip59.wrap_message(ALICE, big, [B])  # the largest message still fits NIP-44
    assert nip59.unwrap(BOB, wrap).rumor.content == big.content
    with pytest.raises(ValueError, match="1-30000 bytes"):
        nip59.make_rumor(ALICE, [B], "x" * (nip59.MAX_CONTENT_BYTES + 1))


def test_inbox_relays() -> None:
    ev = Event.create(ALICE, 10050, "", [["relay", "wss://a"], ["relay", "wss://a"], ["relay", "wss://b"]])
    assert nip59.inbox_relays(ev) == ["wss://a", "wss://b"]
