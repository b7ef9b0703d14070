"""NIP-44 version 2 encryption (engram.md §2), pure, on `cryptography` and coincurve.

    Nip44Error (ValueError)       every failure here; `.reason` is human-readable
    ├── InvalidKey                a secret key outside [1, n-1] or a peer x that is not on the curve
    ├── InvalidPlaintext          a plaintext whose UTF-8 length is outside 1 … 65535 bytes
    └── Decrypt                   any decryption failure: version, base64, length, MAC, padding, UTF-8

Keys are accepted as 32 bytes or 64 hex characters (either case). The payload is standard
base64 of `0x02 ‖ nonce(32) ‖ ciphertext ‖ mac(32)` (NIP-44 v2).

The ECDH step uses coincurve (`PublicKey.multiply`, about 10 µs) rather than
`cryptography`'s `derive_private_key(...).exchange(...)` (about 700 µs, because it derives the
public key first); both give the same raw, unhashed x coordinate that NIP-44 requires
(libraries.md, "coincurve ecdh trap"). HKDF, ChaCha20 and HMAC come from `cryptography` and the
standard library.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import os
import re
from functools import lru_cache

from coincurve import PublicKey
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms
from cryptography.hazmat.primitives.kdf.hkdf import HKDFExpand

VERSION = 2
SALT = b"nip44-v2"
MIN_PLAINTEXT = 1
MAX_PLAINTEXT = 65535
MIN_PAYLOAD_CHARS = 132
MAX_PAYLOAD_CHARS = 87472
MIN_DATA_BYTES = 99
MAX_DATA_BYTES = 65603

_CURVE_ORDER = 0xFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFEBAAEDCE6AF48A03BBFD25E8CD0364141
_BASE64_SHAPE = re.compile(r"[A-Za-z0-9+/]*={0,2}")


class Nip44Error(ValueError):
    """Base of every NIP-44 failure. `reason` says what went wrong; `str(err)` is the reason."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class InvalidKey(Nip44Error):
    """A secret key that is not 32 bytes in [1, n-1], or a peer pubkey that is not a curve point.

    For a bad peer the reason contains the peer's 64-hex x coordinate (engram.md §2.1).
    """


class InvalidPlaintext(Nip44Error):
    """A plaintext of 0 or more than 65535 UTF-8 bytes, or not encodable as UTF-8 (NIP-44 v2)."""


class Decrypt(Nip44Error):
    """A payload that does not decrypt: version, base64, length, MAC, padding or UTF-8 (§2.5)."""


# -- keys -------------------------------------------------------------------------------------
def _key_bytes(key: str | bytes, what: str) -> bytes:
    if isinstance(key, str):
        if len(key) != 64:
            raise InvalidKey(f"{what} must be 64 hex characters, got {len(key)}")
        try:
            return bytes.fromhex(key)
        except ValueError:
            raise InvalidKey(f"{what} is not hex") from None
    raw = bytes(key)
    if len(raw) != 32:
        raise InvalidKey(f"{what} must be 32 bytes, got {len(raw)}")
    return raw


@lru_cache(maxsize=4096)
def _conversation_key(secret: bytes, peer_x: bytes) -> bytes:
    if not 1 <= int.from_bytes(secret, "big") < _CURVE_ORDER:
        raise InvalidKey("secret key is outside [1, n-1]")
    try:
        point = PublicKey(b"\x02" + peer_x)
    except ValueError:
        raise InvalidKey(f"public key {peer_x.hex()} is not a valid secp256k1 x coordinate") from None
    shared_x = point.multiply(secret).format(compressed=True)[1:]
    return hmac.new(SALT, shared_x, hashlib.sha256).digest()


def get_conversation_key(secret_key: str | bytes, public_key: str | bytes) -> bytes:
    """The 32-byte NIP-44 v2 conversation key of `(secret_key, public_key)` (engram.md §2.1).

    `HMAC-SHA256(key=b"nip44-v2", msg=shared_x)`, where `shared_x` is the raw x coordinate of
    `secret · lift_x(public_key)` (even y), not hashed. Symmetric: `K(a, B) == K(b, A)`.
    Results are cached per (secret, peer).

    Raises InvalidKey for a malformed key, a secret outside [1, n-1], or a peer x that is `≥ p`
    or not on the curve (the reason then names the peer hex).
    """
    return _conversation_key(_key_bytes(secret_key, "secret key"), _key_bytes(public_key, "public key"))


def get_message_keys(conversation_key: str | bytes, nonce: bytes) -> tuple[bytes, bytes, bytes]:
    """`(chacha_key[32], chacha_nonce[12], hmac_key[32])` from HKDF-Expand(K_c, info=nonce, 76).

    Rule source: NIP-44 v2, engram.md §2.2. Raises InvalidKey / Nip44Error for bad lengths.
    """
    prk = _key_bytes(conversation_key, "conversation key")
    if len(nonce) != 32:
        raise Nip44Error(f"nonce must be 32 bytes, got {len(nonce)}")
    keys = HKDFExpand(hashes.SHA256(), 76, nonce).derive(prk)
    return keys[0:32], keys[32:44], keys[44:76]


