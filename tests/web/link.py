"""A TCP hop between the browser and a real relay, so a test can stop and restart the relay
(on another port, with the same data) behind one address the page keeps dialling, and can
make the link deaf: bytes still reach the relay, its answers no longer reach the page — the
moment of a send whose OK is lost because the relay went down. `mute_open` drops what the
page writes on the connections open now (a send lost on its way; a reloaded page dials anew). `down` refuses the page while
the relay is already back, so a test can publish what the page must catch up on."""

from __future__ import annotations

import asyncio
import contextlib


class Link:
    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.deaf = False
        self.down = False  # refuse the page's connections, as a relay that is not there yet
        self.port = 0
        self._server: asyncio.Server | None = None
        self._pipes: set[asyncio.Task[None]] = set()
        self._muted: set[asyncio.Task[None]] = set()  # page-to-relay pipes whose bytes are dropped
        self._from_page: set[asyncio.Task[None]] = set()
        self._websockets: set[asyncio.Task[None]] = set()  # page-to-relay pipes that upgraded

    @property
    def http_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/"

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]

    def mute_open(self) -> None:
        """From now on, drop what the page writes on each WebSocket open at this moment (not
        its HTTP keep-alive connections: a reload must still load the page)."""
        self._muted |= self._websockets

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
        for task in list(self._pipes):
            task.cancel()
        await asyncio.gather(*self._pipes, return_exceptions=True)

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self.down:
            writer.close()
            return
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.target_port)
        except OSError:  # the relay is down: the page sees its connection fail at once
            writer.close()
            return
        pair = [
            asyncio.create_task(self._pipe(reader, up_writer, from_relay=False)),
            asyncio.create_task(self._pipe(up_reader, writer, from_relay=True)),
        ]
        self._pipes.update(pair)
        self._from_page.add(pair[0])
        try:
            # Either side ending ends both, as a direct connection would.
            await asyncio.wait(pair, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in pair:
                task.cancel()
                self._pipes.discard(task)
                self._from_page.discard(task)
                self._muted.discard(task)
                self._websockets.discard(task)
            for w in (writer, up_writer):
                with contextlib.suppress(Exception):
                    w.close()

    async def _pipe(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, from_relay: bool
    ) -> None:
        with contextlib.suppress(ConnectionError, asyncio.IncompleteReadError):
            while data := await reader.read(65536):
                if not from_relay and b"upgrade: websocket" in data[:4096].lower():
                    self._websockets.add(asyncio.current_task())  # type: ignore[arg-type]
                if (from_relay and self.deaf) or asyncio.current_task() in self._muted:
                    continue
                writer.write(data)
                await writer.drain()
