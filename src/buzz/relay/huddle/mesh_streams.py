"""The control streams of remote peers (huddle.md §9.6): one per remote client socket, an
`OwnerStream` on the owner's replica and an `IngressStream` on the client's, with the `fenced`
field every message on them carries and this project's `goodbye` reasons."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from buzz.core.mesh_lease import Lease
from buzz.relay.huddle.fanout import PeerSink

if TYPE_CHECKING:
    from buzz.relay.huddle.rooms import RoomSlot

# `goodbye` reasons of this project beyond §9.6's three (docs/decisions.md): the owner dropped
# the stream's seat because its participant lost access to the channel or was banned. An
# ingress replica that does not know them tears the stream down as for any `goodbye`.
GOODBYE_REVOKED = "access_revoked"
GOODBYE_BANNED = "banned"
GOODBYE_ENDED = "huddle_ended"  # the huddle's channel was archived while the seat was held
# Each reason → the seat method that ends it, on the owner (`RemoteSeat`) and on the ingress
# replica's client socket (`AudioSocket`): both name them alike.
SEAT_ENDINGS = {GOODBYE_REVOKED: "revoke", GOODBYE_BANNED: "ban", GOODBYE_ENDED: "end"}


def fenced_field(session: str, lease: Lease) -> dict[str, Any]:
    return {"session_id": session, "generation": lease.generation, "owner": lease.owner}


@dataclass(eq=False)
class OwnerStream:
    stream: str
    sender: str
    session: str
    lease: Lease
    community: str | None = None
    slot: RoomSlot | None = None
    peer_id: str | None = None
    peer_index: int | None = None
    lifecycle_parent: str | None = None  # where 48103 goes if this peer leaves the room last
    pubkey: str | None = None
    last_seen: float = field(default_factory=time.monotonic)


@dataclass(eq=False)
class IngressStream:
    """One local client's registration at a remote owner."""

    stream: str
    session: str
    lease: Lease
    community: str
    pubkey: str
    lifecycle_parent: str
    answer: asyncio.Future[dict[str, Any]] = field(
        default_factory=lambda: asyncio.get_running_loop().create_future()
    )
    roster: dict[int, str] = field(default_factory=dict)  # index → pubkey, as the owner says
    revision: int = 0
    peer_index: int | None = None
    sink: PeerSink | None = None
    version: int = 2
    seq: int = 0
    closed: bool = False
    fixed: bytes = b""  # the ingress envelopes' per-stream bytes (`fixed_part`), packed once
