"""The media tables behind the one store interface (media.md §9.3, §10, §11, §12): the same
tests on SQLite and PostgreSQL."""

from __future__ import annotations

from pathlib import Path

import pytest

from buzz.core.event import Event
from buzz.core.stored import verify_stored
from buzz.store.base import (
    BlobRow,
    Channel,
    CreateChannel,
    DeleteChannel,
    MediaBlobMissing,
    PutMediaRefs,
    SoftDelete,
)
from buzz.store.sqlbase import SqlStore
from tests.support.relay import Identity

H1, H2 = "a1" * 32, "b2" * 32


def row(sha: str, size: int = 100) -> BlobRow:
    return BlobRow(sha, "image/png", "png", size, 4, 3, "LEHV6nWB", True)


async def test_put_is_idempotent_and_records_uploaders(store: SqlStore, tmp_path: Path) -> None:
    body = tmp_path / "b"
    body.write_bytes(b"x" * (3 << 20) + b"tail")
    stored, first = await store.media_put(
        row(H1, body.stat().st_size), "aa" * 32, 1000, [(H1, str(body))], 1 << 20
    )
    assert (stored.created_at, stored.last_upload_at, first) == (1000, 1000, 1000)
    again, same = await store.media_put(row(H1), "aa" * 32, 2000, [(H1, str(body))], 1 << 20)
    assert (again.created_at, again.last_upload_at, same, again.size) == (
        1000,
        2000,
        1000,
        body.stat().st_size,
    )
    _, other = await store.media_put(row(H1), "bb" * 32, 3000)
    assert other == 3000
    assert await store.media_uploaded_at(H1, "bb" * 32) == 3000
    assert await store.media_uploaded_at(H1, "cc" * 32) is None
    assert await store.media_usage("aa" * 32) == body.stat().st_size
    assert await store.media_usage(None) == body.stat().st_size
    chunks = await store.media_chunks(H1, 0, 10)
    assert [len(c) for c in chunks] == [1 << 20, 1 << 20, 1 << 20, 4]
    assert b"".join(await store.media_chunks(H1, 3, 3)) == b"tail"


async def test_references_follow_liveness(store: SqlStore) -> None:
    alice = Identity.new()
    await store.media_put(row(H1), alice.pubkey, 1000)
    channel = Channel("3f2b7c1e-8a4d-4e2f-9c1a-5b6d7e8f9a0b", "c", "private", alice.pubkey, 1)
    create = verify_stored(Event.create(alice.secret, 9007, "", [["h", channel.id]]))
    await store.insert(create.with_channel(channel.id), [CreateChannel(channel)])
    message = verify_stored(Event.create(alice.secret, 9, "x", [["h", channel.id]])).with_channel(channel.id)
    await store.insert(message, [PutMediaRefs(message.event.id, (H1,))])
    assert await store.media_collectable(cutoff=10**10) == []
    # a reader who cannot read the channel sees no referencing event; nor anyone once it is deleted
    assert await store.media_readable_refs(H1, "cc" * 32, 10) == []
    note = verify_stored(Event.create(alice.secret, 1, "note", []))
    await store.insert(note, [PutMediaRefs(note.event.id, (H1,))])
    assert [e.event.id for e in await store.media_readable_refs(H1, "cc" * 32, 10)] == [note.event.id]
    deletion = verify_stored(Event.create(alice.secret, 5, "", [["e", note.event.id]]))
    await store.insert(deletion, [SoftDelete(note.event.id)])
    gone = verify_stored(Event.create(alice.secret, 9008, "", [["h", channel.id]])).with_channel(channel.id)
    await store.insert(gone, [DeleteChannel(channel.id)])
    assert await store.media_collectable(cutoff=999) == []  # within the grace (last upload 1000)
    assert await store.media_collectable(cutoff=10**10) == [H1]
    collected = await store.media_collect(H1, cutoff=10**10)
    assert collected is not None and collected.sha256 == H1
    assert await store.media_blob(H1) is None and await store.media_uploaded_at(H1, alice.pubkey) is None
    assert await store.media_collect(H1, cutoff=10**10) is None


async def test_reference_to_a_missing_blob_rolls_back(store: SqlStore) -> None:
    alice = Identity.new()
    note = verify_stored(Event.create(alice.secret, 1, "note", []))
    with pytest.raises(MediaBlobMissing, match=f"imeta blob not found: {H2}"):
        await store.insert(note, [PutMediaRefs(note.event.id, (H2,))])
    assert await store.get(note.event.id) is None
    assert await store.media_known([H1, H2]) == frozenset()
