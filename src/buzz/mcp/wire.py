"""JSON-RPC answers for stdin lines the MCP SDK cannot read (JSON-RPC 2.0 §5.1).

The SDK's stdio transport hands such a line on as an exception, and its session only logs it:
the client that sent it waits for ever. `answering_unreadable` sits between the transport and
the server and answers each one at once, with `id: null` (the id of a line that could not be
read cannot be known):

    not JSON at all                    -32700 Parse error
    JSON, but not a JSON-RPC message   -32600 Invalid Request

Everything else passes through unchanged and in order.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator
from typing import Any

import anyio
from mcp.shared.message import SessionMessage
from mcp_types import INVALID_REQUEST, PARSE_ERROR, ErrorData, JSONRPCError
from pydantic import ValidationError

log = logging.getLogger(__name__)


def unreadable_answer(exc: Exception) -> JSONRPCError:
    """The error answer to a line whose parsing raised `exc` (a pydantic ValidationError whose
    `json_invalid` entry means the text was not JSON; any other failure is a bad message)."""
    not_json = isinstance(exc, ValidationError) and any(e.get("type") == "json_invalid" for e in exc.errors())
    if not_json:
        error = ErrorData(code=PARSE_ERROR, message="Parse error: the line is not JSON")
    else:
        error = ErrorData(code=INVALID_REQUEST, message="Invalid Request: not a JSON-RPC 2.0 message")
    return JSONRPCError(jsonrpc="2.0", id=None, error=error)


@contextlib.asynccontextmanager
async def answering_unreadable(read_stream: Any, write_stream: Any) -> AsyncIterator[Any]:
    """Yield the stream the server should read: `read_stream` without its exceptions, each of
    which is answered on `write_stream` instead. Closing the transport's stream (stdin's end)
    closes the yielded one."""
    send, receive = anyio.create_memory_object_stream[SessionMessage | Exception](0)

    async def pump() -> None:
        async with send:
            async for item in read_stream:
                if isinstance(item, Exception):
                    answer = unreadable_answer(item)
                    log.info("answered an unreadable line with %d", answer.error.code)
                    await write_stream.send(SessionMessage(answer))
                else:
                    await send.send(item)

    async with anyio.create_task_group() as tg:
        tg.start_soon(pump)
        try:
            yield receive
        finally:
            tg.cancel_scope.cancel()
