"""Cross-check NIP-44 v2 against rust-nostr (nostr-sdk): each side opens the other's payloads.

nostr-sdk is a dev dependency used only as an oracle (libraries.md). The module is skipped when
it is not installed.
"""

from __future__ import annotations

import pytest

from buzz.core import engram, nip44
from buzz.core.keys import generate_secret_key, public_key

nostr_sdk = pytest.importorskip("nostr_sdk")

PLAINTEXTS = [
    "a",
    "hello, agent memory",
    "é😀 and \u0000 controls \n\t",
    "x" * 32,
    "x" * 33,
    "🦄" * 1000,
    "y" * 65535,
]
IDS = ["1-byte", "ascii", "unicode", "32", "33", "4000-byte-emoji", "65535"]


def _sdk_keys(secret: str) -> tuple[object, object]:
    return nostr_sdk.SecretKey.parse(secret), nostr_sdk.PublicKey.parse(public_key(secret))


@pytest.fixture(scope="module")
def pair() -> tuple[str, str]:
    return generate_secret_key(), generate_secret_key()


@pytest.mark.parametrize("plaintext", PLAINTEXTS, ids=IDS)
def test_sdk_opens_our_payloads(pair: tuple[str, str], plaintext: str) -> None:
    ours, theirs = pair
    payload = nip44.encrypt(plaintext, nip44.get_conversation_key(ours, public_key(theirs)))
    their_sk, _ = _sdk_keys(theirs)
    _, our_pk = _sdk_keys(ours)
    assert nostr_sdk.nip44_decrypt(their_sk, our_pk, payload) == plaintext


# nostr-sdk 0.45's encrypt refuses plaintexts above 65,408 bytes ("message too long") although
# NIP-44 allows 65,535 (and it decrypts ours of that size), so this direction stops there.
SDK_MAX_ENCRYPT = 65408
SDK_PLAINTEXTS = [*PLAINTEXTS[:-1], "y" * SDK_MAX_ENCRYPT]
SDK_IDS = [*IDS[:-1], str(SDK_MAX_ENCRYPT)]


@pytest.mark.parametrize("plaintext", SDK_PLAINTEXTS, ids=SDK_IDS)
def test_we_open_sdk_payloads(pair: tuple[str, str], plaintext: str) -> None:
    ours, theirs = pair
    their_sk, _ = _sdk_keys(theirs)
    _, our_pk = _sdk_keys(ours)
    payload = nostr_sdk.nip44_encrypt(their_sk, our_pk, plaintext, nostr_sdk.Nip44Version.V2)
    assert nip44.decrypt(payload, nip44.get_conversation_key(ours, public_key(theirs))) == plaintext


def test_sdk_opens_an_engram_as_the_owner() -> None:
    seckey_a, seckey_o = generate_secret_key(), generate_secret_key()
    body = engram.MemoryBody("mem/notes/x", "remember this")
    event = engram.build_event(seckey_a, public_key(seckey_o), body, 1700000000)
    owner_sk, _ = _sdk_keys(seckey_o)
    _, agent_pk = _sdk_keys(seckey_a)
    assert nostr_sdk.nip44_decrypt(owner_sk, agent_pk, event.content).encode() == engram.encode_body(body)
