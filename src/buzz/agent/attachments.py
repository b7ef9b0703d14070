"""Files attached to the events of a turn, handed to the agent (media.md §14.1).

For each event of a batch, every `imeta` tag whose URL names a blob (`…/<sha256>[.<ext>]`) is
downloaded from the agent's relay with the agent's key into
`<cwd>/.scratch/attachments/<sha256>.<ext>` (skipped when a file with that hash is there), at
most HARNESS_ATTACH_MAX_FILE per file and HARNESS_ATTACH_MAX_BATCH per batch. The agent gets,
after the event block, a `resource_link` per file, plus an `image` block (≤ 5 MiB) when its
`initialize` advertised `promptCapabilities.image`, plus an embedded text `resource` (≤ 256 KiB,
text or JSON) when it advertised `promptCapabilities.embeddedContext`. The event block lists
each file on an `Attachment:` line: name, type, size and local path, or why it was not
downloaded. Attached files are untrusted content, like message text.

`plan` and `attachment_lines` are pure; `fetch` and `content_blocks` do the I/O.
"""

from __future__ import annotations

import base64
import hashlib
import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from buzz.client.errors import WorkspaceError
from buzz.client.files import Files
from buzz.core.blossom import BlobName, parse_blob_url
from buzz.core.event import Event
from buzz.core.imeta import imeta_tags, valid_name

log = logging.getLogger(__name__)

MIB = 1024 * 1024
HARNESS_ATTACH_MAX_FILE = 25 * MIB
HARNESS_ATTACH_MAX_BATCH = 50 * MIB
HARNESS_INLINE_IMAGE_MAX = 5 * MIB
HARNESS_EMBED_TEXT_MAX = 256 * 1024
ATTACHMENTS_DIR = Path(".scratch") / "attachments"
INLINE_IMAGE_TYPES = frozenset({"image/jpeg", "image/png", "image/gif", "image/webp"})


@dataclass(frozen=True, slots=True)
class Attachment:
    """One attached file of one event: where it is (`path`), or why not (`reason`)."""

    event_id: str
    url: str
    blob: BlobName
    name: str
    type: str
    size: int | None
    path: str | None = None
    reason: str | None = None


def _size(value: str | None) -> int | None:
    return int(value) if value is not None and value.isdigit() else None


def plan(events: Sequence[Event]) -> list[Attachment]:
    """The attachments of `events`, in order, before any download (one per blob per event)."""
    found: list[Attachment] = []
    for event in events:
        seen: set[str] = set()
        for fields in imeta_tags(event):
            url = fields.get("url", "")
            blob = parse_blob_url(url)
            if blob is None or blob.thumb or blob.sha256 in seen:
                continue
            seen.add(blob.sha256)
            name = fields.get("name", "")
            if not valid_name(name):
                name = f"{blob.sha256}.{blob.ext}" if blob.ext else blob.sha256
            mime = fields.get("m") or "application/octet-stream"
            found.append(Attachment(event.id, url, blob, name, mime, _size(fields.get("size"))))
    return found


def local_name(att: Attachment) -> str:
    return f"{att.blob.sha256}.{att.blob.ext}" if att.blob.ext else att.blob.sha256


def attachment_lines(atts: Iterable[Attachment]) -> list[str]:
    """The `Attachment:` lines of one event block."""
    lines = []
    for att in atts:
        if att.path is not None:
            lines.append(f"Attachment: {att.name} ({att.type}, {att.size} bytes) at {att.path}")
        else:
            lines.append(f"Attachment: {att.name} ({att.type}) not downloaded: {att.reason} — {att.url}")
    return lines


def _has_hash(path: Path, sha256: str) -> bool:
    if not path.is_file():
        return False
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        while piece := fh.read(MIB):
            digest.update(piece)
    return digest.hexdigest() == sha256


async def fetch(files: Files, cwd: Path, events: Sequence[Event]) -> list[Attachment]:
    """Download the attachments of `events` (module rules); each comes back with its `path`
    or its `reason`. Never raises for one file: a failure is that file's reason."""
    folder = cwd / ATTACHMENTS_DIR
    out: list[Attachment] = []
    budget = HARNESS_ATTACH_MAX_BATCH
    for att in plan(events):
        target = folder / local_name(att)
        if att.size is not None and att.size > HARNESS_ATTACH_MAX_FILE:
            out.append(_without(att, f"larger than {HARNESS_ATTACH_MAX_FILE // MIB} MiB"))
            continue
        if att.size is not None and att.size > budget:
            out.append(_without(att, f"over the {HARNESS_ATTACH_MAX_BATCH // MIB} MiB per turn"))
            continue
        try:
            folder.mkdir(parents=True, exist_ok=True)
            if _has_hash(target, att.blob.sha256):
                size = target.stat().st_size
            else:
                got = await files.download(
                    att.blob, folder, local_name(att), max_bytes=min(HARNESS_ATTACH_MAX_FILE, budget)
                )
                size = got.size
        except WorkspaceError as exc:
            out.append(_without(att, exc.relay_message or exc.message))
            continue
        except OSError as exc:
            out.append(_without(att, f"cannot save it: {exc.strerror or exc}"))
            continue
        budget -= size
        out.append(
            Attachment(att.event_id, att.url, att.blob, att.name, att.type, size, str(target.resolve()))
        )
    return out


def _without(att: Attachment, reason: str) -> Attachment:
    log.info("attachment %s of %s not downloaded: %s", att.blob.sha256[:12], att.event_id[:12], reason)
    return Attachment(att.event_id, att.url, att.blob, att.name, att.type, att.size, None, reason)


def _is_text(mime: str) -> bool:
    return mime.startswith("text/") or mime == "application/json"


def content_blocks(atts: Iterable[Attachment], capabilities: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The ACP prompt content for the downloaded attachments (reads the files)."""
    blocks: list[dict[str, Any]] = []
    for att in atts:
        if att.path is None:
            continue
        uri = Path(att.path).as_uri()
        blocks.append(
            {"type": "resource_link", "uri": uri, "name": att.name, "mimeType": att.type, "size": att.size}
        )
        size = att.size or 0
        if capabilities.get("image") and att.type in INLINE_IMAGE_TYPES and size <= HARNESS_INLINE_IMAGE_MAX:
            data = base64.b64encode(Path(att.path).read_bytes()).decode()
            blocks.append({"type": "image", "data": data, "mimeType": att.type, "uri": uri})
        if capabilities.get("embeddedContext") and _is_text(att.type) and size <= HARNESS_EMBED_TEXT_MAX:
            text = Path(att.path).read_bytes().decode("utf-8", "replace")
            blocks.append({"type": "resource", "resource": {"uri": uri, "mimeType": att.type, "text": text}})
    return blocks


def by_event(atts: Iterable[Attachment]) -> dict[str, list[Attachment]]:
    out: dict[str, list[Attachment]] = {}
    for att in atts:
        out.setdefault(att.event_id, []).append(att)
    return out
