"""`@Name` in a workflow message → the member's pubkey (workflows.md §8.1 item 3), pure.

Case-insensitive, longest names first; the `@` must start the text or follow a character that
is not a name character, and the character after the name must not be one. A name shared by
two members is ambiguous and adds nothing.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping

from buzz.workflows.limits import MAX_MENTIONS


def _name_char(ch: str) -> bool:
    return ch.isalnum() or ch in "_-"


def display_name(profile_content: str) -> str | None:
    """A kind 0's `display_name`, else `name`, else None."""
    try:
        meta = json.loads(profile_content)
    except ValueError:
        return None
    if not isinstance(meta, dict):
        return None
    for key in ("display_name", "name"):
        value = meta.get(key)
        if isinstance(value, str) and value.strip():
            return value.strip()
    return None


def unique_names(names: Mapping[str, str]) -> dict[str, str]:
    """pubkey → name becomes lowercased name → pubkey, dropping names two members share."""
    seen: dict[str, str | None] = {}
    for pubkey, name in names.items():
        key = name.lower()
        seen[key] = None if key in seen and seen[key] != pubkey else pubkey
    return {k: v for k, v in seen.items() if v is not None}


def resolve_one(name: str, names: Mapping[str, str]) -> str | None:
    """The member whose name is exactly `name` (case-insensitive), when unique."""
    return unique_names(names).get(name.lower())


def mentioned(text: str, names: Mapping[str, str]) -> list[str]:
    """Pubkeys of the members `text` mentions, in order of first mention, at most MAX_MENTIONS."""
    table = unique_names(names)
    ambiguous = {n.lower() for n in names.values()} - table.keys()
    by_length = sorted(table.keys() | ambiguous, key=len, reverse=True)
    lower = text.lower()
    found: list[str] = []
    i = lower.find("@")
    while i != -1 and len(found) < MAX_MENTIONS:
        if i == 0 or not _name_char(lower[i - 1]):
            rest = lower[i + 1 :]
            for name in by_length:
                end = len(name)
                if rest.startswith(name) and (end == len(rest) or not _name_char(rest[end])):
                    pubkey = table.get(name)
                    if pubkey is not None and pubkey not in found:
                        found.append(pubkey)
                    break
        i = lower.find("@", i + 1)
    return found


def names_of(profiles: Iterable[tuple[str, str]]) -> dict[str, str]:
    """(pubkey, kind 0 content) pairs → pubkey → display name."""
    out: dict[str, str] = {}
    for pubkey, content in profiles:
        name = display_name(content)
        if name is not None:
            out[pubkey] = name
    return out
