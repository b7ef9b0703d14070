"""What of an agent's reply is read aloud (issue 13 item 4). The channel keeps the full text.

Rules, applied in order as a table of (pattern, replacement):

- harness markers such as `[session=… turn=…]` (a bracket of `name=value` pairs) are dropped;
- fenced code blocks become "code is in the channel", inline code longer than one short word too;
- a URL is read as "a link to <host>"; Nostr keys and ids (`npub1…`, `nevent1…`, 64 hex) are dropped;
- Markdown markup (headings, emphasis, list bullets, quotes, link brackets) is removed.

Whitespace is collapsed at the end; the result may be empty (nothing is spoken then).
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit

_CODE_BLOCK = re.compile(r"```.*?(?:```|\Z)", re.DOTALL)
_MARKER = re.compile(r"\[(?:[A-Za-z_][\w.-]*=[^\]\s]*\s*)+\]")
_MD_LINK = re.compile(r"\[([^\]]+)\]\((https?://[^)\s]+)\)")
_URL = re.compile(r"\bhttps?://[^\s<>()\[\]]+", re.IGNORECASE)
_INLINE_CODE = re.compile(r"`([^`\n]*)`")
_NOSTR_ID = re.compile(
    r"\b(?:nostr:)?(?:npub|nsec|note|nevent|nprofile|naddr)1[02-9ac-hj-np-z]{6,}\b|\b[0-9a-f]{32,}\b"
)
_HEADING = re.compile(r"^\s{0,3}#{1,6}\s+", re.MULTILINE)
_BULLET = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+", re.MULTILINE)
_QUOTE = re.compile(r"^\s*>+\s?", re.MULTILINE)
_EMPHASIS = re.compile(r"(\*\*|__|\*|~~)(?=\S)(.+?)(?<=\S)\1")
_UNDERSCORE = re.compile(r"(?<!\w)_(?=\S)(.+?)(?<=\S)_(?!\w)")  # not inside snake_case names

CODE_NOTE = "code is in the channel"
SHORT_CODE_CHARS = 24


def _host(url: str) -> str:
    host = urlsplit(url.rstrip(".,;:!?")).hostname or "the web"
    return f"a link to {host.removeprefix('www.')}"


def _inline(match: re.Match[str]) -> str:
    code = match.group(1).strip()
    return code if code and len(code) <= SHORT_CODE_CHARS and " " not in code else CODE_NOTE


_RULES: tuple[tuple[re.Pattern[str], object], ...] = (
    (_CODE_BLOCK, f" {CODE_NOTE}. "),
    (_MARKER, " "),
    (_MD_LINK, lambda m: f"{m.group(1)} ({_host(m.group(2))})"),
    (_URL, lambda m: _host(m.group(0))),
    (_INLINE_CODE, _inline),
    (_NOSTR_ID, " "),
    (_HEADING, ""),
    (_BULLET, ""),
    (_QUOTE, ""),
    (_EMPHASIS, r"\2"),
    (_UNDERSCORE, r"\1"),
)


def speakable(text: str) -> str:
    """The part of `text` to synthesise, by the rules above; "" when nothing is left to say."""
    for pattern, replacement in _RULES:
        text = pattern.sub(replacement, text)  # type: ignore[call-overload]
    text = re.sub(r"\s+([.,;:!?])", r"\1", " ".join(text.split()))
    return text.strip(" .") and text
