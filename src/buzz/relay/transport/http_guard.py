"""Bounds on the relay's plain HTTP side (issue 24 item 13, docs/limits.md): how long a request
may take to arrive, and how many HTTP connections and requests may be open at once, so that
strangers trickling bytes cannot use up the process's open files (after which every new
WebSocket and `/health` fails).

- Headers: aiohttp closes a connection that has not sent a whole request within the header
  timeout of opening (or of its previous answer): its keep-alive timer, which the server is
  given (`BUZZ_HTTP_HEADER_TIMEOUT_S`).
- Body: the bridge (the one reader of bodies) reads a body within the body timeout
  (`BUZZ_HTTP_BODY_TIMEOUT_S`); beyond it the answer is 408 and the connection is closed
  (`close_after`).
- Connections: at most `FdBudget.http_connections` HTTP connections that are not WebSockets
  (those count against BUZZ_MAX_CONNECTIONS). A new connection beyond it closes the oldest one
  with no request in progress (waiting for its first request, or idle between two); only when
  every one has a request in progress is the new one closed. So a stranger holding connections
  open without a request cannot keep `/health` or a WebSocket upgrade out.
- Requests in progress: at most `FdBudget.http_requests`, half the connections, so a newcomer
  always finds a connection to replace. Beyond it: 503 with `Retry-After` and the connection
  closed at once. `/health` and WebSocket upgrades are not counted.

The open-file limit is shared out once at start (`fd_budget`); the serving process raises its
soft limit to the hard one first (`raise_open_file_limit`).
"""

from __future__ import annotations

import collections
import logging
import resource
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import orjson
from aiohttp import web
from aiohttp.web_protocol import RequestHandler

from buzz.core.limits import (
    FD_RESERVE,
    HTTP_CONNECTIONS_MAX,
    HTTP_REQUESTS_MAX,
    HTTP_RETRY_AFTER_S,
)
from buzz.relay.operator.ratelog import RepeatLog

log = logging.getLogger(__name__)
_repeats = RepeatLog(log)

UNCOUNTED_PATHS = frozenset({"/health"})  # answered at once, whatever the load: probes must see it
BUSY_TEXT = "rate-limited: too many HTTP requests in progress, retry later"
CLOSE_AFTER = web.ResponseKey("close_after", bool)  # set on a response after which to close
# Counters in `Relay.stats`, exported as buzz_http_refused_total{what} (metrics_prom).
BUSY_STAT = "http_refused_busy"  # 503: requests in progress at their cap
EVICTED_STAT = "http_evicted_idle"  # an idle connection closed for a newcomer
FULL_STAT = "http_refused_full"  # a new connection closed: every one had a request in progress
BODY_TIMEOUT_STAT = "http_body_timeouts"  # 408: the body did not arrive in time
NOFILE_FALLBACK = 1 << 20  # what an unlimited RLIMIT_NOFILE counts as (Linux's default nr_open)

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@dataclass(frozen=True, slots=True)
class FdBudget:
    """How the open-file limit is shared out (docs/limits.md)."""

    nofile: int  # the soft RLIMIT_NOFILE the shares come from
    http_connections: int  # HTTP connections that are not WebSockets
    http_requests: int  # of those, with a request in progress (`/health` and upgrades aside)
    websockets: int  # BUZZ_MAX_CONNECTIONS, lowered to what the open files leave


