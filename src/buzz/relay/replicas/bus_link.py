"""One Redis connection of the bus read and written in bulk (decision 351).

redis-py opens the connection (URL, TLS, AUTH, SELECT, CLIENT SETNAME, timeouts) and hands it
over; from then on the bus writes RESP it packs itself and reads the socket a chunk at a time,
parsing every complete reply of the chunk with one `hiredis.Reader`. redis-py's own per-reply
path (`PubSub.get_message`, a pipeline's `read_response`: a retry wrapper, a timeout context
and a dict per reply) cost more than the rest of replica mode, and in replica mode every
replica receives each of its own events back (relay.md §12.4 item 4).
"""

from __future__ import annotations

import asyncio
from typing import Any

import hiredis
from redis.asyncio.connection import AbstractConnection
from redis.exceptions import ConnectionError as RedisConnectionError

READ_SIZE = 256 * 1024  # bytes per socket read: a burst of published events in one wake-up


def command(*parts: bytes) -> bytes:
    """The RESP array of bulk strings for one command."""
    out = [b"*%d\r\n" % len(parts)]
    for part in parts:
        out.append(b"$%d\r\n%s\r\n" % (len(part), part))
    return b"".join(out)


def publish_command(topic: bytes, payload: bytes) -> bytes:
    """`PUBLISH topic payload` in RESP (one `%` instead of redis-py's packer)."""
    return b"*3\r\n$7\r\nPUBLISH\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n" % (len(topic), topic, len(payload), payload)


class RespLink:
    """A connected redis-py connection, written with packed commands and read a chunk at a
    time. Replies are hiredis values: bytes, int, list, or a raised error for `-ERR`."""

    def __init__(self, conn: AbstractConnection) -> None:
        # private: redis-py has no public bulk read (`read_response` is one timed await per reply)
        stream = getattr(conn, "_reader", None)  # redis-py's asyncio.StreamReader
        if not isinstance(stream, asyncio.StreamReader):
            raise RedisConnectionError("redis-py connection has no stream to read")
        self.conn = conn
        self._stream = stream
        self._parser = hiredis.Reader()

    async def send(self, data: bytes) -> None:
        """Write packed commands (redis-py's write timeout; a failure closes the connection)."""
        await self.conn.send_packed_command(data, check_health=False)

    def _drain(self) -> list[Any]:
        replies = []
        while True:
            reply = self._parser.gets()
            if reply is False:
                return replies
            if isinstance(reply, hiredis.ReplyError):
                raise RedisConnectionError(f"Redis answered an error: {reply}")
            replies.append(reply)

    async def read(self, timeout: float) -> list[Any] | None:
        """The complete replies of the next chunk read (maybe none yet), or None when nothing
        arrived within `timeout` s. Raises ConnectionError when Redis closed the connection."""
        try:
            async with asyncio.timeout(timeout):
                data = await self._stream.read(READ_SIZE)
        except TimeoutError:
            return None
        if not data:
            raise RedisConnectionError("connection closed by Redis")
        self._parser.feed(data)
        return self._drain()

    async def replies(self, count: int, timeout: float) -> list[Any]:
        """Exactly the next `count` replies, waiting at most `timeout` s in all."""
        got = self._drain()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while len(got) < count:
            more = await self.read(max(deadline - loop.time(), 0.0))
            if more is None:
                raise RedisConnectionError(f"no answer from Redis within {timeout:.0f} s")
            got.extend(more)
        return got

    async def close(self) -> None:
        await self.conn.disconnect(nowait=True)
