"""Argument values the API checks before touching the relay; each bad value is a UserError whose
message names the option it came from (the CLI flag names are the documented vocabulary).

- `channel_arg`: a canonical lowercase UUID (relay.md §4.1 item 1);
- `event_id_arg`: 64 hex (any case) → lowercase;
- `pubkey_arg`: hex or npub → 64 lowercase hex, a secp256k1 point unless `on_curve=False`;
- `text_arg`: message text, given as a string or as a callable that produces it (the CLI's
  `-` = stdin, read only once the earlier arguments passed), non-empty and within a byte limit.
"""

from __future__ import annotations

from collections.abc import Callable

from buzz.client.errors import UserError
from buzz.client.identity import parse_pubkey
from buzz.core.channel_id import NIL, is_channel_id
from buzz.core.event import Event
from buzz.core.keys import is_hex

Text = str | Callable[[], str]  # the text, or a reader of it that raises UserError


def channel_arg(value: str) -> str:
    """A channel id as given → canonical lowercase UUID, else UserError."""
    text = value.strip().lower()
    if text == NIL:  # well formed, but reserved: no channel can have it (relay.md §4.1)
        raise UserError(
            f"invalid channel id {value!r}: the nil UUID names no channel; use a channel's own id"
        )
    if not is_channel_id(text):
        raise UserError(f"invalid channel id {value!r}: expected a canonical UUID (8-4-4-4-12 hex)")
    return text


def event_id_arg(value: str, what: str = "event id") -> str:
    """A 64-hex event id (any case) → lowercase, else UserError naming `what`."""
    text = value.strip().lower()
    if not is_hex(text, 64):
        raise UserError(f"invalid {what} {value!r}: expected 64 hex characters")
    return text


def pubkey_arg(value: str, what: str = "pubkey", *, on_curve: bool = True) -> str:
    """hex or npub → 64 lowercase hex, else UserError naming `what` (`parse_pubkey`)."""
    return parse_pubkey(value, what, on_curve=on_curve)


def text_arg(value: Text, what: str = "content", max_bytes: int | None = None) -> str:
    """The text (read now when `value` is a reader). Empty or only whitespace → UserError (a
    blank message is nothing to read, decision 109); more than `max_bytes` UTF-8 bytes →
    UserError (agents.md §2.3 item 1). Returned as given: surrounding whitespace is kept."""
    text = value() if callable(value) else value
    if not text:
        raise UserError(f"{what} is empty")
    if text.isspace():
        raise UserError(f"{what} is only whitespace")
    size = len(text.encode("utf-8"))
    if max_bytes is not None and size > max_bytes:
        raise UserError(f"{what} is {size} bytes; the limit is {max_bytes}")
    return text


def first_channel(event: Event) -> str | None:
    """The first `h` value that is a canonical channel id (agents.md §3.1)."""
    return next((h for h in event.tag_values("h") if is_channel_id(h)), None)
