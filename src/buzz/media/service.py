"""The media runner: uploads after their authorization, read access, references at ingest and
the collection of unreferenced blobs (media.md §4, §8, §9, §12). The relay's HTTP routes
(`buzz.relay.media_routes`) and its ingest rules call it; it reads and writes through the store
and a byte store (`buzz.media.blobs`).

Refusals are `MediaRefusal(status, reason)`: the routes answer them with `X-Reason: <reason>`
and `{"error": <reason>}`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from dataclasses import dataclass
from typing import Any

from buzz.core.blossom import blob_url, thumb_url
from buzz.core.errors import Invalid
from buzz.core.event import Event
from buzz.core.stored import StoredEvent
from buzz.core.visibility import visible_by_sets
from buzz.media import receive as receiving
from buzz.media.blobs import ByteStore
from buzz.media.images import ImageRefused, ImageWorker
from buzz.media.imeta import PROFILE_KIND, ImetaError, check_fields, local_imeta, profile_refs
from buzz.media.limits import (
    ACCESS_CACHE_ENTRIES,
    ACCESS_CACHE_TTL_S,
    GC_INTERVAL_S,
    MEDIA_ORPHAN_GRACE_S,
    REF_SCAN_MAX,
    MediaSettings,
)
from buzz.media.rates import UploadSlots
from buzz.media.receive import Received
from buzz.media.sniff import IMAGE_TYPES, TYPES, Refused, cap_class, check_declared, sniff
from buzz.store.base import BlobRow, EventStore, PutMediaRefs, StoreError

log = logging.getLogger(__name__)


class MediaRefusal(Exception):
    """An HTTP refusal of a media route: `status`, the X-Reason `reason`, extra headers."""

    def __init__(self, status: int, reason: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason
        self.headers = headers or {}


def too_large(size: int, cap: int) -> MediaRefusal:
    return MediaRefusal(413, f"file too large ({size} bytes, max {cap})")


@dataclass
class Ticket:
    """An admitted upload: its slot is held until `MediaService.release`."""

    pubkey: str
    sha256: str
    length: int
    declared: str | None
    taken: bool = False


class MediaService:
    def __init__(self, settings: MediaSettings, base: str, store: EventStore, blobs: ByteStore) -> None:
        self.settings = settings
        self.base = base
        self.store = store
        self.blobs = blobs
        self.images = ImageWorker()
        self.slots = UploadSlots(
            settings.uploads_per_replica, settings.uploads_per_pubkey, settings.uploads_per_minute
        )
        self._access: dict[tuple[str, str], tuple[float, bool]] = {}
        self._gc: asyncio.Task[None] | None = None

    # -- upload (media.md §4.1 items 3–12) ---------------------------------------------------
    def cap_for(self, declared: str | None) -> int:
        cls = cap_class(declared)
        return self.settings.caps[cls] if cls is not None else self.settings.max_cap

    async def admit(
        self, pubkey: str, sha256: str, length: int | None, declared: str | None, take: bool
    ) -> Ticket:
        """Items 3–5 (and §5.3 item 2 for the declared type) before any body byte is read;
        with `take`, the upload's slot is taken (release it with `release`). Raises MediaRefusal."""
        if length is None:
            raise MediaRefusal(411, "length required")
        try:
            check_declared(declared)
        except Refused as exc:
            raise MediaRefusal(415, f"content type not allowed: {exc.type}") from None
        cap = self.cap_for(declared)
        if length > cap:
            raise too_large(length, cap)
        held = await self.store.media_uploaded_at(sha256, pubkey) is not None
        if not held and self.settings.quota_bytes:
            used = await self.store.media_usage(pubkey) + self.slots.reserved(pubkey)
            if used + length > self.settings.quota_bytes:
                raise MediaRefusal(413, "quota exceeded")
        if not held and self.settings.max_total_bytes:
            stored = await self.store.media_blob(sha256) is not None
            if not stored and await self.store.media_usage(None) + length > self.settings.max_total_bytes:
                raise MediaRefusal(507, "storage full")
        now = time.monotonic()
        wait = self.slots.take(pubkey, length, now) if take else self.slots.wait_s(pubkey, now)
        if wait is not None:
            raise MediaRefusal(429, "too many uploads", {"Retry-After": str(wait)})
        return Ticket(pubkey, sha256, length, declared, taken=take)

    def release(self, ticket: Ticket) -> None:
        if ticket.taken:
            ticket.taken = False
            self.slots.release(ticket.pubkey, ticket.length)

    async def store_upload(self, ticket: Ticket, body: Received) -> dict[str, Any]:
        """Items 9–12 for a received, hash-checked body: type, image checks, commit; the blob
        descriptor. Raises MediaRefusal; the body file stays the caller's to remove."""
        existing = await self.store.media_blob(body.sha256)
        if existing is not None:  # item 11: a stored blob keeps its bytes and metadata
            row, uploaded = await self.blobs.commit(
                existing, ticket.pubkey, int(time.time()), body.path, None
            )
            return self._granted(row, uploaded, ticket.pubkey)
        facts = await asyncio.to_thread(receiving.facts, body.path, ticket.declared)
        try:
            mime = sniff(facts, ticket.declared)
        except Refused as exc:
            raise MediaRefusal(415, f"content type not allowed: {exc.type}") from None
        info = TYPES[mime]
        cap = self.settings.caps[info.cls]
        if body.size > cap:
            raise too_large(body.size, cap)
        row = BlobRow(body.sha256, mime, info.ext, body.size)
        thumb = None
        if mime in IMAGE_TYPES:
            try:
                image = await self.images.inspect(body.path)
            except ImageRefused as exc:
                raise MediaRefusal(400, str(exc)) from None
            row = BlobRow(
                body.sha256, mime, info.ext, body.size, image.width, image.height, image.blurhash, True
            )
            thumb = image.thumb
        stored, uploaded = await self.blobs.commit(row, ticket.pubkey, int(time.time()), body.path, thumb)
        return self._granted(stored, uploaded, ticket.pubkey)

    def _granted(self, row: BlobRow, uploaded: int, pubkey: str) -> dict[str, Any]:
        self._access.pop((row.sha256, pubkey), None)  # an uploader may read from now on
        return self.descriptor(row, uploaded)

    def descriptor(self, row: BlobRow, uploaded: int) -> dict[str, Any]:
        """The blob descriptor of media.md §4.3."""
        out: dict[str, Any] = {
            "url": blob_url(self.base, row.sha256, row.ext),
            "sha256": row.sha256,
            "size": row.size,
            "type": row.type,
            "uploaded": uploaded,
        }
        if row.width is not None and row.height is not None:
            out["dim"] = f"{row.width}x{row.height}"
        if row.blurhash:
            out["blurhash"] = row.blurhash
        if row.has_thumb:
            out["thumb"] = thumb_url(self.base, row.sha256)
        return out

    # -- reading (media.md §8) -----------------------------------------------------------------
    async def may_read(self, sha256: str, reader: str, *, cached: bool = True) -> bool:
        """§8 for a stored blob: `reader` is an uploader, or may see a live referencing event.
        Answers are cached ACCESS_CACHE_TTL_S per (blob, reader) when `cached`. A store failure
        raises StoreError (the caller fails closed)."""
        key = (sha256, reader)
        now = time.monotonic()
        if cached and (hit := self._access.get(key)) is not None and hit[0] > now:
            return hit[1]
        ok = await self.store.media_uploaded_at(sha256, reader) is not None
        if not ok:
            events = await self.store.media_readable_refs(sha256, reader, REF_SCAN_MAX)
            ok = any(visible_by_sets(stored.event, reader) for stored in events)
        if len(self._access) >= ACCESS_CACHE_ENTRIES:
            self._access.clear()
        self._access[key] = (now + ACCESS_CACHE_TTL_S, ok)
        return ok

    def forget_access(self, channel_id: str | None = None) -> None:
        """Drop cached access answers: channel membership or visibility changed (any channel:
        the cache is keyed by blob, and one blob may be referenced from several channels)."""
        self._access.clear()

    async def readable(self, sha256: str, reader: str) -> BlobRow | None:
        """The blob's row when it exists and `reader` may read it, else None (one answer for
        both: §7.1 item 2)."""
        row = await self.store.media_blob(sha256)
        if row is None or not await self.may_read(sha256, reader):
            return None
        return row

    # -- references at ingest (media.md §9.2, §9.3) --------------------------------------------
    @staticmethod
    def may_reference(event: Event) -> bool:
        """False when `refs_effect` would find nothing: no `imeta` tag and not a profile (most
        events; the ingest path then skips the call, decision 358)."""
        return event.kind == PROFILE_KIND or any(t and t[0] == "imeta" for t in event.tags)

    async def refs_effect(self, stored: StoredEvent, author: str) -> PutMediaRefs | None:
        """The references of an event about to be stored, checked with `author` as reader.
        Raises Invalid (`imeta …`)."""
        event = stored.event
        try:
            refs = local_imeta(event, self.base)
        except ImetaError as exc:
            raise Invalid(str(exc)) from None
        hashes: list[str] = []
        for ref in refs:
            row = await self.store.media_blob(ref.sha256) if self.settings.enabled else None
            if row is None or not await self.may_read(ref.sha256, author, cached=False):
                raise Invalid(f"imeta blob not found: {ref.sha256}")
            try:
                check_fields(ref, row, self.base)
            except ImetaError as exc:
                raise Invalid(str(exc)) from None
            hashes.append(ref.sha256)
        for sha256 in profile_refs(event, self.base):
            if await self.store.media_blob(sha256) is not None and await self.may_read(
                sha256, author, cached=False
            ):
                hashes.append(sha256)
        hashes = list(dict.fromkeys(hashes))
        return PutMediaRefs(event.id, tuple(hashes)) if hashes else None

    # -- collection (media.md §12) -------------------------------------------------------------
    async def collect(self, now: int | None = None) -> int:
        """One sweep: every collectable blob, then the byte store's leftovers. Returns how many
        blobs were collected."""
        at = int(time.time()) if now is None else now
        cutoff = at - MEDIA_ORPHAN_GRACE_S
        collected = 0
        while batch := await self.store.media_collectable(cutoff):
            done = 0
            for sha256 in batch:
                if await self.blobs.collect(sha256, cutoff):
                    done += 1
            collected += done
            if done == 0:
                break
        await self.blobs.sweep(at)
        self._access.clear()
        return collected

    def start(self) -> None:
        """The hourly sweep, starting now (media.md §12 item 2)."""
        self._gc = asyncio.get_running_loop().create_task(self._sweeps(), name="media-gc")

    async def stop(self) -> None:
        task, self._gc = self._gc, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _sweeps(self) -> None:
        while True:
            try:
                n = await self.collect()
                if n:
                    log.info("media: collected %d unreferenced blob(s)", n)
            except (StoreError, OSError) as exc:
                log.warning("media collection failed: %s", exc)
            await asyncio.sleep(GC_INTERVAL_S)
