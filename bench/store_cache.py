"""Loaded query-bench stores kept between runs of bench/query.py (`.bench-cache/`, gitignored).

Bulk-loading 1,000,000 events takes ~6 minutes on the 2-core box, most of it PostgreSQL's
server, and gives the same store every time for the same signed set and the same store code.
So after a load the SQLite data directory is copied to `.bench-cache/stores-<key>/` and the
PostgreSQL database to a template database `buzz_bench_cache_<key>`; a later run with the same
key copies them back (file copies: seconds) instead of loading, and reports the cached load's
figures as such. The key hashes the dataset's key and every source file under `src/buzz/store`
and `src/buzz/core`, so any change to what the rows hold or how they are written loads afresh.
One key is kept: saving a new one removes the others (directories and databases).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import hashlib
import json
import shutil
from pathlib import Path
from typing import Any

import ingest

CACHE_DIR = ingest.ROOT / ".bench-cache"
PREFIX = "stores-"
PG_PREFIX = "buzz_bench_cache_"
VERSION = 1  # bump when what is cached changes shape


def key_for(dataset_key: str) -> str:
    h = hashlib.sha256(f"{dataset_key}:{VERSION}".encode())
    src = ingest.ROOT / "src" / "buzz"
    for path in sorted([*(src / "store").rglob("*.py"), *(src / "core").rglob("*.py")]):
        h.update(path.relative_to(src).as_posix().encode())
        h.update(path.read_bytes())
    return h.hexdigest()[:16]


def _db_name(dsn: str) -> str:
    return dsn.rsplit("/", 1)[1].split("?", 1)[0]


def _copy_db(source: str, target: str) -> None:
    """CREATE DATABASE target from source, by file copy (PostgreSQL 15+; else block by block)."""
    try:
        asyncio.run(ingest.pg_admin(f'CREATE DATABASE "{target}" TEMPLATE "{source}" STRATEGY = FILE_COPY'))
    except Exception as exc:  # older server: no STRATEGY
        if "STRATEGY" not in str(exc).upper():
            raise
        asyncio.run(ingest.pg_admin(f'CREATE DATABASE "{target}" TEMPLATE "{source}"'))


class StoreCache:
    """The cached stores of one key. `stores` maps a tag ("sqlite", "pg") to (DSN or None,
    data dir), as bench/query.py holds them."""

    def __init__(self, key: str) -> None:
        self.key = key
        self.dir = CACHE_DIR / f"{PREFIX}{key}"
        self.pg = f"{PG_PREFIX}{key}"

    @property
    def label(self) -> str:
        return f".bench-cache/{PREFIX}{self.key}"

    def meta(self, stores: dict[str, tuple[str | None, Path]]) -> dict[str, Any] | None:
        """The saved load figures when every store of `stores` is cached, else None."""
        path = self.dir / "meta.json"
        if not path.exists():
            return None
        meta = json.loads(path.read_text())
        if not set(stores) <= set(meta["load_s"]):
            return None
        if "pg" in stores:
            rows = asyncio.run(ingest.pg_admin(f"SELECT 1 FROM pg_database WHERE datname = '{self.pg}'"))
            if not rows:
                return None
        return meta

    def restore(self, stores: dict[str, tuple[str | None, Path]]) -> None:
        """Each store as it was right after its cached load (replacing the empty one)."""
        for dsn, data_dir in stores.values():
            shutil.rmtree(data_dir, ignore_errors=True)
            shutil.copytree(self.dir / data_dir.name, data_dir)
            if dsn is not None:
                name = _db_name(dsn)
                asyncio.run(ingest.pg_admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
                _copy_db(self.pg, name)

    def save(self, stores: dict[str, tuple[str | None, Path]], load_s: dict[str, float]) -> None:
        """Keep the just-loaded stores (closed: nothing may be connected to them) under this key;
        every other key's cache is removed."""
        self.drop_others()
        shutil.rmtree(self.dir, ignore_errors=True)
        self.dir.mkdir(parents=True)
        for dsn, data_dir in stores.values():
            shutil.copytree(data_dir, self.dir / data_dir.name)
            if dsn is not None:
                asyncio.run(ingest.pg_admin(f'DROP DATABASE IF EXISTS "{self.pg}"'))
                _copy_db(_db_name(dsn), self.pg)
        meta = {
            "load_s": {t: load_s[t] for t in stores},
            "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        }
        (self.dir / "meta.json").write_text(json.dumps(meta))

    def drop_others(self) -> None:
        for other in CACHE_DIR.glob(f"{PREFIX}*"):
            if other != self.dir:
                shutil.rmtree(other, ignore_errors=True)
        try:
            rows = asyncio.run(
                ingest.pg_admin(f"SELECT datname FROM pg_database WHERE datname LIKE '{PG_PREFIX}%'")
            )
        except Exception:  # no PostgreSQL: nothing of it to remove
            return
        for (name,) in rows:
            if name != self.pg:
                asyncio.run(ingest.pg_admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
