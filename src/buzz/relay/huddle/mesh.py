"""Room ownership across replicas (huddle.md §9.2–§9.5): join resolution against the Redis lease,
the owner registry, the renewer, and the releases.

One `Ownership` per relay (`huddles.mesh`, None when BUZZ_MESH is off). Fail closed: any Redis
error or fence failure during resolution refuses the join with `join_rejected`; a renewal that is
lost or fails closes every local socket of the room, so two owners never serve one room.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass

from redis.exceptions import RedisError

from buzz.core.huddle_control import join_rejected
from buzz.core.mesh_lease import (
    OWNER_READY_ATTEMPTS,
    OWNER_READY_SLEEP,
    RELEASE_ATTEMPTS,
    RELEASE_BACKOFF,
    Lease,
    LocalOwner,
    RemoteOwner,
    Resolution,
    fence_check,
    new_runtime_id,
    resolve,
)
from buzz.relay.huddle.lease_redis import LeaseStore
from buzz.relay.huddle.membership import JoinDenied

log = logging.getLogger(__name__)

RoomKey = tuple[str, str]  # (community_id, channel_id)
LOST_CLOSE = (1012, b"huddle owner lease lost")


@dataclass(eq=False)
class Owned:
    """A room this replica owns: its lease and its single renewer."""

    lease: Lease
    renewer: asyncio.Task[None] | None = None


class Ownership:
    """Resolve, install, renew and release room leases for one replica (`runtime_id`)."""

    def __init__(self, store: LeaseStore, renew_s: float) -> None:
        self.runtime_id = new_runtime_id()
        self.store = store
        self.renew_s = renew_s
        self.owned: dict[RoomKey, Owned] = {}
        self.stats: dict[str, int] = {"mesh_leases_lost_total": 0, "mesh_fence_rejections_total": 0}

    async def resolve(self, community_id: str, channel_id: str) -> Resolution:
        """§9.4. Raises JoinDenied(join_rejected) on a Redis error, a fence failure, a malformed
        lease or when the local owner is not ready after the retry budget."""
        for _ in range(OWNER_READY_ATTEMPTS):
            try:
                resolution = await self._resolve_once(community_id, channel_id)
            except (RedisError, OSError, ValueError) as exc:
                log.warning("huddle lease for %s unavailable, join refused: %s", channel_id, exc)
                raise JoinDenied(join_rejected()) from None
            if isinstance(resolution, RemoteOwner) or resolution.fresh:
                return resolution
            if (community_id, channel_id) in self.owned:
                return resolution
            await asyncio.sleep(OWNER_READY_SLEEP)  # the race winner here is still admitting
        raise JoinDenied(join_rejected())

    async def _resolve_once(self, community_id: str, channel_id: str) -> Resolution:
        lease, counter = await self.store.read(channel_id, community_id)
        acquired = False
        if lease is None:
            lease = await self.store.acquire(channel_id, community_id, self.runtime_id)
            acquired = lease is not None
            if lease is None:  # lost the race: the winner is the owner
                lease, counter = await self.store.read(channel_id, community_id)
                if lease is None:
                    raise ValueError("lease vanished right after another replica acquired it")
        resolution = resolve(self.runtime_id, lease, acquired)
        if isinstance(resolution, RemoteOwner):
            reason = fence_check(lease, lease, counter)
            if reason is not None:
                self.stats["mesh_fence_rejections_total"] += 1
                raise JoinDenied(join_rejected(reason.value))
        return resolution

    def install(self, key: RoomKey, lease: Lease, on_lost: Callable[[], None]) -> None:
        """After the race winner's first admission (§9.5): register the room and start its renewer."""
        owned = Owned(lease)
        owned.renewer = asyncio.get_running_loop().create_task(
            self._renew_loop(key, owned, on_lost), name=f"huddle-lease-{key[1]}"
        )
        self.owned[key] = owned

    def owns(self, key: RoomKey, lease: Lease) -> bool:
        owned = self.owned.get(key)
        return owned is not None and owned.lease == lease

    async def _renew_loop(self, key: RoomKey, owned: Owned, on_lost: Callable[[], None]) -> None:
        community_id, channel_id = key
        while True:
            await asyncio.sleep(self.renew_s)
            try:
                outcome = await self.store.renew(channel_id, community_id, owned.lease)
            except (RedisError, OSError) as exc:
                outcome = f"error: {exc}"
            if outcome != "renewed":
                break
        log.warning("huddle lease for %s lost (%s): closing its sockets", channel_id, outcome)
        self.stats["mesh_leases_lost_total"] += 1
        if self.owned.get(key) is owned:
            del self.owned[key]
        on_lost()
        with contextlib.suppress(RedisError, OSError):
            await self.store.release(channel_id, community_id, owned.lease)

    async def release(self, community_id: str, channel_id: str, lease: Lease) -> None:
        """Give up `lease` (fenced: a newer owner's lease is untouched), stopping its renewer;
        retried RELEASE_ATTEMPTS times with RELEASE_BACKOFF × 2^n (§9.5). A lease never released
        expires after its TTL."""
        key = (community_id, channel_id)
        owned = self.owned.get(key)
        if owned is not None and owned.lease == lease:
            del self.owned[key]
            if owned.renewer is not None:
                owned.renewer.cancel()
        for attempt in range(RELEASE_ATTEMPTS):
            try:
                await self.store.release(channel_id, community_id, lease)
                return
            except (RedisError, OSError):
                await asyncio.sleep(RELEASE_BACKOFF * 2**attempt)
        log.warning("huddle lease for %s not released; it expires after its TTL", channel_id)

    async def close_leases(self) -> None:
        """Drain (§9.5): stop every renewer and release every owned lease now (each bounded to
        1 s), so another replica can take the rooms without waiting for the TTL."""
        for (community_id, channel_id), owned in list(self.owned.items()):
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self.release(community_id, channel_id, owned.lease), 1.0)

    async def close(self) -> None:
        """At shutdown: release every owned lease, then close the Redis client."""
        await self.close_leases()
        await self.store.close()


__all__ = ["LocalOwner", "Ownership", "RemoteOwner"]
