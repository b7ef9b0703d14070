"""Blobs in `buzz admin backup` and `restore` (issue 26 item 4): the files of the `files` store
go into the archive with the SQLite snapshot, come back into the restored data directory, and a
relay started there serves them — bytes, thumbnail and per-channel access — as before."""

from __future__ import annotations

import os
import tarfile
from pathlib import Path

from buzz.client import RelayClient
from buzz.core.event import Event
from tests.media.support import get, imeta_of, png, upload
from tests.operator.support import admin, served
from tests.support.relay import Identity
from tests.workspace.helpers import accepted, create_channel


async def test_blobs_survive_backup_and_restore(tmp_path: Path) -> None:
    data, restored, archive = tmp_path / "data", tmp_path / "restored", tmp_path / "backup.tar.gz"
    alice, carol = Identity.new(), Identity.new()
    picture, report = png(300, 200), b"%PDF-1.4\n" + os.urandom(50_000)
    async with served(data) as relay:
        shot = await upload(relay.http_url, alice, picture)
        pdf = await upload(relay.http_url, alice, report)
        async with RelayClient(relay.url, alice.secret) as client:
            channel = await create_channel(client, alice, "private")
            await accepted(
                client, Event.create(alice.secret, 9, shot["url"], [["h", channel], imeta_of(shot)])
            )
        shown = admin(data, "backup", str(archive))
        await relay.stop()
    assert shown["files"] == ["relay.sqlite3", "relay.key"] and shown["media_files"] == 3
    assert "media_missing" not in shown
    with tarfile.open(archive) as tar:
        names = set(tar.getnames())
    h1, h2 = shot["sha256"], pdf["sha256"]
    assert {
        f"data/media/{h1[:2]}/{h1}",
        f"data/media/{h1[:2]}/{h1}.thumb.jpg",
        f"data/media/{h2[:2]}/{h2}",
    } <= names

    done = admin(restored, "restore", str(archive))
    assert done["media_files"] == 3
    async with served(restored, log_name="restored.log") as again:
        got = await get(again.http_url, alice, h1)
        assert (got.status, got.body) == (200, picture)
        assert (await get(again.http_url, alice, f"{h1}.thumb.jpg")).status == 200
        assert (await get(again.http_url, alice, f"{h2}.pdf")).body == report
        assert (await get(again.http_url, carol, h1)).status == 404  # still private to the channel
        await again.stop()
