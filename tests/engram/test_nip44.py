"""NIP-44 v2: every entry of nip44.vectors.json `v2.valid` and `v2.invalid` (engram.md §2.6),
plus the relay's plausibility check (relay.md §9 item 5) and key-format edges."""

from __future__ import annotations

import base64
import hashlib
from typing import Any

import pytest

from buzz.core import nip44
from buzz.core.keys import public_key
from tests.engram import vectors

V = vectors.nip44()
VALID = V["valid"]
INVALID = V["invalid"]


def _ids(prefix: str, items: list[Any]) -> list[str]:
    return [f"{prefix}-{i}" for i in range(len(items))]


# -- v2.valid -----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "case", VALID["get_conversation_key"], ids=_ids("conv", VALID["get_conversation_key"])
)
def test_valid_get_conversation_key(case: dict[str, str]) -> None:
    key = nip44.get_conversation_key(case["sec1"], case["pub2"])
    assert key.hex() == case["conversation_key"]


MESSAGE_KEYS = VALID["get_message_keys"]


@pytest.mark.parametrize("case", MESSAGE_KEYS["keys"], ids=_ids("msgkeys", MESSAGE_KEYS["keys"]))
def test_valid_get_message_keys(case: dict[str, str]) -> None:
    chacha_key, chacha_nonce, hmac_key = nip44.get_message_keys(
        MESSAGE_KEYS["conversation_key"], bytes.fromhex(case["nonce"])
    )
    assert (chacha_key.hex(), chacha_nonce.hex(), hmac_key.hex()) == (
        case["chacha_key"],
        case["chacha_nonce"],
        case["hmac_key"],
    )


@pytest.mark.parametrize(
    "case", VALID["calc_padded_len"], ids=[f"len-{c[0]}" for c in VALID["calc_padded_len"]]
)
def test_valid_calc_padded_len(case: list[int]) -> None:
    assert nip44.calc_padded_len(case[0]) == case[1]


@pytest.mark.parametrize("case", VALID["encrypt_decrypt"], ids=_ids("encdec", VALID["encrypt_decrypt"]))
def test_valid_encrypt_decrypt(case: dict[str, str]) -> None:
    key = nip44.get_conversation_key(case["sec1"], public_key(case["sec2"]))
    assert key.hex() == case["conversation_key"]
    # Symmetric: the other side derives the same key.
    assert nip44.get_conversation_key(case["sec2"], public_key(case["sec1"])) == key
    payload = nip44.encrypt(case["plaintext"], key, nonce=bytes.fromhex(case["nonce"]))
    assert payload == case["payload"]
    assert nip44.decrypt(case["payload"], key) == case["plaintext"]


LONG = VALID["encrypt_decrypt_long_msg"]


@pytest.mark.parametrize("case", LONG, ids=[f"long-{c['pattern']}x{c['repeat']}" for c in LONG])
def test_valid_encrypt_decrypt_long_msg(case: dict[str, Any]) -> None:
    plaintext = case["pattern"] * case["repeat"]
    assert hashlib.sha256(plaintext.encode()).hexdigest() == case["plaintext_sha256"]
    key = bytes.fromhex(case["conversation_key"])
    payload = nip44.encrypt(plaintext, key, nonce=bytes.fromhex(case["nonce"]))
    assert hashlib.sha256(payload.encode()).hexdigest() == case["payload_sha256"]
    assert nip44.decrypt(payload, key) == plaintext


# -- v2.invalid ---------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "length", INVALID["encrypt_msg_lengths"], ids=[f"len-{n}" for n in INVALID["encrypt_msg_lengths"]]
)
def test_invalid_encrypt_msg_lengths(length: int) -> None:
    with pytest.raises(nip44.InvalidPlaintext):
        nip44.encrypt("a" * length, bytes(32))


@pytest.mark.parametrize(
    "case", INVALID["get_conversation_key"], ids=[c["note"] for c in INVALID["get_conversation_key"]]
)
def test_invalid_get_conversation_key(case: dict[str, str]) -> None:
    with pytest.raises(nip44.InvalidKey):
        nip44.get_conversation_key(case["sec1"], case["pub2"])


@pytest.mark.parametrize("case", INVALID["decrypt"], ids=_ids("decrypt", INVALID["decrypt"]))
def test_invalid_decrypt(case: dict[str, str]) -> None:
    with pytest.raises(nip44.Decrypt):
        nip44.decrypt(case["payload"], case["conversation_key"])


# -- behaviour beyond the vector file (engram.md §2, §15.3 items 2–3) ---------------------------
K = bytes.fromhex("c41c775356fd92eadc63ff5a0dc1da211b268cbea22316767095b2871ea1412d")


