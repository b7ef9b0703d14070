"""Garbage collection of unreferenced blobs (media.md §12; checklist 34–36, 40): the relay's
own sweep, run with a clock two days ahead (never a sleep)."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from buzz.core.event import Event
from buzz.store.base import MediaBlobMissing, PutMediaRefs
from tests.media.support import get, imeta_of, unique_png, upload
from tests.support.relay import Identity, RunningRelay, relay_on
from tests.workspace.helpers import accepted, create_channel

LATER = 2 * 86_400


def files_of(running: RunningRelay, h: str) -> list[str]:
    folder = running.relay.config.data_dir / "media" / h[:2]
    return sorted(p.name for p in folder.iterdir()) if folder.is_dir() else []


async def test_unreferenced_blob_collected_after_grace(relay: RunningRelay, alice: Identity) -> None:
    """Checklist 34: a fresh upload survives a sweep; 24 h later it goes, bytes and thumbnail."""
    data = unique_png()
    d = await upload(relay.http_url, alice, data)
    h = d["sha256"]
    media = relay.relay.media
    assert await media.collect() == 0
    assert (await get(relay.http_url, alice, h)).status == 200
    assert await media.collect(now=int(time.time()) + LATER) == 1
    assert (await get(relay.http_url, alice, h)).status == 404
    assert await relay.relay.store.media_blob(h) is None
    if relay.relay.config.media_store == "files":
        assert files_of(relay, h) == []
    else:
        assert await relay.relay.store.media_chunks(h, 0, 10) == []
        assert await relay.relay.store.media_chunks(h + ".thumb.jpg", 0, 10) == []
    assert await upload(relay.http_url, alice, data) == dict(d, uploaded=d["uploaded"]) | {
        "uploaded": (await relay.relay.store.media_uploaded_at(h, alice.pubkey))
    }  # a collected blob can be uploaded again
    assert (await get(relay.http_url, alice, h)).body == data


async def test_deleting_the_last_reference(relay: RunningRelay, alice: Identity) -> None:
    """Checklist 35: deleting the only message frees the blob at the next sweep after the
    grace; a blob another live message references stays."""
    one, two = (
        await upload(relay.http_url, alice, unique_png()),
        await upload(relay.http_url, alice, unique_png()),
    )
    async with relay.client(alice) as ca:
        ch = await create_channel(ca, alice, "open")
        m1 = Event.create(alice.secret, 9, one["url"], [["h", ch], imeta_of(one)])
        m2 = Event.create(alice.secret, 9, two["url"], [["h", ch], imeta_of(two)])
        m3 = Event.create(alice.secret, 9, "again\n" + two["url"], [["h", ch], imeta_of(two)])
        for m in (m1, m2, m3):
            await accepted(ca, m)
        later = int(time.time()) + LATER
        assert await relay.relay.media.collect(now=later) == 0  # all referenced
        for target in (m1, m2):
            await accepted(ca, Event.create(alice.secret, 5, "", [["h", ch], ["e", target.id]]))
        assert await relay.relay.media.collect(now=later) == 1
        assert await relay.relay.store.media_blob(one["sha256"]) is None
        assert await relay.relay.store.media_blob(two["sha256"]) is not None


async def test_reference_racing_a_sweep(relay: RunningRelay, alice: Identity) -> None:
    """Checklist 36: a reference committed against a sweep never leaves a live reference to a
    missing blob: either the sweep keeps the blob, or the reference is refused."""
    store = relay.relay.store
    later = int(time.time()) + LATER
    async with relay.client(alice) as ca:
        ch = await create_channel(ca, alice, "open")
        for _ in range(5):
            d = await upload(relay.http_url, alice, unique_png())
            event = Event.create(alice.secret, 9, d["url"], [["h", ch], imeta_of(d)])
            posted, swept = await asyncio.gather(ca.publish(event), relay.relay.media.collect(now=later))
            blob = await store.media_blob(d["sha256"])
            if posted.accepted:
                assert blob is not None and swept == 0
            else:
                assert posted.message == f"invalid: imeta blob not found: {d['sha256']}"
                assert blob is None
    # the effect alone, on a blob that is gone: the whole insert is refused
    from buzz.core.stored import verify_stored

    event = Event.create(alice.secret, 1, "note", [])
    try:
        await store.insert(verify_stored(event), [PutMediaRefs(event.id, ("ab" * 32,))])
    except MediaBlobMissing as exc:
        assert str(exc) == f"invalid: imeta blob not found: {'ab' * 32}"
    else:
        raise AssertionError("a reference to a missing blob was stored")
    assert await store.get(event.id) is None


async def test_files_survive_a_restart(tmp_path: Path, alice: Identity) -> None:
    """Checklist 40: with SQLite the bytes live under <data>/media/ and survive a restart."""
    data = unique_png()
    async with relay_on(tmp_path) as running:
        d = await upload(running.http_url, alice, data)
        assert files_of(running, d["sha256"]) == sorted([d["sha256"], d["sha256"] + ".thumb.jpg"])
    async with relay_on(tmp_path) as running:
        answer = await get(running.http_url, alice, d["sha256"])
        assert (answer.status, answer.body) == (200, data)


async def test_sweep_removes_crash_leftovers(tmp_path: Path, alice: Identity) -> None:
    """media.md §10.2 item 3: old temporary files and old blob files without metadata go."""
    import os

    async with relay_on(tmp_path) as running:
        root = running.relay.config.data_dir / "media"
        (root / "tmp").mkdir(parents=True, exist_ok=True)
        stale = root / "tmp" / "upload-crashed"
        stale.write_bytes(b"x")
        orphan = root / "ab" / ("ab" * 32)
        orphan.parent.mkdir(parents=True, exist_ok=True)
        orphan.write_bytes(b"y")
        d = await upload(running.http_url, alice, unique_png())
        old = time.time() - LATER
        for path in (stale, orphan):
            os.utime(path, (old, old))
        await running.relay.media.collect()
        assert not stale.exists() and not orphan.exists()
        assert files_of(running, d["sha256"])  # a fresh, known blob stays
