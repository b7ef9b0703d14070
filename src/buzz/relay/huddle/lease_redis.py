"""The three lease scripts of huddle.md §9.3 on Redis, and the reads the fence check needs.

Thin on purpose: every decision (value format, fence order, join resolution) is in
`buzz.core.mesh_lease`. Each script is atomic over the session's lease and generation keys.
"""

from __future__ import annotations

import re

from redis.asyncio import Redis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff

from buzz.core.mesh_lease import PROFILE, Lease, lease_keys, parse_lease

_ACQUIRE = """
if redis.call('EXISTS', KEYS[1]) == 1 then return {'exists', 0} end
local g = redis.call('INCR', KEYS[2])
redis.call('SET', KEYS[1], ARGV[1] .. '|' .. g .. '|' .. ARGV[3], 'PX', ARGV[2])
return {'acquired', g}
"""
_RENEW = """
local v = redis.call('GET', KEYS[1])
if not v then return 'missing' end
if v == ARGV[1] then redis.call('PEXPIRE', KEYS[1], ARGV[2]) return 'renewed' end
return 'lost'
"""
_RELEASE = """
local v = redis.call('GET', KEYS[1])
if not v then return 'missing' end
if v == ARGV[1] then redis.call('DEL', KEYS[1]) return 'released' end
return 'lost'
"""


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


class LeaseStore:
    """Lease operations for one replica. Every method raises RedisError/OSError when Redis does not
    answer within `timeout_s` (callers fail closed); `read` raises ValueError for a malformed lease."""

    def __init__(self, url: str, name: str, timeout_s: float, ttl_s: float) -> None:
        self.redis = Redis.from_url(
            url,
            client_name=re.sub(r"[^!-~]", "_", name),
            socket_connect_timeout=timeout_s,
            socket_timeout=timeout_s,
            retry=Retry(NoBackoff(), 0),
        )
        self.ttl_ms = int(ttl_s * 1000)
        self._acquire = self.redis.register_script(_ACQUIRE)
        self._renew = self.redis.register_script(_RENEW)
        self._release = self.redis.register_script(_RELEASE)

    async def read(self, session_id: str, community_id: str) -> tuple[Lease | None, int]:
        """(stored lease or None, generation counter)."""
        raw_lease, raw_counter = await self.redis.mget(lease_keys(session_id, community_id))
        return parse_lease(raw_lease), int(raw_counter or 0)

    async def acquire(self, session_id: str, community_id: str, owner: str) -> Lease | None:
        """The new lease with the next generation, or None when a lease exists."""
        outcome, generation = await self._acquire(
            keys=list(lease_keys(session_id, community_id)), args=[owner, self.ttl_ms, PROFILE]
        )
        return Lease(owner, int(generation)) if _text(outcome) == "acquired" else None

    async def renew(self, session_id: str, community_id: str, lease: Lease) -> str:
        """`renewed`, `missing` or `lost`."""
        keys = [lease_keys(session_id, community_id)[0]]
        return _text(await self._renew(keys=keys, args=[lease.value(), self.ttl_ms]))

    async def release(self, session_id: str, community_id: str, lease: Lease) -> str:
        """`released`, `missing` or `lost` (fenced: another owner's lease is never deleted)."""
        keys = [lease_keys(session_id, community_id)[0]]
        return _text(await self._release(keys=keys, args=[lease.value()]))

    async def close(self) -> None:
        await self.redis.aclose()
