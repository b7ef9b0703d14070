"""`buzz admin backup` and `buzz admin restore` against real relay processes (issue 24 items 4
and 16): a backup taken while a client keeps writing completes, holds the relay's key, and
restores into a new data directory where a relay starts with the same pubkey and the same events.
"""

from __future__ import annotations

import asyncio
import io
import json
import shlex
import stat
import subprocess
import tarfile
from pathlib import Path

import aiohttp
import orjson
import pytest

from buzz.client import RelayClient
from buzz.core.event import Event
from buzz.relay.operator.relay_key import load_or_create
from buzz.store import open_store
from buzz.store.archive import MANIFEST
from tests.operator.support import BUZZ, admin, buzz, clean_env, served
from tests.support.deadline import scaled
from tests.support.relay import Identity

# 12 MB, about 4,400 SQLite pages: a copy in several steps, as before, restarted whenever the
# burst committed between two of them (tests/store/test_sqlite_snapshot.py measures that alone)
SEED_EVENTS = 60
SEED_BYTES = 200_000
BURST_WRITERS = 4  # clients publishing one note after the other: commits without a pause
BACKUP_HANG_GUARD_S = 60  # not a bound: a backup that restarts at every commit never ends


async def _relay_self(http_url: str) -> str:
    async with aiohttp.ClientSession() as http:
        async with http.get(http_url, headers={"Accept": "application/nostr+json"}) as resp:
            return str((await resp.json(content_type=None))["self"])


async def _burst(url: str, who: Identity, acked: list[str], refused: list[str], stop: asyncio.Event) -> None:
    """Publish small notes one after the other until `stop`: each acknowledged id is recorded."""
    async with RelayClient(url, who.secret) as client:
        n = 0
        while not stop.is_set():
            event = Event.create(who.secret, 1, f"burst {id(client)} {n}", [])
            result = await client.publish(event)
            (acked if result.accepted else refused).append(event.id if result.accepted else result.message)
            n += 1


async def _until(condition: object, what: str) -> None:
    async with asyncio.timeout(scaled(30)):
        while not condition():  # type: ignore[operator]
            await asyncio.sleep(0.02)


async def test_a_backup_during_a_write_burst_restores_the_same_events_and_relay_key(tmp_path: Path) -> None:
    data, restored, archive = tmp_path / "data", tmp_path / "restored", tmp_path / "buzz-backup.tar.gz"
    alice = Identity.new()
    async with served(data) as relay:
        original_self = await _relay_self(relay.http_url)
        async with RelayClient(relay.url, alice.secret) as client:
            seeded = []
            for n in range(SEED_EVENTS):
                event = Event.create(alice.secret, 1, f"{n:04d}" + "s" * SEED_BYTES, [])
                assert (await client.publish(event)).accepted
                seeded.append(event.id)

        acked: list[str] = []
        refused: list[str] = []
        stop = asyncio.Event()
        burst = asyncio.gather(
            *(_burst(relay.url, alice, acked, refused, stop) for _ in range(BURST_WRITERS))
        )
        await _until(lambda: len(acked) >= 20 or burst.done(), "the burst to write")
        acked_before = list(acked)
        proc = await asyncio.create_subprocess_exec(
            BUZZ, "--format", "compact", "admin", "--data-dir", str(data), "backup", str(archive),
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=clean_env(),
        )  # fmt: skip
        try:
            stdout, stderr = await asyncio.wait_for(proc.communicate(), BACKUP_HANG_GUARD_S)
        except TimeoutError:
            proc.kill()
            await proc.wait()
            pytest.fail(
                f"the backup did not complete while the relay took writes ({len(acked)} acknowledged)"
            )
        finally:
            acked_after = len(acked)
            stop.set()
            await burst
        assert proc.returncode == 0, stderr.decode()
        assert acked_after > len(acked_before) and not refused  # writes went on while it ran
        await relay.stop()

    shown = orjson.loads(stdout)
    assert shown["backend"] == "sqlite" and shown["relay_pubkey"] == original_self
    assert shown["files"] == ["relay.sqlite3", "relay.key"] and shown["bytes"] == archive.stat().st_size
    assert stat.S_IMODE(archive.stat().st_mode) == 0o600  # it holds the relay's secret key
    with tarfile.open(archive) as tar:
        names = tar.getnames()
        key_info = tar.getmember("data/relay.key")
    assert names[0] == MANIFEST and stat.S_IMODE(key_info.mode) == 0o600

    done = admin(restored, "restore", str(archive))
    assert done["relay_pubkey"] == original_self and done["counts"] == shown["counts"]
    assert stat.S_IMODE((restored / "relay.key").stat().st_mode) == 0o600
    assert (restored / "relay.key").read_text() == (data / "relay.key").read_text()

    async with served(restored, log_name="restored.log") as again:
        assert await _relay_self(again.http_url) == original_self
        assert any(original_self[:6] in line for line in again.banner if "relay pubkey" in line)
        async with RelayClient(again.url, alice.secret) as client:
            stored = await client.count([{"kinds": [1]}])
            wanted = seeded + acked_before
            # one answer holds at most 4 MiB of events (decision 145) and the seeds are 200 KB
            # each: ask again for what is still missing, as a client pages any cut answer
            found: set[str] = set()
            while missing := [i for i in wanted if i not in found][:200]:
                got = {e.id for e in await client.query([{"ids": missing}])}
                if not got:
                    break
                found |= got
        await again.stop()
    # the snapshot is one moment of the burst: everything acknowledged before the backup began
    # is there, and exactly as many events as the backup counted, fewer than were acknowledged
    assert found == set(wanted)
    assert stored == shown["counts"]["events"] < len(seeded) + len(acked)


