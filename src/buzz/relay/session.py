"""Who is asking, and over what: the facts gates read about a request (khatru-style accessors)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Transport = Literal["ws", "http"]


@dataclass(frozen=True, slots=True)
class Session:
    """`pubkey` is the authenticated key (None before NIP-42/NIP-98 succeeds)."""

    pubkey: str | None
    transport: Transport = "ws"