# -- padding ----------------------------------------------------------------------------------
def calc_padded_len(unpadded_len: int) -> int:
    """Padded plaintext length in bytes for a plaintext of `unpadded_len` bytes (NIP-44 v2, §2.3).

    32 up to 32 bytes; above that, multiples of 32 up to 256 and of `next_power_of_two // 8`
    beyond. Raises Nip44Error when `unpadded_len < 1`.
    """
    if unpadded_len < 1:
        raise Nip44Error(f"expected a positive length, got {unpadded_len}")
    if unpadded_len <= 32:
        return 32
    next_power = 1 << (unpadded_len - 1).bit_length()
    chunk = 32 if next_power <= 256 else next_power // 8
    return chunk * ((unpadded_len - 1) // chunk + 1)


def _pad(plaintext: bytes) -> bytes:
    n = len(plaintext)
    if not MIN_PLAINTEXT <= n <= MAX_PLAINTEXT:
        raise InvalidPlaintext(f"plaintext must be 1..65535 bytes, got {n}")
    return n.to_bytes(2, "big") + plaintext + bytes(calc_padded_len(n) - n)


def _unpad(padded: bytes) -> bytes:
    n = int.from_bytes(padded[0:2], "big")
    if n < MIN_PLAINTEXT or 2 + n > len(padded) or len(padded) != 2 + calc_padded_len(n):
        raise Decrypt("invalid padding")
    return padded[2 : 2 + n]


def _chacha20(key: bytes, nonce12: bytes, data: bytes) -> bytes:
    # cryptography's 16-byte ChaCha20 nonce = 32-bit little-endian counter (0) ‖ 96-bit nonce.
    cipher = Cipher(algorithms.ChaCha20(key, b"\x00" * 4 + nonce12), mode=None)
    return cipher.encryptor().update(data)


def _mac(hmac_key: bytes, nonce: bytes, ciphertext: bytes) -> bytes:
    return hmac.new(hmac_key, nonce + ciphertext, hashlib.sha256).digest()


# -- encrypt / decrypt ------------------------------------------------------------------------
def encrypt(plaintext: str, conversation_key: str | bytes, *, nonce: bytes | None = None) -> str:
    """Encrypt `plaintext` under `conversation_key`; returns the base64 payload (NIP-44 v2, §2.4).

    `nonce` (32 bytes) is a test-only hook for the published vectors; production callers leave
    it None and get a fresh `os.urandom(32)` nonce per call.

    Raises InvalidPlaintext for 0 or more than 65535 UTF-8 bytes (or lone surrogates),
    InvalidKey for a malformed conversation key.
    """
    try:
        raw = plaintext.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidPlaintext("plaintext is not valid Unicode (unpaired surrogate)") from None
    padded = _pad(raw)
    nonce = os.urandom(32) if nonce is None else nonce
    chacha_key, chacha_nonce, hmac_key = get_message_keys(conversation_key, nonce)
    ciphertext = _chacha20(chacha_key, chacha_nonce, padded)
    data = bytes([VERSION]) + nonce + ciphertext + _mac(hmac_key, nonce, ciphertext)
    return base64.b64encode(data).decode("ascii")


def _decode_payload(payload: str) -> bytes:
    if not payload or payload[0] == "#":
        raise Decrypt("unknown encryption version")
    if not MIN_PAYLOAD_CHARS <= len(payload) <= MAX_PAYLOAD_CHARS:
        raise Decrypt(f"invalid payload length: {len(payload)}")
    try:
        data = binascii.a2b_base64(payload.encode("ascii"), strict_mode=True)
    except (UnicodeEncodeError, binascii.Error):
        raise Decrypt("invalid base64") from None
    if not MIN_DATA_BYTES <= len(data) <= MAX_DATA_BYTES:
        raise Decrypt(f"invalid data length: {len(data)}")
    if data[0] != VERSION:
        raise Decrypt(f"unknown encryption version {data[0]}")
    return data


def decrypt(payload: str, conversation_key: str | bytes) -> str:
    """Decrypt a NIP-44 v2 base64 `payload` under `conversation_key` (NIP-44 v2, §2.5).

    The MAC is checked in constant time before anything is decrypted. Raises Decrypt for an
    unsupported version, bad base64, a length outside 132…87472 characters / 99…65603 bytes,
    a MAC mismatch, bad padding or plaintext that is not UTF-8; InvalidKey for a malformed key.
    """
    if not isinstance(payload, str):
        raise Decrypt("payload must be a string")
    data = _decode_payload(payload)
    nonce, ciphertext, mac = data[1:33], data[33:-32], data[-32:]
    chacha_key, chacha_nonce, hmac_key = get_message_keys(conversation_key, nonce)
    if not hmac.compare_digest(mac, _mac(hmac_key, nonce, ciphertext)):
        raise Decrypt("invalid MAC")
    plaintext = _unpad(_chacha20(chacha_key, chacha_nonce, ciphertext))
    try:
        return plaintext.decode("utf-8")
    except UnicodeDecodeError:
        raise Decrypt("plaintext is not valid UTF-8") from None


# -- relay-side plausibility ------------------------------------------------------------------
def is_plausible_nip44_payload(content: str) -> str | None:
    """None when `content` looks like a NIP-44 v2 payload, else the reason (relay.md §9 item 5).

    The relay's ingest check for kinds 30174/44200 (engram.md §11.1): non-empty, only the
    standard base64 alphabet, length a multiple of 4, `=` only as final padding (at most two),
    decoding to at least 99 bytes whose first byte is 0x02. No key is involved, so the MAC and
    the plaintext are not checked. Never raises.
    """
    if not isinstance(content, str) or not content:
        return "content is empty"
    if not _BASE64_SHAPE.fullmatch(content):
        return "content is not standard base64"
    if len(content) % 4:
        return "content length is not a multiple of 4"
    decoded_len = len(content) // 4 * 3 - (len(content) - len(content.rstrip("=")))
    if decoded_len < MIN_DATA_BYTES:
        return f"content decodes to {decoded_len} bytes, fewer than {MIN_DATA_BYTES}"
    if base64.b64decode(content[:4])[0] != VERSION:
        return "content is not a NIP-44 v2 payload (first byte is not 0x02)"
    return None
