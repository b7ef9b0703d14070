"""The operator's log: one line per connection, refusal and admin action, in text or JSON.

Every line is an event name plus `key=value` fields (`connection closed conn=c7
remote=127.0.0.1 pubkey=ab… duration_s=3.2 reason="client closed"`). With `--log-format json`
each record is one JSON object: `ts`, `level`, `logger`, `message`, and the same fields as keys.

What never reaches the log (relay.md §7.3 item 6 and issue 10): event content, tag values other
than ids and pubkeys, AUTH events, secret keys. Refusal reasons are our own wire messages, cut at
`MAX_REASON_CHARS`; client-chosen strings (subscription ids, forwarded-for headers) are
`ascii()`-escaped and cut, so a client cannot forge a line.

`CONNECTION` is a context variable holding the label of the WebSocket connection being served
(`c<n>`): tasks started while serving a connection inherit it, so lines logged deep in ingest
or reads name their connection without being passed it.
"""

from __future__ import annotations

import contextvars
import datetime
import logging
import sys
from typing import Any

import orjson

MAX_REASON_CHARS = 160
MAX_CLIENT_TEXT_CHARS = 64
FIELDS_ATTR = "buzz_fields"  # the LogRecord attribute holding a line's fields

CONNECTION: contextvars.ContextVar[str | None] = contextvars.ContextVar("buzz_connection", default=None)


def client_text(value: object) -> str:
    """A client-chosen value made safe for one log line: printable ASCII, at most 64 chars."""
    text = ascii(value) if not isinstance(value, str) else ascii(value)[1:-1]
    return text if len(text) <= MAX_CLIENT_TEXT_CHARS else text[:MAX_CLIENT_TEXT_CHARS] + "…"


def reason_text(reason: str) -> str:
    text = ascii(reason)[1:-1]
    return text if len(text) <= MAX_REASON_CHARS else text[:MAX_REASON_CHARS] + "…"


def _render(value: object) -> str:
    if isinstance(value, float):
        return f"{value:.3f}"
    text = str(value)
    return f'"{text}"' if (" " in text or not text) else text


def line(logger: logging.Logger, level: int, event: str, **fields: Any) -> None:
    """Log `event` with `fields` (None values left out); the current connection is added as
    `conn` unless given."""
    if not logger.isEnabledFor(level):
        return
    if "conn" not in fields:
        fields = {"conn": CONNECTION.get(), **fields}
    # A float (seconds) is shown to the millisecond in both formats, as the text line renders it.
    kept = {k: round(v, 3) if isinstance(v, float) else v for k, v in fields.items() if v is not None}
    text = " ".join([event, *(f"{k}={_render(v)}" for k, v in kept.items())])
    logger.log(level, "%s", text, extra={FIELDS_ATTR: {"event": event, **kept}})


class JsonFormatter(logging.Formatter):
    """One JSON object per record: ts (UTC ISO 8601), level, logger, message, fields, exc."""

    def format(self, record: logging.LogRecord) -> str:
        doc: dict[str, Any] = {
            "ts": datetime.datetime.fromtimestamp(record.created, datetime.UTC).isoformat(
                timespec="milliseconds"
            ),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        doc.update(getattr(record, FIELDS_ATTR, None) or {})
        if record.exc_info:
            doc["exc"] = self.formatException(record.exc_info)
        return orjson.dumps(doc, default=str).decode()


TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
LOG_FORMATS = ("text", "json")


def configure(level: str, fmt: str = "text") -> None:
    """Send the relay's records to stderr at `level` in `fmt` (`text` or `json`).

    Raises ValueError for an unknown level or format.
    """
    numeric = logging.getLevelName(level.upper())
    if not isinstance(numeric, int):
        raise ValueError(f"unknown log level {level!r}")
    if fmt not in LOG_FORMATS:
        raise ValueError(f"unknown log format {fmt!r} (choose text or json)")
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else logging.Formatter(TEXT_FORMAT))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(numeric)
    # aiohttp's access log would print request paths with query strings: the operator log
    # has its own connection lines instead.
    logging.getLogger("aiohttp.access").setLevel(logging.WARNING)
