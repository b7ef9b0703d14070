"""BIP-340 reference vectors through `buzz.core.keys` (relay.md §2.3 item 2, §18 item 4)."""

from __future__ import annotations

import csv
import os

import pytest
from coincurve import PrivateKey

from buzz.core import keys
from tests.support.vectors import VECTORS_DIR

VECTORS = VECTORS_DIR

with (VECTORS / "bip340-test-vectors.csv").open(newline="") as fh:
    ROWS = list(csv.DictReader(fh))

SIGNING_ROWS = [r for r in ROWS if r["secret key"]][:4]


def _row_id(row: dict[str, str]) -> str:
    return f"row{row['index']}"


def test_all_rows_present() -> None:
    assert [int(r["index"]) for r in ROWS] == list(range(19))
    assert [int(r["index"]) for r in SIGNING_ROWS] == [0, 1, 2, 3]


@pytest.mark.parametrize("row", ROWS, ids=_row_id)
def test_verify(row: dict[str, str]) -> None:
    # Rows 5 and 14 carry keys that are not on the curve: False, never an exception.
    # Rows 15-18 sign messages of 0, 1, 17 and 100 bytes.
    expected = {"TRUE": True, "FALSE": False}[row["verification result"]]
    got = keys.verify_signature(row["public key"], bytes.fromhex(row["message"]), row["signature"])
    assert got is expected


@pytest.mark.parametrize("row", SIGNING_ROWS, ids=_row_id)
def test_sign_reproduces_signature(row: dict[str, str]) -> None:
    secret = row["secret key"].lower()
    assert keys.public_key(secret) == row["public key"].lower()
    sig = keys.sign(secret, bytes.fromhex(row["message"]), bytes.fromhex(row["aux_rand"]))
    assert sig == row["signature"].lower()


def test_sign_rejects_non_32_byte_message() -> None:
    with pytest.raises(ValueError):
        keys.sign("03".rjust(64, "0"), b"short", bytes(32))


def test_sign_rejects_bad_aux_and_bad_keys() -> None:
    with pytest.raises(ValueError, match="auxiliary"):
        keys.sign("03".rjust(64, "0"), bytes(32), b"short")
    for bad in ("00" * 32, "ff" * 32):  # 0 and a scalar past the group order n
        with pytest.raises(ValueError):
            keys.sign(bad, bytes(32), bytes(32))


def test_sign_agrees_with_coincurve_and_verifies() -> None:
    """Decision 382's direct keypair signing is coincurve's `sign_schnorr` without its rebuild
    and self-check: the same bytes for the same key, message and aux, and each one verifies."""
    for _ in range(50):
        secret, message, aux = keys.generate_secret_key(), os.urandom(32), os.urandom(32)
        sig = keys.sign(secret, message, aux)
        assert sig == PrivateKey(bytes.fromhex(secret)).sign_schnorr(message, aux).hex()
        assert keys.verify_signature(keys.public_key(secret), message, sig)


@pytest.mark.parametrize(
    ("pubkey", "sig"),
    [
        ("zz" * 32, "00" * 64),  # not hex
        ("ab" * 31, "00" * 64),  # short key
        ("ab" * 32, "00" * 63),  # short signature
        (None, "00" * 64),  # wrong type
    ],
    ids=["non-hex-key", "short-key", "short-sig", "none-key"],
)
def test_verify_bad_input_is_false(pubkey: object, sig: str) -> None:
    assert keys.verify_signature(pubkey, bytes(32), sig) is False  # type: ignore[arg-type]
