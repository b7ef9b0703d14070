"""NIP-92 `imeta` tags (media.md §9.1), pure: parse one into its fields, build one from a blob
descriptor. Validation against stored blobs is the relay's (`buzz.media.imeta`).

A tag is `["imeta", "url <u>", "m <type>", "x <sha256>", "size <n>", "dim <w>x<h>", …]`; each
element after the first is `<key> <value>` split at the first space. The first occurrence of a
key wins; unknown keys are kept. `name` (the original file name) is this project's addition.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from buzz.core.event import Event

MAX_IMETA_PER_EVENT = 20
IMETA_NAME_MAX_BYTES = 255
KEY_ORDER = ("url", "m", "x", "size", "dim", "blurhash", "thumb", "alt", "name")


def parse_imeta(tag: Sequence[str]) -> dict[str, str]:
    """The `key value` fields of one imeta tag (first occurrence wins; an element without a
    space is a key with an empty value)."""
    fields: dict[str, str] = {}
    for item in tag[1:]:
        key, _, value = item.partition(" ")
        fields.setdefault(key, value)
    return fields


def imeta_tags(event: Event) -> list[dict[str, str]]:
    """The parsed `imeta` tags of an event, in order."""
    return [parse_imeta(t) for t in event.tags if t and t[0] == "imeta"]


def valid_name(name: str) -> bool:
    """A file name an imeta `name` may carry: 1–255 UTF-8 bytes, no `/`, no control characters."""
    if not name or len(name.encode("utf-8")) > IMETA_NAME_MAX_BYTES or "/" in name:
        return False
    return not any(ord(c) < 0x20 or ord(c) == 0x7F for c in name)


def imeta_tag(fields: Mapping[str, object]) -> list[str]:
    """An imeta tag from fields (a blob descriptor plus `name` / `alt`), keys in KEY_ORDER then
    any others; None and empty values are left out."""
    keys = [k for k in KEY_ORDER if k in fields] + sorted(k for k in fields if k not in KEY_ORDER)
    tag = ["imeta"]
    for key in keys:
        value = fields[key]
        if value is None or value == "":
            continue
        tag.append(f"{key} {value}")
    return tag