def test_restore_refuses_a_non_empty_target_a_damaged_archive_and_a_newer_format(tmp_path: Path) -> None:
    data = tmp_path / "data"
    load_or_create(data, None)  # what a relay's first start leaves: its key and its database
    asyncio.run(_open_and_close(open_store(None, data)))
    archive = tmp_path / "b.tar.gz"
    admin(data, "backup", str(archive))

    taken = tmp_path / "taken"
    taken.mkdir()
    (taken / "notes.txt").write_text("mine")
    refused = buzz("admin", "--data-dir", str(taken), "restore", str(archive))
    err = json.loads(refused.stderr)
    assert (refused.returncode, err["error"]) == (1, "user_error")
    assert "not empty (notes.txt)" in err["message"]
    assert [p.name for p in taken.iterdir()] == ["notes.txt"]

    damaged = tmp_path / "damaged.tar.gz"
    raw = bytearray(archive.read_bytes())
    raw[len(raw) // 2] ^= 0xFF
    damaged.write_bytes(bytes(raw))
    refused = buzz("admin", "--data-dir", str(tmp_path / "fresh"), "restore", str(damaged))
    err = json.loads(refused.stderr)
    assert (refused.returncode, err["error"]) == (1, "user_error"), refused.stderr
    assert str(damaged) in err["message"]
    assert not (tmp_path / "fresh").exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".fresh.restoring-")]

    newer = tmp_path / "newer.tar.gz"
    with tarfile.open(archive) as src, tarfile.open(newer, "w:gz") as dst:
        for info in src.getmembers():
            body = src.extractfile(info).read()  # type: ignore[union-attr]
            if info.name == MANIFEST:
                manifest = json.loads(body)
                manifest["version"] = 99
                body = json.dumps(manifest).encode()
                info.size = len(body)
            dst.addfile(info, io.BytesIO(body))
    refused = buzz("admin", "--data-dir", str(tmp_path / "fresh"), "restore", str(newer))
    assert refused.returncode == 1 and "newer buzz" in json.loads(refused.stderr)["message"]

    empty = tmp_path / "empty"
    empty.mkdir()  # an empty directory is a fine target
    assert admin(empty, "restore", str(archive))["counts"]["events"] == 0


async def _open_and_close(store: object) -> None:
    await store.open()  # type: ignore[attr-defined]
    await store.close()  # type: ignore[attr-defined]


async def test_postgres_backup_keeps_the_key_and_pg_dump_restores_the_database(tmp_path: Path) -> None:
    """With --db the archive holds the relay key and the printed pg_dump / pg_restore commands
    carry the database: run as printed, a relay on the restored pair has the same pubkey and
    events (docs/decisions.md 130)."""
    from tests.support.pg import temp_database

    alice = Identity.new()
    data, restored, archive = tmp_path / "data", tmp_path / "restored", tmp_path / "pg-backup.tar.gz"
    async with temp_database() as dsn, temp_database() as fresh:
        async with served(data, "--db", dsn) as relay:
            original_self = await _relay_self(relay.http_url)
            async with RelayClient(relay.url, alice.secret) as client:
                ids = set()
                for n in range(5):
                    event = Event.create(alice.secret, 1, f"pg {n}", [])
                    assert (await client.publish(event)).accepted
                    ids.add(event.id)
            shown = admin(data, "--db", dsn, "backup", str(archive))
            await relay.stop()
        assert shown["backend"] == "postgresql" and shown["relay_pubkey"] == original_self
        assert shown["files"] == ["relay.key"]
        assert shown["command"].startswith("pg_dump --format=custom --file=")
        assert stat.S_IMODE(archive.stat().st_mode) == 0o600
        subprocess.run(shlex.split(shown["command"]), check=True, timeout=60)
        assert (tmp_path / "pg-backup.pgdump").is_file()

        refused = buzz("admin", "--data-dir", str(restored), "restore", str(archive))
        assert refused.returncode == 1 and "--db postgresql://" in json.loads(refused.stderr)["message"]
        done = admin(restored, "--db", fresh, "restore", str(archive))
        assert done["relay_pubkey"] == original_self and done["backend"] == "postgresql"
        assert done["command"].startswith("pg_restore --no-owner --dbname=")
        subprocess.run(shlex.split(done["command"]), check=True, timeout=60)

        async with served(restored, "--db", fresh, log_name="restored.log") as again:
            assert await _relay_self(again.http_url) == original_self
            async with RelayClient(again.url, alice.secret) as client:
                assert {e.id for e in await client.query([{"kinds": [1]}])} == ids
            await again.stop()


def test_postgres_backup_prints_pg_dump_without_the_password(tmp_path: Path) -> None:
    archive = tmp_path / "b.tar.gz"
    out = admin(tmp_path, "--db", "postgresql://ops:s3cret@db.internal:5433/buzz", "backup", str(archive))
    assert out["backend"] == "postgresql"
    assert out["command"] == (
        f"pg_dump --format=custom --file={tmp_path / 'b.pgdump'} postgresql://ops@db.internal:5433/buzz"
    )
    with tarfile.open(archive) as tar:
        manifest = tar.extractfile(MANIFEST).read()  # type: ignore[union-attr]
    assert "s3cret" not in json.dumps(out) and b"s3cret" not in manifest
    assert "BUZZ_RELAY_PRIVATE_KEY" in out["warning"]  # no relay.key in this data dir
    assert out["relay_pubkey"] is None and out["files"] == []
