"""Relay-side huddle settings (huddle.md §2.3–§2.4, §3.2, §9.1, §11.1), as data.

Read once from the environment when the relay starts; tests replace single fields with
`dataclasses.replace`. Times are seconds.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from buzz.core.huddle_wire import (
    AUTH_TIMEOUT,
    HEARTBEAT_INTERVAL,
    MAX_MISSED_PONGS,
    SEAT_FRAME_BURST,
    SEAT_FRAME_RATE,
    SEAT_READ_BURST,
    SEAT_READ_RATE,
)
from buzz.core.mesh_lease import LEASE_RENEW_INTERVAL, LEASE_TTL

_OFF = frozenset({"false", "0"})
_ON = frozenset({"on", "true", "1"})

SPLIT_REASON = (
    "huddle audio is off on this replica: --redis-url without BUZZ_MESH=on would split huddles "
    "(participants on different replicas would not hear each other); set BUZZ_MESH=on, or "
    "BUZZ_HUDDLE_AUDIO_AVAILABLE=true if every huddle's participants reach the same replica"
)


@dataclass(frozen=True, slots=True)
class HuddleSettings:
    """`audio_available`: BUZZ_HUDDLE_AUDIO_AVAILABLE (§9.1: only `false`/`0` turn it off), except
    that replicas (Redis) without the mesh default it to off (`off_reason` says why).

    `community_id` is the workspace (BUZZ_WORKSPACE_ID): the first key of every room (§5.1).
    `mesh` is BUZZ_MESH (parsed by RelayConfig); `lease_ttl_s` / `lease_renew_s` are §9.3/§9.5.
    `seat_frame_*` / `seat_read_*`: each seat's budgets of frames fanned out and messages read
    (issue 24 item 15); `join_limit` joins per `join_window_s` per member (docs/limits.md).
    """

    community_id: str = "default"
    audio_available: bool = True
    auth_timeout_s: float = AUTH_TIMEOUT
    heartbeat_interval_s: float = HEARTBEAT_INTERVAL
    max_missed_pongs: int = MAX_MISSED_PONGS
    mesh: bool = False
    off_reason: str | None = None
    lease_ttl_s: float = LEASE_TTL
    lease_renew_s: float = LEASE_RENEW_INTERVAL
    seat_frame_rate: float = SEAT_FRAME_RATE  # inbound audio frames/s per seat, on average
    seat_frame_burst: float = SEAT_FRAME_BURST  # and at once (docs/limits.md)
    seat_read_rate: float = SEAT_READ_RATE  # inbound messages/s read per seat, on average
    seat_read_burst: float = SEAT_READ_BURST  # and at once
    # Joins per member (pubkey) per window, counted after relay admission (docs/decisions.md
    # 133): each join and leave stores a 48101 and a 48102. Above MAX_PEERS_PER_ROOM (25), since
    # one key may hold several seats (§5.2: devices), and far above a member's reconnects.
    join_limit: int = 60
    join_window_s: float = 60.0

    @classmethod
    def from_env(
        cls,
        community_id: str,
        env: Mapping[str, str] | None = None,
        *,
        replicated: bool = False,
        mesh: bool = False,
    ) -> HuddleSettings:
        """Read §9.1 switches from `env` (default os.environ).

        `replicated` (the relay has a Redis URL) without `mesh`: audio is off unless
        BUZZ_HUDDLE_AUDIO_AVAILABLE says `on`/`true`/`1` explicitly (the operator vouches that each
        huddle's sockets reach one replica); a silent split is never the default.
        """
        env = os.environ if env is None else env
        raw = env.get("BUZZ_HUDDLE_AUDIO_AVAILABLE", "").strip().lower()
        if replicated and not mesh:
            available = raw in _ON
            reason = None if available else SPLIT_REASON
        else:
            available = raw not in _OFF
            reason = None if available else "huddle audio is off: BUZZ_HUDDLE_AUDIO_AVAILABLE=false"
        return cls(community_id=community_id, audio_available=available, mesh=mesh, off_reason=reason)
