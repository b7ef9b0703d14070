"""Mentions of `messages send`, pure (agents.md §2.3 item 2).

Explicit mentions are `--mention` values and `nostr:npub1…` URIs in the content. `@Name`
tokens are resolved against the channel members' display names (kind 0 `display_name`, else
`name`): at each `@` that starts a token, the longest member name the text continues with
(exactly, case-sensitively, ending at a non-word character) wins; a name shared by several
members is ambiguous; no matching name is unresolved.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from buzz.core import nip19

_NPUB_URI = re.compile(r"nostr:(npub1[023456789acdefghjklmnpqrstuvwxyz]+)")
_AT = re.compile(r"(?<![\w@])@(?=\w)")
_WORD = re.compile(r"\w+")


def uri_mentions(content: str) -> list[str]:
    """Hex pubkeys of the valid `nostr:npub1…` URIs in `content`, in order, de-duplicated."""
    found: list[str] = []
    for match in _NPUB_URI.finditer(content):
        try:
            hrp, data = nip19.decode(match.group(1))
        except ValueError:
            continue
        if hrp == "npub" and str(data) not in found:
            found.append(str(data))
    return found


@dataclass
class NameResolution:
    """Pubkeys resolved from `@Name` tokens, and the tokens that failed."""

    resolved: list[str] = field(default_factory=list)
    unresolved: list[str] = field(default_factory=list)
    ambiguous: list[str] = field(default_factory=list)


def resolve_names(content: str, names: Mapping[str, str]) -> NameResolution:
    """Resolve the `@Name` tokens of `content` against {pubkey: display name}."""
    by_name: dict[str, set[str]] = {}
    for pubkey, name in names.items():
        if name:
            by_name.setdefault(name, set()).add(pubkey)
    out = NameResolution()
    for at in _AT.finditer(content):
        rest = content[at.end() :]
        best: str | None = None
        for name in by_name:
            if rest.startswith(name) and (len(rest) == len(name) or not _WORD.match(rest[len(name)])):
                if best is None or len(name) > len(best):
                    best = name
        if best is None:
            token = "@" + (_WORD.match(rest).group(0) if _WORD.match(rest) else "")  # type: ignore[union-attr]
            out.unresolved.append(token)
        elif len(by_name[best]) > 1:
            out.ambiguous.append("@" + best)
        elif (pubkey := next(iter(by_name[best]))) not in out.resolved:
            out.resolved.append(pubkey)
    return out
