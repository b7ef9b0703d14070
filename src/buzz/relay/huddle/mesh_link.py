"""The mesh transport over Redis (huddle.md §9.9 "Redis"): this replica listens on
`buzz:mesh:<runtime>:ctl` (JSON `{"s": stream, "m": message}`) and `buzz:mesh:<runtime>:media`
(envelope bytes). Sends go through one ordered, bounded outbox drained by a single writer, so
control messages keep their order and a slow Redis never blocks a socket's read loop.

A control message that reached no subscriber (`PUBLISH` answers 0: the replica it is for is not
listening, e.g. killed) is lost, and its stream with it: `on_undelivered(stream)` says so at once,
rather than letting the stream wait for an answer or a silence check that cannot come
(docs/decisions.md 134). This counts on `PUBLISH` counting every subscriber, as one Redis server
(or a primary with replicas) does; a Redis Cluster counts one node's only.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
from collections.abc import Awaitable, Callable

import orjson
from redis.asyncio import Redis
from redis.exceptions import RedisError

from buzz.core.mesh_envelope import MAX_BATCH_BYTES, pack_batch, split_batch

log = logging.getLogger(__name__)

OUTBOX_LIMIT = 4096  # messages waiting for Redis; beyond, the oldest media envelope goes first


def ctl_channel(runtime_id: str) -> str:
    return f"buzz:mesh:{runtime_id}:ctl"


def media_channel(runtime_id: str) -> str:
    return f"buzz:mesh:{runtime_id}:media"


class MeshLink:
    """`on_control(stream, message)` and `on_media(envelopes)` are called for what arrives:
    `envelopes` are the parts of one Redis media message (a batch or one bare envelope), as
    memoryviews of it (no copy per envelope), handled in one pass."""

    def __init__(
        self,
        redis: Redis,
        runtime_id: str,
        on_control: Callable[[str, dict[str, object]], Awaitable[None]],
        on_media: Callable[[list[memoryview]], None],
        on_undelivered: Callable[[str], None] = lambda stream: None,
    ) -> None:
        self.redis = redis
        self.runtime_id = runtime_id
        self._on_control = on_control
        self._on_media = on_media
        self._on_undelivered = on_undelivered
        # (channel, data, control stream id or None for media)
        self._outbox: collections.deque[tuple[str, bytes, str | None]] = collections.deque()
        self._wake = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        self._sending = False
        self.stats: collections.Counter[str] = collections.Counter()

    async def start(self) -> None:
        pubsub = self.redis.pubsub()
        await pubsub.subscribe(ctl_channel(self.runtime_id), media_channel(self.runtime_id))
        loop = asyncio.get_running_loop()
        self._tasks = [loop.create_task(self._listen(pubsub)), loop.create_task(self._write())]

    async def flush(self, timeout_s: float) -> None:
        """Wait (at most `timeout_s`) until everything queued so far has been handed to Redis."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while (self._outbox or self._sending) and loop.time() < deadline and self._tasks:
            await asyncio.sleep(0.01)

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task

    def send_control(self, runtime_id: str, stream: str, message: dict[str, object]) -> None:
        self._put(ctl_channel(runtime_id), orjson.dumps({"s": stream, "m": message}), stream)

    def send_media(self, runtime_id: str, envelope: bytes) -> None:
        self._put(media_channel(runtime_id), envelope, None)

    def _put(self, channel: str, data: bytes, stream: str | None) -> None:
        if len(self._outbox) >= OUTBOX_LIMIT:
            for i, (_c, _d, of_stream) in enumerate(self._outbox):
                if of_stream is None:
                    del self._outbox[i]
                    break
            else:
                self._outbox.popleft()
            self.stats["mesh_outbox_dropped_total"] += 1
        self._outbox.append((channel, data, stream))
        self._wake.set()

    async def _write(self) -> None:
        while True:
            if not self._outbox:
                self._wake.clear()
                await self._wake.wait()
                continue
            batch = [self._outbox.popleft() for _ in range(min(len(self._outbox), 256))]
            self._sending = True
            try:
                sends = _coalesce(batch)
                async with self.redis.pipeline(transaction=False) as pipe:
                    for channel, data, _stream in sends:
                        pipe.publish(channel, data)
                    receivers = await pipe.execute()
            except (RedisError, OSError) as exc:  # best effort (§9.8): lost, counted
                self.stats["mesh_send_failed_total"] += len(batch)
                log.debug("mesh send failed: %s", exc)
                continue
            finally:
                self._sending = False
            lost = [stream for (_c, _d, stream), n in zip(sends, receivers, strict=True) if stream and n == 0]
            for stream in dict.fromkeys(lost):  # once per stream, in order
                self.stats["mesh_control_undelivered_total"] += 1
                try:
                    self._on_undelivered(stream)
                except Exception:
                    log.exception("mesh undelivered control handling failed")

    async def _listen(self, pubsub: object) -> None:
        ctl = ctl_channel(self.runtime_id).encode()
        while True:
            try:
                message = await pubsub.get_message(ignore_subscribe_messages=True, timeout=1.0)  # type: ignore[attr-defined]
            except (RedisError, OSError) as exc:
                log.warning("mesh listener: %s", exc)
                await asyncio.sleep(0.5)
                continue
            if message is None:
                continue
            data = message["data"]
            if message["channel"] == ctl:
                try:
                    body = orjson.loads(data)
                    stream, inner = str(body["s"]), body["m"]
                    if not isinstance(inner, dict):
                        raise ValueError("message is not an object")
                except (ValueError, KeyError, TypeError):
                    self.stats["mesh_control_malformed_total"] += 1
                    continue
                try:
                    await self._on_control(stream, inner)
                except Exception:
                    log.exception("mesh control message failed")
            else:
                parts = split_batch(memoryview(data))
                if parts is None:
                    self.stats["mesh_batch_malformed_total"] += 1
                    continue
                self._on_media(parts)  # type: ignore[arg-type]  # memoryview in, memoryviews out


def _coalesce(batch: list[tuple[str, bytes, str | None]]) -> list[tuple[str, bytes, str | None]]:
    """Control messages one publish each, in order (with their stream); media envelopes for one
    receiver joined into batches (`pack_batch`, at most MAX_BATCH_BYTES each), so a receiver
    parses one Redis message per writer pass instead of one per envelope (docs/decisions.md,
    "mesh media batches")."""
    out: list[tuple[str, bytes, str | None]] = []
    media: dict[str, list[list[bytes]]] = {}
    size: dict[str, int] = {}
    for channel, data, stream in batch:
        if stream is not None:
            out.append((channel, data, stream))
            continue
        chunks = media.setdefault(channel, [[]])
        if size.get(channel, 0) + len(data) + 2 > MAX_BATCH_BYTES:
            chunks.append([])
            size[channel] = 0
        chunks[-1].append(data)
        size[channel] = size.get(channel, 0) + len(data) + 2
    for channel, chunks in media.items():
        out += [(channel, pack_batch(chunk), None) for chunk in chunks if chunk]
    return out
