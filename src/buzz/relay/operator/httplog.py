"""aiohttp's request-handler log, with a stranger's malformed request as one counted line.

aiohttp logs every HTTP request it cannot parse at ERROR with a full traceback ("Error
handling request from …"): one stranger sending garbage wrote 2.6 MB/s of log (issue 24 item
17). A request that does not parse is the client's fault, not the relay's, and it was already
answered (400): it becomes one WARNING line without a traceback, written once and then counted,
at most one line per 30 s (`RepeatLog`, as Redis trouble is). Anything else aiohttp logs (an
unhandled exception in a handler, which is ours) keeps its traceback.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from aiohttp.http_exceptions import HttpProcessingError

from buzz.relay.operator import oplog
from buzz.relay.operator.ratelog import RepeatLog

MALFORMED_KEY = "http-malformed"


class HttpErrorLog(logging.LoggerAdapter):  # type: ignore[type-arg]
    """What `web.AppRunner(logger=…)` hands every request handler in place of `aiohttp.server`."""

    def __init__(self, logger: logging.Logger, repeats: RepeatLog) -> None:
        super().__init__(logger, {})
        self.repeats = repeats

    def log(self, level: int, msg: object, *args: object, **kwargs: Any) -> None:
        exc = kwargs.get("exc_info")
        if isinstance(exc, HttpProcessingError) and level > logging.DEBUG:
            remote = args[0] if len(args) == 1 else None
            self.repeats.warning(MALFORMED_KEY, "%s", malformed_line(remote, exc))
            return
        super().log(level, msg, *args, **kwargs)

    def process(self, msg: Any, kwargs: Any) -> tuple[Any, Mapping[str, Any]]:
        return msg, kwargs


def malformed_line(remote: object, exc: HttpProcessingError) -> str:
    """`http request refused remote=… status=400 reason="…"`: the parser's reason is its first
    line (the rest quotes the client's bytes), escaped and cut like every client text."""
    lines = str(exc.message or "").strip().splitlines()
    reason = lines[0].rstrip(": ") if lines else type(exc).__name__
    shown = oplog.client_text(remote) if remote is not None else "-"
    return (
        f'http request refused remote={shown} status={exc.code or 400} reason="{oplog.reason_text(reason)}"'
    )
