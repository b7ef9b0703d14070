"""Load the published vector files (engram.md §15.2) from tests/vectors/."""

from __future__ import annotations

import json
from functools import cache
from typing import Any

from tests.support.vectors import VECTORS_DIR


@cache
def load(name: str) -> Any:
    """The decoded JSON vector file `name` (cached; treat as read-only)."""
    return json.loads((VECTORS_DIR / name).read_text(encoding="utf-8"))


def nip44() -> dict[str, Any]:
    return load("nip44.vectors.json")["v2"]


def nip_ae() -> dict[str, Any]:
    return load("nip-ae-vectors.json")


def nip_oa() -> dict[str, Any]:
    return load("nip-oa-vectors.json")
