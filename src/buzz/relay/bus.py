"""Live fan-out across replicas over Redis pub/sub (relay.md §12.4), when `BUZZ_REDIS_URL` is set.

Publishing (item 2): `FanOut.publish` hands every accepted event to `announce`, which records
its id in the echo cache (60 s) and queues `{"v":1,"channel_id":…,"event":…}` for the topic of
its channel (or the global topic); one publisher task sends the queue in order, up to 256
PUBLISHes it packed itself per write (decision 351). A failed publish (or a full queue)
removes the ids from the echo cache and is logged; local delivery never waits for Redis.

Subscribing (item 3): one listener connection subscribes to the global and control topics,
and to `buzz:<W>:channel:<C>` while a local filter names C in `#h` (`TopicRefs`: a reference
count per channel, released after a 500 ms debounce). Exact topic names, never patterns. A lost
connection is retried after 1 s, 2 s, 4 s … at most 30 s, and every wanted topic is subscribed
again. A REQ waits (at most BUZZ_REDIS_TIMEOUT_MS) for its channel topics to be confirmed before its
stored query, so nothing published by another replica after that query began is missed.

Receiving (item 4): every reply of one socket read is handled in one wake-up (decision 351);
an event whose id, read off the raw bytes, is in the echo cache is dropped unparsed (our own,
or a second copy; decision 352); otherwise the channel id is taken from the payload and the
event goes through the same local delivery as ours (`FanOut.deliver`), which re-checks
access on this replica.

Access changes (item 5): `ChannelAccess.invalidate` on this replica publishes
`{"v":1,"type":"access_changed",…}` on the control topic; receiving one drops the cached
membership of that channel and runs revocation (§4.7) for the local connections. Changes
missed while the bus was down (issue 9 item 7): the membership cache is off until the listener
is subscribed again, then every live subscription naming a channel is re-checked against the
store and our own control messages that failed to go out are sent again (`_resync`).

If Redis is unreachable at start, the relay still starts (logged) and serves its own clients;
cross-replica delivery resumes once the listener reconnects.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import re
import time
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from redis.asyncio import Redis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import RedisError

from buzz.core.filters import Filter
from buzz.core.limits import REDIS_REQUEST_TIMEOUT_MS
from buzz.core.stored import StoredEvent, from_storage
from buzz.relay.access import ChannelAccess
from buzz.relay.bus_link import RespLink, command, publish_command
from buzz.relay.bus_topics import TopicRefs, named_channels
from buzz.relay.bus_wire import (
    AccessChanged,
    BadPayload,
    EchoCache,
    Topics,
    decode_control,
    decode_event,
    echo_id,
    encode_access_changed,
    encode_event_bytes,
)
from buzz.relay.fanout import FanOut
from buzz.relay.presence_redis import RedisPresence
from buzz.relay.ratelog import RepeatLog
from buzz.relay.revocation import channels_read, revoke_unreadable
from buzz.relay.sessions import keys_of

if TYPE_CHECKING:
    from buzz.relay.relay import Relay

log = logging.getLogger(__name__)

BACKOFF_MIN_S, BACKOFF_MAX_S = 1.0, 30.0  # REDIS_BACKOFF_S (relay.md §17)
OUTBOX_MAX = 10_000  # queued publishes; beyond this a publish fails (logged)
PUBLISH_BATCH = 256  # publishes per pipeline round trip
START_TIMEOUT_S = 5.0  # `start` waits at most this long for the first subscription
IDLE_PING_S, IDLE_DEAD_S = 15.0, 45.0  # listener liveness: PING when idle, reconnect when silent
CONNECT_TIMEOUT_S, COMMAND_TIMEOUT_S = 2.0, 5.0

Outgoing = tuple[bytes, bytes, "str | None"]  # (topic, payload, event id or None for control)
_MESSAGE = b"message"  # a pub/sub delivery: [b"message", topic, payload] (RESP2 array or RESP3 push)


def _client(url: str, retries: int, name: str, timeout_s: float | None = None) -> Redis:
    return Redis.from_url(
        url,
        client_name=re.sub(r"[^!-~]", "_", name),  # CLIENT LIST shows a relay's (no spaces allowed)
        socket_connect_timeout=CONNECT_TIMEOUT_S if timeout_s is None else timeout_s,
        socket_timeout=COMMAND_TIMEOUT_S if timeout_s is None else timeout_s,
        socket_keepalive=True,
        retry=Retry(NoBackoff(), retries),
    )


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


class RedisBus:
    """The Redis side of one replica. `await start()` after the store opens, `await stop()`
    before it closes. `stats` counts `bus_published`, `bus_publish_failed`, `bus_received`,
    `bus_echo_dropped`, `bus_bad_payload`, `bus_reconnects`, `bus_resyncs`."""

    def __init__(
        self,
        url: str,
        workspace: str,
        fanout: FanOut,
        access: ChannelAccess,
        connections: Iterable[object],
        stats: collections.Counter[str] | None = None,
        request_timeout_s: float = REDIS_REQUEST_TIMEOUT_MS / 1000,
    ) -> None:
        self.topics = Topics(workspace)
        self.echo = EchoCache()
        self.refs = TopicRefs(self._topics_changed)
        self.stats: collections.Counter[str] = collections.Counter() if stats is None else stats
        self._url = url
        self._fanout = fanout
        self._access = access
        self._connections = connections
        self._redis = _client(url, retries=1, name=f"buzz-relay:{workspace}")  # publishes
        # Calls a client's request waits on (presence) get their own short timeout, no retry:
        # a hung Redis must not stall a connection (issue 9 item 6).
        self.request_timeout_s = request_timeout_s
        self._requests = _client(
            url, retries=0, name=f"buzz-relay-requests:{workspace}", timeout_s=request_timeout_s
        )
        self.presence = RedisPresence(self._requests, self.topics)
        self._outbox: collections.deque[Outgoing] = collections.deque()  # at most OUTBOX_MAX
        self._outbox_filled = asyncio.Event()  # the publisher sleeps on it while the outbox is empty
        self._outbox_done = asyncio.Event()  # nothing queued nor in flight (`stop` waits on it)
        self._outbox_done.set()
        self._pubsub: RespLink | None = None  # the listener's current connection
        self._publisher: RespLink | None = None  # the publisher's connection, opened on demand
        self._control_topic = self.topics.control.encode()
        self._subscribed: set[str] = set()  # SUBSCRIBE sent on the current connection
        self._confirmed: set[str] = set()  # subscribe confirmations received on it
        self._confirm_changed = asyncio.Event()
        self._ready = asyncio.Event()  # global and control topics confirmed
        self._sync_lock = asyncio.Lock()
        self._tasks: list[asyncio.Task[None]] = []
        self._syncs: set[asyncio.Task[None]] = set()
        # Our access_changed messages that failed to go out, resent once the bus works again.
        self._unsent_control: dict[bytes, str] = {}
        # Until the bus hears the other replicas, their access changes may be missed: no cache.
        access.cache_enabled = False
        self._repeats = RepeatLog(log)  # an outage fails every publish: first line, then counts

    @classmethod
    def attach(cls, relay: Relay) -> RedisBus:
        """Build the bus for `relay` and wire it into fan-out, the subscription index, the
        membership cache and presence (which moves to Redis). Raises ValueError without
        `relay.config.redis_url`."""
        if not relay.config.redis_url:
            raise ValueError("the Redis bus needs BUZZ_REDIS_URL")
        bus = cls(
            relay.config.redis_url,
            relay.config.workspace_id,
            relay.fanout,
            relay.access,
            relay.sessions,  # sockets, and a mesh owner's remote huddle seats
            relay.stats,
            relay.config.redis_timeout_ms / 1000,
        )
        relay.fanout.bus = bus
        relay.index.listener = bus.refs
        relay.access.on_invalidate = bus.access_changed
        relay.presence = relay.rules.presence = relay.reads.presence = bus.presence
        return bus

    @property
    def unsent_access_changes(self) -> int:
        """Our access_changed messages that failed to publish, waiting for the bus to return."""
        return len(self._unsent_control)

    @property
    def connected(self) -> bool:
        """True while the listener holds confirmed global and control subscriptions."""
        return self._ready.is_set()

    # -- lifecycle ---------------------------------------------------------------------------
    async def start(self, timeout: float = START_TIMEOUT_S) -> None:
        """Start the publisher and listener; wait up to `timeout` s for the first subscription."""
        self._tasks = [
            asyncio.create_task(self._publish_loop(), name="redis-bus-publisher"),
            asyncio.create_task(self._listen_loop(), name="redis-bus-listener"),
        ]
        try:
            await asyncio.wait_for(self._ready.wait(), timeout)
        except TimeoutError:
            log.warning("Redis not reachable yet: serving local clients; replicas join when it is")

    async def stop(self, flush_timeout: float = 2.0) -> None:
        """Send what is queued (at most `flush_timeout` s), then close. Idempotent."""
        self.refs.close()
        if self._tasks:
            try:
                await asyncio.wait_for(self._outbox_done.wait(), flush_timeout)
            except TimeoutError:
                log.warning("Redis bus stopped with %d unsent message(s)", len(self._outbox))
        for task in [*self._tasks, *self._syncs]:
            task.cancel()
        await asyncio.gather(*self._tasks, *self._syncs, return_exceptions=True)
        self._tasks = []
        if self._publisher is not None:
            with contextlib.suppress(Exception):
                await self._publisher.close()
            self._publisher = None
        await self._redis.aclose()
        await self._requests.aclose()

    # -- publishing (item 2, item 5) ---------------------------------------------------------
    def announce(self, stored: StoredEvent) -> None:
        """Queue `stored` for the other replicas, remembering its id as our own echo."""
        event_id = stored.event.id
        self.echo.add(event_id)
        payload = encode_event_bytes(stored.event, stored.channel_id)
        self._enqueue((self.topics.for_event(stored.channel_id).encode(), payload, event_id))

    def access_changed(self, channel_id: str, pubkey: str | None = None) -> None:
        """Queue an `access_changed` control message for `channel_id` (`pubkey` when only that
        reader is affected)."""
        self._enqueue((self._control_topic, encode_access_changed(AccessChanged(channel_id, pubkey)), None))

    def _enqueue(self, item: Outgoing) -> None:
        if len(self._outbox) >= OUTBOX_MAX:
            self._publish_failed([item], "publish queue full")
            return
        self._outbox.append(item)
        if not self._outbox_filled.is_set():
            self._outbox_filled.set()
            self._outbox_done.clear()

    async def _publish_loop(self) -> None:
        outbox = self._outbox
        while True:
            if not outbox:
                self._outbox_done.set()
                self._outbox_filled.clear()
                await self._outbox_filled.wait()
                continue
            batch = [outbox.popleft() for _ in range(min(len(outbox), PUBLISH_BATCH))]
            try:
                await self._send_batch(b"".join([publish_command(t, p) for t, p, _ in batch]), len(batch))
                self.stats["bus_published"] += len(batch)
                self._repeats.recovered("publish", "Redis publishing works again")
            except Exception as exc:  # RedisError, OSError, or worse: never stop publishing
                self._publish_failed(batch, str(exc) or type(exc).__name__)

    async def _send_batch(self, data: bytes, count: int) -> None:
        """Write `count` packed PUBLISHes in one go and read their `count` answers. A stale
        connection (Redis restarted since the last batch) is replaced and the batch sent once
        more, as redis-py's one retry did; a receiver drops a second copy by its echo cache."""
        for attempt in (1, 2):
            link = self._publisher
            try:
                if link is None:
                    link = self._publisher = RespLink(await self._redis.connection_pool.get_connection())
                await link.send(data)
                await link.replies(count, COMMAND_TIMEOUT_S)
                return
            except BaseException as exc:
                self._publisher = None
                if link is not None:
                    with contextlib.suppress(Exception):
                        await link.close()
                if attempt == 2 or not isinstance(exc, (RedisConnectionError, OSError)):
                    raise

    def _publish_failed(self, batch: list[Outgoing], reason: str) -> None:
        for topic, payload, event_id in batch:
            if event_id is not None:
                self.echo.discard(event_id)
            else:
                self._unsent_control.pop(payload, None)  # keep the newest order
                self._unsent_control[payload] = topic
                if len(self._unsent_control) > OUTBOX_MAX:
                    self._unsent_control.pop(next(iter(self._unsent_control)))
        self.stats["bus_publish_failed"] += len(batch)
        self._repeats.error("publish", "Redis publish of %d message(s) failed: %s", len(batch), reason)

    # -- subscribing (item 3) ----------------------------------------------------------------
    def _wanted(self) -> set[str]:
        return {self.topics.global_, self.topics.control} | {self.topics.channel(c) for c in self.refs.wanted}

    def _topics_changed(self) -> None:
        if not self._tasks:
            return  # not started: the listener subscribes everything wanted when it connects
        task = asyncio.get_running_loop().create_task(self._sync())
        self._syncs.add(task)
        task.add_done_callback(self._syncs.discard)

    async def _sync(self) -> None:
        """Make the listener's subscriptions equal to the wanted topics."""
        async with self._sync_lock:
            pubsub = self._pubsub
            if pubsub is None:
                return  # the listener resubscribes on connect
            wanted = self._wanted()
            add, drop = sorted(wanted - self._subscribed), sorted(self._subscribed - wanted)
            try:
                if add:
                    await pubsub.send(command(b"SUBSCRIBE", *(t.encode() for t in add)))
                    if self._pubsub is pubsub:
                        self._subscribed.update(add)
                if drop:
                    await pubsub.send(command(b"UNSUBSCRIBE", *(t.encode() for t in drop)))
                    if self._pubsub is pubsub:
                        self._subscribed.difference_update(drop)
                        self._confirmed.difference_update(drop)
            except (RedisError, OSError) as exc:
                self._repeats.warning(
                    "subscribe", "Redis (un)subscribe failed: %s (the listener reconnects)", exc
                )

    async def wait_subscribed(self, filters: Iterable[Filter], timeout: float | None = None) -> bool:
        """Wait until the channel topics `filters` name are confirmed (at most `timeout` s,
        default the request timeout, BUZZ_REDIS_TIMEOUT_MS).

        Returns False at once while Redis is disconnected, and after `timeout` (a hung Redis:
        the REQ is then served as during an outage, from this replica).
        """
        topics = {self.topics.channel(c) for c in named_channels(filters)}
        loop = asyncio.get_running_loop()
        deadline = loop.time() + (self.request_timeout_s if timeout is None else timeout)
        while not topics <= self._confirmed:
            changed = self._confirm_changed
            remaining = deadline - loop.time()
            if self._pubsub is None or remaining <= 0:
                return False
            try:
                await asyncio.wait_for(changed.wait(), remaining)
            except TimeoutError:
                return False
        return True

    def _confirmations_changed(self) -> None:
        self._confirm_changed.set()
        self._confirm_changed = asyncio.Event()
        if {self.topics.global_, self.topics.control} <= self._confirmed:
            self._ready.set()
            self._repeats.recovered("listener", "Redis bus connected again")
            self._repeats.recovered("subscribe")
        else:
            self._ready.clear()
            self._access.cache_enabled = False  # other replicas' changes may go unheard from now

    async def _resync(self) -> None:
        """The bus hears the other replicas again (issue 9 item 7): access changes made while it
        did not were missed. Drop every cached answer, re-check each live subscription naming a
        channel against the store (§4.7), resend our own unsent access changes, and only then
        trust the cache again. Runs on the listener, so no bus event is delivered before it ends."""
        self._access.forget()
        channels = sorted(set().union(*(channels_read(conn) for conn in list(self._connections))))
        revoked = 0
        for channel_id in channels:
            try:
                revoked += await revoke_unreadable(self._connections, self._access, channel_id)
            except Exception:
                log.exception("re-check of channel %s after reconnecting failed", channel_id)
        unsent, self._unsent_control = self._unsent_control, {}
        for payload, topic in unsent.items():
            self._enqueue((topic, payload, None))
        if self._ready.is_set():
            self._access.cache_enabled = True
        self.stats["bus_resyncs"] += 1
        if channels or unsent:
            log.info(
                "Redis bus back: %d channel(s) re-checked, %d subscription(s) revoked, %d access change(s) resent",
                len(channels),
                revoked,
                len(unsent),
            )

    # -- the listener ------------------------------------------------------------------------
    async def _listen_loop(self) -> None:
        delay = BACKOFF_MIN_S
        while True:
            was_ready, error = await self._connection()
            if was_ready:
                delay = BACKOFF_MIN_S  # a working connection was lost: back off from 1 s again
            self._repeats.warning("listener", "Redis bus connection lost (%s); retrying with backoff", error)
            log.debug("Redis listener retrying in %.0f s", delay)
            await asyncio.sleep(delay)
            delay = min(delay * 2, BACKOFF_MAX_S)
            self.stats["bus_reconnects"] += 1

    async def _connection(self) -> tuple[bool, str]:
        """Run one listener connection until it fails; returns (it was ready, the error)."""
        client = _client(self._url, retries=0, name=f"buzz-relay-listener:{self.topics.workspace}")
        link: RespLink | None = None
        try:
            link = RespLink(await client.connection_pool.get_connection())
            await self._listen(link)
            return self.connected, "closed"  # not reached: _listen only returns by raising
        except Exception as exc:  # any failure of this connection: drop it and start over
            return self.connected, str(exc) or type(exc).__name__
        finally:
            self._pubsub = None
            self._subscribed.clear()
            self._confirmed.clear()
            self._confirmations_changed()
            if link is not None:
                with contextlib.suppress(Exception):
                    await link.close()
            with contextlib.suppress(Exception):
                await client.aclose()

    async def _listen(self, link: RespLink) -> None:
        self._pubsub = link
        await self._sync()
        if not self._subscribed:
            raise ConnectionError("could not subscribe")
        loop = asyncio.get_running_loop()
        last_heard = loop.time()
        pinged = False
        while True:
            replies = await link.read(timeout=1.0)  # every reply of one socket read at once
            now = loop.time()
            if replies is None:
                if now - last_heard > IDLE_DEAD_S:
                    raise ConnectionError(f"no answer from Redis for {IDLE_DEAD_S:.0f} s")
                if now - last_heard > IDLE_PING_S and not pinged:
                    await link.send(command(b"PING"))
                    pinged = True
                continue
            last_heard, pinged = now, False
            for reply in replies:
                if isinstance(reply, list) and len(reply) == 3 and reply[0] == _MESSAGE:
                    if reply[1] == self._control_topic:
                        await self._on_control(reply[2])
                    else:
                        await self._on_event(reply[2])
                elif isinstance(reply, list) and len(reply) >= 2:
                    await self._on_message(reply[0], reply[1])  # (un)subscribe; PING's pong

    async def _on_message(self, kind_raw: Any, topic_raw: Any) -> None:
        kind, topic = _text(kind_raw), _text(topic_raw)
        if kind == "subscribe":
            was_ready = self._ready.is_set()
            self._confirmed.add(topic)
            self._confirmations_changed()
            if self._ready.is_set() and not was_ready:
                await self._resync()
        elif kind == "unsubscribe":
            self._confirmed.discard(topic)
            self._confirmations_changed()

    # -- receiving (items 4 and 5) -----------------------------------------------------------
    async def _on_event(self, data: bytes) -> None:
        if echo_id(data) in self.echo:  # our own, or a second copy: dropped before any parsing
            self.stats["bus_echo_dropped"] += 1
            return
        try:
            event, channel_id = decode_event(data)
        except BadPayload as exc:
            self.stats["bus_bad_payload"] += 1
            self._repeats.warning("bad-payload", "dropping a bad bus payload: %s", exc)
            return
        if event.id in self.echo:  # an id the raw check could not read (another encoder)
            self.stats["bus_echo_dropped"] += 1
            return
        self.echo.add(event.id)  # a second copy (a retried publish) is dropped too
        self.stats["bus_received"] += 1
        # The accepting replica verified it (§8); Redis is trusted infrastructure (§12.4 item 4).
        stored = from_storage(event, int(time.time()), channel_id)
        try:
            await self._fanout.deliver(stored)
        except Exception:
            log.exception("delivery of bus event %s failed", event.id)

    async def _on_control(self, data: bytes) -> None:
        try:
            change = decode_control(data)
        except BadPayload as exc:
            self.stats["bus_bad_payload"] += 1
            self._repeats.warning("bad-control", "dropping a bad control payload: %s", exc)
            return
        self._access.forget(change.channel_id)
        affected = [
            c for c in list(self._connections) if change.pubkey is None or change.pubkey in keys_of(c)
        ]
        try:
            await revoke_unreadable(affected, self._access, change.channel_id)
        except Exception:
            log.exception("revocation after a remote access change of %s failed", change.channel_id)
