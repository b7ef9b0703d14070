"""Memory bundles (issue 16 item 4): an agent's engram heads, sealed and signed for a move.

A bundle carries the head event of every slug of one `(agent, owner)` pair exactly as the relay
served it (already NIP-44 encrypted and signed by the agent), so nothing in it is re-trusted on
import: every event is verified and opened again. The list of events is sealed with
ChaCha20-Poly1305 under a key derived by HKDF-SHA256 from the pair's NIP-44 conversation key
(info `buzz mem bundle v1`), so the agent and its owner can open it and nobody else can read
even the `d` tags; the header (format, agent, owner, exported_at, nonce) is the associated data.
The agent signs SHA-256(header JSON ‖ ciphertext) with BIP-340, so a bundle that is altered or
signed by anyone else is refused before decryption.

The file is one JSON object:
`{"format": "buzz-mem-bundle/1", "agent", "owner", "exported_at", "nonce", "ciphertext", "sig"}`
(nonce and ciphertext base64, sig 128 hex). A new relay accepts the memory by having the agent
re-sign every head with a fresh `created_at` (`buzz mem import`): the exported events keep
their old timestamps, which a relay's past-drift window (900 s by default) refuses.

Pure: no I/O. Errors: `BundleError` with a reason.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import orjson
from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import ChaCha20Poly1305
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from buzz.core.engram_body import EngramError
from buzz.core.errors import BuzzError
from buzz.core.event import Event
from buzz.core.keys import is_hex, public_key, sign, verify_signature

FORMAT = "buzz-mem-bundle/1"
BUNDLE_MAX_BYTES = 256 * 1024 * 1024  # a larger file is refused before parsing
_INFO = b"buzz mem bundle v1"
_NONCE = 12
_HEADER_FIELDS = ("format", "agent", "owner", "exported_at", "nonce")


class BundleError(EngramError):
    """The bundle is malformed, not signed by its agent, or does not open with this key."""


@dataclass(frozen=True, slots=True)
class Bundle:
    """An opened bundle: whose memory, when it was exported (unix s) and the head events."""

    agent: str
    owner: str
    exported_at: int
    events: tuple[Event, ...]


def _key(conversation_key: bytes) -> bytes:
    kdf = HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=_INFO)
    return kdf.derive(conversation_key)


def _header_bytes(header: dict[str, Any]) -> bytes:
    return orjson.dumps({name: header[name] for name in _HEADER_FIELDS})


def _digest(header: dict[str, Any], ciphertext: bytes) -> bytes:
    return hashlib.sha256(_header_bytes(header) + ciphertext).digest()


def seal(
    agent_secret: str,
    owner: str,
    conversation_key: bytes,
    events: Sequence[Event],
    exported_at: int,
    nonce: bytes | None = None,
) -> bytes:
    """The bundle file (JSON bytes) for `events`, sealed under the pair key and signed by the
    agent whose secret key is `agent_secret` (64 hex). `nonce` (12 bytes) is for tests only."""
    nonce = os.urandom(_NONCE) if nonce is None else nonce
    header: dict[str, Any] = {
        "format": FORMAT,
        "agent": public_key(agent_secret),
        "owner": owner,
        "exported_at": exported_at,
        "nonce": base64.b64encode(nonce).decode(),
    }
    plain = orjson.dumps([e.to_dict() for e in events])
    ciphertext = ChaCha20Poly1305(_key(conversation_key)).encrypt(nonce, plain, _header_bytes(header))
    sig = sign(agent_secret, _digest(header, ciphertext))
    return orjson.dumps({**header, "ciphertext": base64.b64encode(ciphertext).decode(), "sig": sig})


def read_header(data: bytes) -> dict[str, Any]:
    """Parse and check the bundle's outer JSON (no signature or key check yet): the header
    fields plus the decoded `ciphertext` bytes and `sig`. Raises BundleError."""
    if len(data) > BUNDLE_MAX_BYTES:
        raise BundleError(f"bundle larger than {BUNDLE_MAX_BYTES} bytes")
    try:
        obj = orjson.loads(data)
    except orjson.JSONDecodeError:
        raise BundleError("bundle is not JSON") from None
    if not isinstance(obj, dict) or obj.get("format") != FORMAT:
        raise BundleError(f"not a {FORMAT} bundle")
    for name in ("agent", "owner"):
        if not is_hex(obj.get(name), 64):
            raise BundleError(f"bundle {name} must be 64 lowercase hex")
    exported_at = obj.get("exported_at")
    if not isinstance(exported_at, int) or isinstance(exported_at, bool) or exported_at < 0:
        raise BundleError("bundle exported_at must be a non-negative integer")
    if not is_hex(obj.get("sig"), 128):
        raise BundleError("bundle sig must be 128 lowercase hex")
    try:
        nonce = base64.b64decode(obj.get("nonce", ""), validate=True)
        ciphertext = base64.b64decode(obj.get("ciphertext", ""), validate=True)
    except (binascii.Error, TypeError, ValueError):
        raise BundleError("bundle nonce and ciphertext must be base64") from None
    if len(nonce) != _NONCE:
        raise BundleError(f"bundle nonce must be {_NONCE} bytes")
    return {**{n: obj[n] for n in _HEADER_FIELDS}, "ciphertext": ciphertext, "sig": obj["sig"]}


def open_bundle(data: bytes, conversation_key: bytes) -> Bundle:
    """Check the agent's signature, then decrypt with the pair key. The events are parsed but
    NOT verified: open them with `open_candidates`. Raises BundleError."""
    header = read_header(data)
    ciphertext = header["ciphertext"]
    if not verify_signature(header["agent"], _digest(header, ciphertext), header["sig"]):
        raise BundleError("bundle signature does not verify for its agent")
    nonce = base64.b64decode(header["nonce"])
    try:
        plain = ChaCha20Poly1305(_key(conversation_key)).decrypt(nonce, ciphertext, _header_bytes(header))
    except InvalidTag:
        raise BundleError("bundle does not open with this key (another pair's memory?)") from None
    try:
        items = orjson.loads(plain)
        if not isinstance(items, list):
            raise ValueError("not a list")
        events = tuple(Event.from_json(item) for item in items)
    except (orjson.JSONDecodeError, BuzzError, ValueError) as exc:
        raise BundleError(f"bundle content is malformed: {exc}") from None
    return Bundle(header["agent"], header["owner"], header["exported_at"], events)
