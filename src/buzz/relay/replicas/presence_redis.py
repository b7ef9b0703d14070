"""Presence shared by replicas (relay.md §12.2 item 2, §12.4): the newest 20001 per pubkey in
a Redis key `buzz:<workspace>:presence:<pubkey>` with a TTL of PRESENCE_TTL_S (90 s).

Value: compact JSON `{"v":1,"created_at":<n>,"channel_id":"<C>"|null,"event":{…}|null}`, where
a null event records `offline` (so an older `online` cannot come back while it lives). The
"newest wins" comparison runs inside Redis (one Lua script), so two replicas writing at once
cannot let an older status win.

The client waits on these calls, so they run on a client with the short request timeout
(BUZZ_REDIS_TIMEOUT_MS, no retry) and fail closed: a Redis error or timeout refuses the 20001
and the read with `error: presence unavailable: …` (issue 9 item 6), instead of answering from
this process's partial copy.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable

import orjson
from redis.asyncio import Redis
from redis.exceptions import RedisError
from redis.exceptions import TimeoutError as RedisTimeout

from buzz.core.errors import ServerError
from buzz.core.limits import PRESENCE_TTL_S
from buzz.core.stored import StoredEvent, from_storage
from buzz.relay.delivery.presence import OFFLINE, Presence, presence_status
from buzz.relay.operator.ratelog import RepeatLog
from buzz.relay.replicas.bus_wire import BadPayload, Topics, decode_event

log = logging.getLogger(__name__)

# KEYS[1] the presence key; ARGV: value, created_at, ttl in ms. Returns 1 when written.
_SET_NEWEST = """
local current = redis.call('GET', KEYS[1])
if current then
  local ok, body = pcall(cjson.decode, current)
  if ok and type(body) == 'table' and tonumber(body['created_at']) ~= nil
     and tonumber(body['created_at']) > tonumber(ARGV[2]) then
    return 0
  end
end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[3])
return 1
"""


def encode_presence(stored: StoredEvent) -> bytes:
    """The key's value for an accepted 20001 (`event` null when it says offline)."""
    event = stored.event
    live = presence_status(event.content) != OFFLINE
    return b'{"v":1,"created_at":%d,"channel_id":%s,"event":%s}' % (
        event.created_at,
        orjson.dumps(stored.channel_id),
        event.to_json().encode() if live else b"null",
    )


def decode_presence(value: bytes | str) -> StoredEvent | None:
    """The live 20001 in a key's value, None for offline. Raises BadPayload."""
    try:
        body = orjson.loads(value)
    except orjson.JSONDecodeError as exc:
        raise BadPayload(f"not JSON: {exc}") from None
    if isinstance(body, dict) and body.get("v") == 1 and body.get("event") is None:
        return None  # offline
    event, channel_id = decode_event(value)
    # Written by a replica after §8 verification; Redis is trusted (§12.4 item 4).
    return from_storage(event, int(time.time()), channel_id)


def _unavailable(exc: BaseException) -> ServerError:
    """A fresh refusal each time (a re-raised instance would keep every traceback alive)."""
    reason = "Redis did not answer" if isinstance(exc, TimeoutError | RedisTimeout) else "Redis failed"
    return ServerError(f"presence unavailable: {reason}")


class RedisPresence(Presence):
    """`Presence` whose `record` / `lookup` go through Redis (shared by every replica)."""

    def __init__(self, redis: Redis, topics: Topics, ttl_s: float = PRESENCE_TTL_S) -> None:
        super().__init__(ttl_s)
        self._redis = redis
        self._topics = topics
        self._set_newest = redis.register_script(_SET_NEWEST)
        self._repeats = RepeatLog(log)  # an outage fails every write: first line, then counts

    async def record(self, stored: StoredEvent) -> None:
        """Keep `stored` (a 20001 past its checks) unless a newer one is already known.

        Raises ServerError when Redis fails or does not answer in time (then nothing is kept)."""
        event = stored.event
        try:
            await self._set_newest(
                keys=[self._topics.presence_key(event.pubkey)],
                args=[encode_presence(stored), event.created_at, int(self._ttl * 1000)],
            )
        except (RedisError, OSError) as exc:
            self._repeats.warning("presence-write", "presence not written to Redis: %s", exc)
            raise _unavailable(exc) from None
        self._repeats.recovered("presence-write", "presence writes to Redis work again")
        self.update(stored)

    async def lookup(self, pubkeys: Iterable[str]) -> list[StoredEvent]:
        """The live presence events of `pubkeys`, sorted by pubkey.

        Raises ServerError when Redis fails or does not answer in time."""
        wanted = sorted(set(pubkeys))
        if not wanted:
            return []
        try:
            values = await self._redis.mget([self._topics.presence_key(p) for p in wanted])
        except (RedisError, OSError) as exc:
            self._repeats.warning("presence-read", "presence lookup in Redis failed: %s", exc)
            raise _unavailable(exc) from None
        self._repeats.recovered("presence-read", "presence lookups in Redis work again")
        out: list[StoredEvent] = []
        for pubkey, value in zip(wanted, values, strict=True):
            if value is None:
                continue
            try:
                stored = decode_presence(value)
            except BadPayload as exc:
                self._repeats.warning(
                    "presence-bad-value", "ignoring a bad presence value for %s: %s", pubkey, exc
                )
                continue
            if stored is not None and stored.event.pubkey == pubkey:
                out.append(stored)
        return out
