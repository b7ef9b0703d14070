"""Which blobs an event references, and the ingest checks of its local `imeta` tags
(media.md §9.2, §9.3 item 2), pure. The lookups between the steps (is the blob stored, may the
author read it) are the relay's: `buzz.relay.media_rules`.

Steps, each failure an `ImetaError` whose text follows `invalid: `:
1. `local_imeta`: at most 20 `imeta` tags; each local one (its `url` starts with `<base>/`)
   names `<base>/<x>[.<ext>]` and its `x` is that hash.
2. (relay) the blob is stored and the author may read it, else `imeta blob not found: <x>`.
3. `check_fields`: `m`, `size` (and `dim` for an image) present and equal to the stored blob,
   the URL's extension the stored one, `thumb` (when given) the blob's thumbnail URL.
"""

from __future__ import annotations

from dataclasses import dataclass

import orjson

from buzz.core.blossom import BlobName, parse_blob_name, thumb_url
from buzz.core.event import Event
from buzz.core.imeta import MAX_IMETA_PER_EVENT, imeta_tags
from buzz.media.sniff import IMAGE_TYPES
from buzz.store.base import BlobRow

PROFILE_KIND = 0
PROFILE_URL_FIELDS = ("picture", "banner")


class ImetaError(ValueError):
    """An imeta refusal; `str()` is the text after `invalid: `."""


@dataclass(frozen=True, slots=True)
class LocalRef:
    """One local imeta tag: the blob its URL names and the tag's fields."""

    blob: BlobName
    fields: dict[str, str]

    @property
    def sha256(self) -> str:
        return self.blob.sha256


def is_local(url: str, base: str) -> bool:
    return url.startswith(base + "/")


def _name_of(url: str, base: str) -> BlobName | None:
    rest = url[len(base) + 1 :]
    if "/" in rest or "?" in rest or "#" in rest:
        return None
    name = parse_blob_name(rest)
    return None if name is None or name.thumb else name


def local_imeta(event: Event, base: str) -> list[LocalRef]:
    """Step 1: the event's local imeta tags, in order. Raises ImetaError."""
    tags = imeta_tags(event)
    if len(tags) > MAX_IMETA_PER_EVENT:
        raise ImetaError(f"too many imeta tags (max {MAX_IMETA_PER_EVENT})")
    refs = []
    for fields in tags:
        url = fields.get("url", "")
        if not is_local(url, base):
            continue
        name = _name_of(url, base)
        if name is None or fields.get("x") != name.sha256:
            raise ImetaError("imeta x does not match url")
        refs.append(LocalRef(name, fields))
    return refs


def _required(ref: LocalRef, key: str) -> str:
    value = ref.fields.get(key)
    if value is None or value == "":
        raise ImetaError(f"imeta missing {key}")
    return value


def check_fields(ref: LocalRef, blob: BlobRow, base: str) -> None:
    """Step 3 against the stored `blob`. Raises ImetaError."""
    if _required(ref, "m") != blob.type:
        raise ImetaError("imeta m does not match the stored blob")
    if _required(ref, "size") != str(blob.size):
        raise ImetaError("imeta size does not match the stored blob")
    if blob.type in IMAGE_TYPES and blob.width is not None:
        if _required(ref, "dim") != f"{blob.width}x{blob.height}":
            raise ImetaError("imeta dim does not match the stored blob")
    if ref.blob.ext is not None and ref.blob.ext != blob.ext:
        raise ImetaError("imeta ext does not match the stored blob")
    thumb = ref.fields.get("thumb")
    if thumb is not None and (not blob.has_thumb or thumb != thumb_url(base, blob.sha256)):
        raise ImetaError("imeta thumb does not match the stored blob")


def profile_refs(event: Event, base: str) -> list[str]:
    """§9.3 item 2: hashes of local blob URLs in a kind 0's `picture` / `banner` (no refusal:
    an unparsable profile or URL simply references nothing)."""
    if event.kind != PROFILE_KIND:
        return []
    try:
        body = orjson.loads(event.content)
    except orjson.JSONDecodeError:
        return []
    if not isinstance(body, dict):
        return []
    found = []
    for key in PROFILE_URL_FIELDS:
        url = body.get(key)
        if isinstance(url, str) and is_local(url, base) and (name := _name_of(url, base)) is not None:
            found.append(name.sha256)
    return list(dict.fromkeys(found))
