"""Progress titles without private detail (jobs spec §6.6 item 1): absolute paths become `…`,
URLs lose their user-info, and a title is cut to 160 characters."""

from __future__ import annotations

import re

from buzz.jobs.limits import TITLE_MAX_CHARS

# A path starting at a root (`/x`, `~/x`, `C:\x`), up to the next whitespace or quote.
_PATH = re.compile(r"""(?<![\w:/.])(?:~[/\\]|[A-Za-z]:[\\/]|/)[^\s'"`)]*""")
_USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)[^/\s@]*@")


def redact_title(title: str) -> str:
    """`title` safe to publish in a 43003."""
    out = _USERINFO.sub(r"\1", title)
    out = _PATH.sub("…", out)
    out = " ".join(out.split())
    if len(out) > TITLE_MAX_CHARS:
        out = out[: TITLE_MAX_CHARS - 1] + "…"
    return out
