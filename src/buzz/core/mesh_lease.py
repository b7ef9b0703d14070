"""The huddle mesh's fenced lease, without I/O (huddle.md §9.3–§9.5).

Redis holds, per session (`channel_id`) and community, a lease `<owner runtime hex>|<generation>|
huddle-control` with a TTL and a generation counter that never expires. This module names the
keys, formats and parses the value, decides the fence check and join resolution from what Redis
returned, and keeps the per-session generation floor. The relay's `lease_redis` runs the scripts.
"""

from __future__ import annotations

import enum
import secrets
from dataclasses import dataclass

LEASE_TTL = 30.0  # s, §9.3 (PX)
LEASE_RENEW_INTERVAL = 10.0  # s, §9.5
PROFILE = "huddle-control"
OWNER_READY_ATTEMPTS, OWNER_READY_SLEEP = 25, 0.02  # §9.4 owner-ready retry (~500 ms)
RELEASE_ATTEMPTS, RELEASE_BACKOFF = 5, 0.025  # §9.5: 25 ms × 2^n


def new_runtime_id() -> str:
    """32 random bytes as 64 lowercase hex, drawn at every process start (§9.2)."""
    return secrets.token_hex(32)


def lease_keys(session_id: str, community_id: str) -> tuple[str, str]:
    """(lease key, generation key); the braced session is the cluster hash tag (§9.3)."""
    prefix = f"buzz:{{{session_id}}}:{community_id}:tunnel"
    return f"{prefix}:lease", f"{prefix}:generation"


@dataclass(frozen=True, slots=True)
class Lease:
    owner: str  # runtime id, 64 lowercase hex
    generation: int  # ≥ 1

    def value(self) -> str:
        return f"{self.owner}|{self.generation}|{PROFILE}"


def _is_runtime(text: str) -> bool:
    return len(text) == 64 and all(c in "0123456789abcdef" for c in text)


def parse_lease(raw: bytes | str | None) -> Lease | None:
    """The stored value → Lease; None when absent. Raises ValueError for a malformed value
    (bad hex, generation 0 or not a number, another profile): the caller treats it as a fence
    failure, never as "no lease"."""
    if raw is None:
        return None
    text = raw.decode() if isinstance(raw, bytes) else raw
    parts = text.split("|")
    if len(parts) != 3 or parts[2] != PROFILE or not _is_runtime(parts[0]) or not parts[1].isdigit():
        raise ValueError(f"malformed lease value {text!r}")
    generation = int(parts[1])
    if generation == 0:
        raise ValueError("malformed lease value: generation 0")
    return Lease(parts[0], generation)


class FenceReason(enum.StrEnum):
    STALE_GENERATION = "stale_generation"
    NO_ACTIVE_LEASE = "no_active_lease"
    FUTURE_GENERATION = "future_generation"
    OWNER_MISMATCH = "owner_mismatch"


def fence_check(claimed: Lease, lease: Lease | None, counter: int) -> FenceReason | None:
    """§9.3 fence check of a claimed (generation, owner) against the stored lease and generation
    counter, in the spec's order; None = passes."""
    known = max(lease.generation if lease else 0, counter)
    if known > 0 and claimed.generation < known:
        return FenceReason.STALE_GENERATION
    if lease is None:
        return FenceReason.NO_ACTIVE_LEASE
    if claimed.generation != lease.generation:
        return FenceReason.FUTURE_GENERATION
    if claimed.owner != lease.owner:
        return FenceReason.OWNER_MISMATCH
    return None


@dataclass(frozen=True, slots=True)
class LocalOwner:
    """This replica owns the session. `fresh`: this call won the acquire race (it must install
    the renewer after admission, or release at once)."""

    lease: Lease
    fresh: bool


@dataclass(frozen=True, slots=True)
class RemoteOwner:
    lease: Lease


Resolution = LocalOwner | RemoteOwner


def resolve(runtime_id: str, lease: Lease, acquired: bool) -> Resolution:
    """§9.4 steps 1–3 once the lease is known (after acquire or a re-read): the caller fence-checks
    a RemoteOwner before routing to it."""
    if lease.owner == runtime_id:
        return LocalOwner(lease, fresh=acquired)
    return RemoteOwner(lease)


class GenerationFloor:
    """§9.8: per session, the first generation seen is recorded, equal or higher passes (higher
    raises the floor), lower is dropped and counted in `dropped`."""

    def __init__(self) -> None:
        self._floor: dict[str, int] = {}
        self.dropped = 0

    def admit(self, session_id: str, generation: int) -> bool:
        floor = self._floor.get(session_id)
        if floor is not None and generation < floor:
            self.dropped += 1
            return False
        self._floor[session_id] = generation
        return True

    def forget(self, session_id: str) -> None:
        self._floor.pop(session_id, None)