def test_fresh_nonce_per_encryption() -> None:
    a, b = nip44.encrypt("same body", K), nip44.encrypt("same body", K)
    assert a != b
    assert nip44.decrypt(a, K) == nip44.decrypt(b, K) == "same body"


def test_flipped_ciphertext_bit_fails_the_mac() -> None:
    data = bytearray(base64.b64decode(nip44.encrypt("x" * 40, K)))
    data[40] ^= 1
    with pytest.raises(nip44.Decrypt, match="MAC"):
        nip44.decrypt(base64.b64encode(bytes(data)).decode(), K)


def test_wrong_key_fails_the_mac() -> None:
    with pytest.raises(nip44.Decrypt, match="MAC"):
        nip44.decrypt(nip44.encrypt("secret", K), bytes(32))


def test_keys_accept_bytes_and_hex_of_either_case() -> None:
    sec, pub = "00" * 31 + "01", "c6047f9441ed7d6d3045406e95c07cd85c778e4b8cef3ca7abac09b95c709ee5"
    assert nip44.get_conversation_key(bytes.fromhex(sec), bytes.fromhex(pub)) == K
    assert nip44.get_conversation_key(sec, pub.upper()) == K
    assert nip44.decrypt(nip44.encrypt("hi", K.hex()), K) == "hi"


@pytest.mark.parametrize(
    "bad", ["00" * 31, "zz" * 32, b"\x01" * 31], ids=["short-hex", "non-hex", "short-bytes"]
)
def test_malformed_keys_raise_invalid_key(bad: str | bytes) -> None:
    with pytest.raises(nip44.InvalidKey):
        nip44.get_conversation_key(bad, "79be667ef9dcbbac55a06295ce870b07029bfcdb2dce28d959f2815b16f81798")


def test_off_curve_peer_names_the_hex() -> None:
    peer = "00" * 31 + "05"
    with pytest.raises(nip44.InvalidKey, match=peer):
        nip44.get_conversation_key("00" * 31 + "01", peer)


def test_errors_are_value_errors_with_a_reason() -> None:
    with pytest.raises(ValueError) as info:
        nip44.decrypt("", K)
    assert isinstance(info.value, nip44.Nip44Error)
    assert info.value.reason == "unknown encryption version"


def test_lone_surrogate_plaintext_is_refused() -> None:
    with pytest.raises(nip44.InvalidPlaintext):
        nip44.encrypt("\ud800", K)


def test_non_utf8_plaintext_fails_decrypt() -> None:
    # Encrypt raw bytes that are not UTF-8 by going through the private helpers' public twin.
    nonce = bytes(32)
    chacha_key, chacha_nonce, hmac_key = nip44.get_message_keys(K, nonce)
    padded = (2).to_bytes(2, "big") + b"\xff\xfe" + bytes(30)
    ct = nip44._chacha20(chacha_key, chacha_nonce, padded)
    payload = base64.b64encode(b"\x02" + nonce + ct + nip44._mac(hmac_key, nonce, ct)).decode()
    with pytest.raises(nip44.Decrypt, match="UTF-8"):
        nip44.decrypt(payload, K)


# -- relay-side plausibility (relay.md §9 item 5, engram.md §11.1) ------------------------------
GOOD_PAYLOAD = nip44.encrypt("a", K)
PLAUSIBILITY_CASES: list[tuple[str, str, str | None]] = [
    ("real-payload", GOOD_PAYLOAD, None),
    ("empty", "", "empty"),
    ("url-safe-alphabet", "-_" + GOOD_PAYLOAD[2:], "base64"),
    ("whitespace", GOOD_PAYLOAD[:-4] + " " + GOOD_PAYLOAD[-3:], "base64"),
    ("not-multiple-of-4", GOOD_PAYLOAD + "AAA", "multiple of 4"),
    ("padding-in-middle", "AA==" + GOOD_PAYLOAD[4:], "base64"),
    ("three-pad-chars", "A" * 129 + "===", "base64"),
    ("too-short", base64.b64encode(b"\x02" * 98).decode(), "fewer than 99"),
    ("min-length-ok", base64.b64encode(b"\x02" * 99).decode(), None),
    ("wrong-version", base64.b64encode(b"\x01" * 99).decode(), "0x02"),
    ("non-ascii", "é" * 132, "base64"),
    ("trailing-newline", GOOD_PAYLOAD + "\n", "base64"),
]


@pytest.mark.parametrize(
    ("content", "reason"), [c[1:] for c in PLAUSIBILITY_CASES], ids=[c[0] for c in PLAUSIBILITY_CASES]
)
def test_is_plausible_nip44_payload(content: str, reason: str | None) -> None:
    got = nip44.is_plausible_nip44_payload(content)
    if reason is None:
        assert got is None
    else:
        assert got is not None and reason in got