def fd_budget(nofile: int, max_connections: int, http_connections: int | None = None) -> FdBudget:
    """FD_RESERVE for the store, Redis, logs, listeners and files served; a quarter of the rest
    (at most HTTP_CONNECTIONS_MAX, or `http_connections` when configured) for HTTP connections,
    half of those (at most HTTP_REQUESTS_MAX) with a request in progress; the WebSockets get
    what is left, at most `max_connections`. An HTTP request may hold a file beside its socket
    (a page asset), hence the requests are counted twice."""
    spare = max(0, nofile - FD_RESERVE)
    connections = http_connections or max(2, min(HTTP_CONNECTIONS_MAX, spare // 4))
    requests = max(1, min(HTTP_REQUESTS_MAX, connections // 2))
    websockets = max(1, min(max_connections, spare - connections - requests))
    return FdBudget(nofile, connections, requests, websockets)


def open_file_limit() -> int:
    """The soft RLIMIT_NOFILE of this process."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    return NOFILE_FALLBACK if soft == resource.RLIM_INFINITY else soft


def raise_open_file_limit() -> int:
    """Raise the soft RLIMIT_NOFILE to the hard one (the relay uses epoll, never select, so
    the 1024 soft default serves no purpose here); returns the soft limit in force."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = NOFILE_FALLBACK if hard == resource.RLIM_INFINITY else hard
    if soft != resource.RLIM_INFINITY and soft < target:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        except (ValueError, OSError) as exc:  # a container may cap it below the hard limit
            log.warning("could not raise the open-file limit from %d to %d: %s", soft, target, exc)
    return open_file_limit()


def close_after(response: web.StreamResponse) -> web.StreamResponse:
    """Mark `response`: the guard sends it, then closes the connection without reading what is
    left of the request body (aiohttp would otherwise read it for up to 10 s)."""
    response[CLOSE_AFTER] = True
    return response


def _is_upgrade(request: web.BaseRequest) -> bool:
    """A WebSocket handshake (RFC 6455 §4.1: a GET); a header alone on another method is not
    one, and must not take a request out of the count."""
    return request.method == "GET" and request.headers.get("Upgrade", "").lower() == "websocket"


class HttpGuard:
    """The connection and request caps of one relay's public listener (module doc).

    `attach(server)` after the runner is set up (to see connections before their first
    request); `middleware` first in the application's list."""

    def __init__(self, budget: FdBudget, stats: collections.Counter[str]) -> None:
        self.budget = budget
        self.requests = 0  # counted requests in progress
        self._stats = stats
        # Connections with no request in progress, oldest (next to be closed) first; and those
        # with one. An upgraded connection is in neither: the WebSocket cap counts it.
        self._idle: collections.OrderedDict[RequestHandler, None] = collections.OrderedDict()
        self._busy: set[RequestHandler] = set()

    @property
    def connections(self) -> int:
        """Open HTTP connections that are not WebSockets."""
        return len(self._idle) + len(self._busy)

    def attach(self, server: web.Server) -> None:
        """Follow `server`'s connections (aiohttp's own hooks, which it calls for each)."""
        made, lost = server.connection_made, server.connection_lost

        def connection_made(handler: RequestHandler, transport: object) -> None:
            made(handler, transport)  # type: ignore[arg-type]
            self._opened(handler)

        def connection_lost(handler: RequestHandler, exc: BaseException | None = None) -> None:
            self._idle.pop(handler, None)
            self._busy.discard(handler)
            lost(handler, exc)

        server.connection_made = connection_made  # type: ignore[method-assign]
        server.connection_lost = connection_lost  # type: ignore[method-assign]

    def _opened(self, handler: RequestHandler) -> None:
        if self.connections >= self.budget.http_connections:
            if not self._idle:
                self._stats[FULL_STAT] += 1
                _repeats.warning(
                    "http-full",
                    "HTTP connection refused: all %d have a request in progress",
                    self.budget.http_connections,
                )
                handler.force_close()
                return
            oldest, _ = self._idle.popitem(last=False)
            self._stats[EVICTED_STAT] += 1
            _repeats.warning(
                "http-evicted",
                "HTTP connections at their cap (%d): the oldest idle one closed for a new one",
                self.budget.http_connections,
            )
            oldest.force_close()
        self._idle[handler] = None

    @web.middleware
    async def middleware(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        protocol = request.protocol
        if _is_upgrade(request):
            # The WebSocket cap (BUZZ_MAX_CONNECTIONS) counts it from here on.
            self._idle.pop(protocol, None)
            self._busy.discard(protocol)
            try:
                return await handler(request)
            finally:
                if protocol.transport is not None:  # a refused upgrade: the connection goes on
                    self._idle[protocol] = None
        counted = request.path not in UNCOUNTED_PATHS
        if counted and self.requests >= self.budget.http_requests:
            return await self._refuse_busy(request)
        self._idle.pop(protocol, None)
        self._busy.add(protocol)
        self.requests += counted
        try:
            response = await handler(request)
        finally:
            self.requests -= counted
            if protocol in self._busy:  # still open: the newest idle connection
                self._busy.discard(protocol)
                self._idle[protocol] = None
        if response.get(CLOSE_AFTER):
            await _send_and_close(request, response)
        return response

    async def _refuse_busy(self, request: web.Request) -> web.StreamResponse:
        self._stats[BUSY_STAT] += 1
        _repeats.warning(
            "http-busy", "HTTP request refused: %d requests in progress", self.budget.http_requests
        )
        response = web.json_response(
            {"error": BUSY_TEXT},
            status=503,
            headers={"Retry-After": str(HTTP_RETRY_AFTER_S)},
            dumps=lambda obj: orjson.dumps(obj).decode(),
        )
        await _send_and_close(request, response)
        return response


async def _send_and_close(request: web.Request, response: web.StreamResponse) -> None:
    """Write `response` whole, then close the connection (the written bytes still go out)."""
    response.force_close()  # `Connection: close`
    await response.prepare(request)
    await response.write_eof()
    request.protocol.force_close()
