"""Channel ids (relay.md §4.1 item 1): canonical UUID text, lowercase, 8-4-4-4-12, not nil."""

from __future__ import annotations

import re
import uuid

_CANONICAL = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
NIL = "00000000-0000-0000-0000-000000000000"


def is_channel_id(value: object) -> bool:
    """True for a canonical, non-nil UUID string."""
    return isinstance(value, str) and _CANONICAL.fullmatch(value) is not None and value != NIL


def new_channel_id() -> str:
    """A fresh random (v4) channel id in canonical form."""
    return str(uuid.uuid4())
