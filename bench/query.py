#!/usr/bin/env python3
"""Query benchmark on a large workspace store, SQLite and PostgreSQL, buzz vs nostr-relay
(issue 17 item 1).

Run by `make bench` (never by the tests), loopback only. One run:

1. Generates N events (default 1,000,000) over A authors (1,000), C channels (200) and D DMs
   (50, each between the reader and one author): channel messages (kind 9 with `h`, 65 %),
   thread replies (kind 9 with `e` root/reply markers, 10 %), reactions (kind 7, 10 %), DM
   messages (kind 9 in a DM, 5 %), addressable records (kind 30078 with `d`, 10 %), profiles
   (kind 0, one per author) and the DMs' kind 41010. A few messages carry planted search
   words. Keys, channel ids and contents are derived from `--seed`; the events are signed in
   a process pool and the signed set is cached under `.bench-cache/` (gitignored), keyed by the
   generator's parameters and GENERATOR_VERSION, so a second run reuses it (the report says so).
2. Creates the C channels through the relay on each store (kind 9007 by the reader key, who
   thus owns every channel), stops it, checks a sample of 2,000 events with `verify_stored`
   (the bench made every id and signature itself; verification is ingest.py's subject) and
   loads the envelopes in batches through the store API (`EventStore.insert_many`, with the effects the relay would add: `RecordThread` for
   replies, `PutReaction` for reactions, the DM's channel, members and participant set for a
   41010) into SQLite and PostgreSQL at once, while nostr-relay is loaded over WebSocket with
   the first `--peer-events` events (default 25,000: at the 270–2,300 ev/s it loads on these
   boxes the whole set would take 7–60 minutes), once SQLite's load is done. The loads overlap
   (on 2 cores SQLite's is mostly this process, PostgreSQL's mostly its server, the peer's its
   own process), so their rates are not solo rates.
   The loaded stores are then kept in `.bench-cache/` (bench/store_cache.py: the SQLite data
   directory and a PostgreSQL template database, keyed by the signed set and the store code);
   a later run with the same key copies them back instead of loading (`--fresh-load` loads
   again) and reports the cached load's figures as such.
3. Then, one relay at a time with no load running: starts the relay on the store (start time
   = spawn → listening) and sends a sample of `--sample` channel messages through it
   (EVENT→OK, all accepted).
4. Over one authenticated WebSocket, `--reqs` times each (after `--warmup`): authors+kinds limit
   100, a channel window (`#h`, limit 50) paged three times by `until`, a thread fetch
   (`#e` root), an `ids` batch of 100, a NIP-50 search, COUNT of a channel, and the two
   filters without `kinds` of issue 25 item 3: `{}` and `{"authors":[pk]}` (no limit: the
   relay's 1,000). Every answer is checked against the generated data (counts and ids; `{}`:
   1,000 events in order).
5. The same on PostgreSQL, and on nostr-relay, whose answers are checked against its prefix.

Reports p50/p95 per query, load rates, store bytes per event, relay start time and the
script's wall time. See bench/README.md.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import hashlib
import multiprocessing
import os
import pickle
import random
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent))
import clients
import ingest
from store_cache import StoreCache
from store_cache import key_for as store_key

from buzz.core.event import Event, compute_id
from buzz.core.keys import public_key
from buzz.core.stored import StoredEvent, from_storage, verify_stored
from buzz.store.base import (
    Channel,
    CreateChannel,
    Effect,
    PutMember,
    PutReaction,
    RecordThread,
    RegisterDm,
    SetDmHidden,
)

GENERATOR_VERSION = 2  # bump whenever make_dataset's output changes: it keys the cache
CACHE_DIR = ingest.ROOT / ".bench-cache"
LOAD_BATCH = 100_000  # events per insert_many (one transaction each)
SIGN_CHUNK = 10_000
SEARCH_WORDS = ("quokkaflux", "zephyrlumen", "marzipanic")
SEARCH_HITS = 37  # messages per planted word
# One REQ of the window, timed per page (3 pages by `until` per round): what one query costs.
WINDOW = "channel window #h limit 50, per page"
Item = tuple[Event, str | None, tuple[Effect, ...]]  # event, channel, effects


@dataclass
class Dataset:
    reader_secret: str
    reader: str
    channels: list[str]
    dms: list[str]
    authors: list[str]
    events: list[Item] = field(default_factory=list)
    # Derived from `events` (`describe`): what the queries' answers are checked against.
    by_channel: dict[str, list[tuple[int, str]]] = field(default_factory=dict)  # (created_at, id) kind 9
    by_author_k9: dict[str, int] = field(default_factory=dict)
    by_author: dict[str, int] = field(default_factory=dict)  # every kind, the generated authors
    threads: dict[str, int] = field(default_factory=dict)  # root id → replies
    search: dict[str, set[str]] = field(default_factory=dict)
    cached: str = ""  # how the signed events were obtained (report line)


def _secret(seed: int, role: str, i: int) -> str:
    """A deterministic secret key: sha256 of the seed, a role and an index (valid on the curve
    with overwhelming probability; `public_key` would raise otherwise)."""
    return hashlib.sha256(f"buzz-bench-query:{seed}:{role}:{i}".encode()).hexdigest()


_SIGN_KEYPAIRS: list[Any] = []


def _sign_init(secrets: list[str]) -> None:
    """One libsecp256k1 keypair per signer, made once per pool process: coincurve's
    `sign_schnorr` makes the keypair again and verifies the signature on every call, three
    point multiplications where signing needs one (a third of the cold run's signing time)."""
    from coincurve._libsecp256k1 import ffi, lib
    from coincurve.context import GLOBAL_CONTEXT

    _SIGN_KEYPAIRS.clear()
    for secret in secrets:
        keypair = ffi.new("secp256k1_keypair *")
        if not lib.secp256k1_keypair_create(GLOBAL_CONTEXT.ctx, keypair, bytes.fromhex(secret)):
            raise ingest.BenchError("a derived secret key is not valid")
        _SIGN_KEYPAIRS.append(keypair)


def _sign_chunk(chunk: list[tuple[int, str]]) -> list[str]:
    """BIP-340 signatures of (signer index, event id) pairs: the only costly part of generation.
    `verify_sample` checks a sample of them with the relay's own `verify_stored`."""
    from coincurve._libsecp256k1 import ffi, lib
    from coincurve.context import GLOBAL_CONTEXT

    out = []
    sig = ffi.new("unsigned char[64]")
    for k, eid in chunk:
        if not lib.secp256k1_schnorrsig_sign32(
            GLOBAL_CONTEXT.ctx, sig, bytes.fromhex(eid), _SIGN_KEYPAIRS[k], os.urandom(32)
        ):
            raise ingest.BenchError("signing failed")
        out.append(bytes(ffi.buffer(sig)).hex())
    return out


def verify_sample(ds: Dataset, n: int = 2000) -> None:
    """relay.md §2.3 (id, then signature) on `n` events drawn from the set, fresh or cached:
    the bulk load trusts the bench's own signatures (see `trusted_batches`)."""
    for ev, _, _ in random.Random(len(ds.events)).sample(ds.events, min(n, len(ds.events))):
        verify_stored(ev)  # raises on a bad id or signature


def describe(ds: Dataset, events: list[Item]) -> None:
    """Fill the derived fields from `events` (the whole set, or the prefix the peer gets)."""
    ds.by_channel = {c: [] for c in ds.channels}
    ds.by_author_k9, ds.threads, ds.by_author = {}, {}, {}
    ds.search = {w: set() for w in SEARCH_WORDS}
    for ev, ch, _ in events:
        ds.by_author[ev.pubkey] = ds.by_author.get(ev.pubkey, 0) + 1
        if ev.kind != 9:
            continue
        ds.by_author_k9[ev.pubkey] = ds.by_author_k9.get(ev.pubkey, 0) + 1
        if ch in ds.by_channel:
            ds.by_channel[ch].append((ev.created_at, ev.id))
        root = next((t[1] for t in ev.tags if t[0] == "e" and t[3:4] == ("root",)), None)
        if root is not None:
            ds.threads[root] = ds.threads.get(root, 0) + 1
        for w in SEARCH_WORDS:
            if w in ev.content:
                ds.search[w].add(ev.id)


def dataset_key(n: int, n_authors: int, n_channels: int, n_dms: int, seed: int) -> str:
    return f"query-v{GENERATOR_VERSION}-n{n}-a{n_authors}-c{n_channels}-d{n_dms}-s{seed}"


def make_dataset(n: int, n_authors: int, n_channels: int, n_dms: int, seed: int) -> Dataset:
    """The N events, signed (not yet verified); the same for the same parameters, so cached."""
    key = dataset_key(n, n_authors, n_channels, n_dms, seed) + ".pickle"
    path = CACHE_DIR / key
    t0 = time.perf_counter()
    if path.exists():
        with path.open("rb") as f:
            ds = Dataset(*pickle.load(f))
        ds.cached = f"reused the signed set cached in .bench-cache/{key} ({time.perf_counter() - t0:.1f} s)"
    else:
        ds = _generate(n, n_authors, n_channels, n_dms, seed)
        CACHE_DIR.mkdir(exist_ok=True)
        tmp = path.with_suffix(".tmp")
        with tmp.open("wb") as f:
            # Plain values only (no bench class): the file loads whichever module runs it.
            fields = (ds.reader_secret, ds.reader, ds.channels, ds.dms, ds.authors, ds.events)
            pickle.dump(fields, f, protocol=pickle.HIGHEST_PROTOCOL)
        tmp.replace(path)
        ds.cached = (
            f"generated and signed in {time.perf_counter() - t0:.1f} s, cached as .bench-cache/{key}"
            " (the next run reuses it)"
        )
    describe(ds, ds.events)
    return ds


def _generate(n: int, n_authors: int, n_channels: int, n_dms: int, seed: int) -> Dataset:
    rng = random.Random(seed)
    secrets = [_secret(seed, "author", i) for i in range(n_authors)] + [_secret(seed, "reader", 0)]
    pubs = [public_key(s) for s in secrets]
    reader = n_authors  # signer index of the reader
    ds = Dataset(
        secrets[reader],
        pubs[reader],
        [str(uuid.UUID(int=rng.getrandbits(128), version=4)) for _ in range(n_channels)],
        [str(uuid.UUID(int=rng.getrandbits(128), version=4)) for _ in range(n_dms)],
        pubs[:n_authors],
    )
    # created_at spread over 30 days back: stored events need no clock window (bulk path)
    oldest = int(time.time()) - 30 * 86400
    step = max(1, (30 * 86400 - 600) // max(n, 1))
    plan: list[tuple[int, int, str, tuple[tuple[str, ...], ...], int, str | None, tuple[Any, ...]]] = []

    def add(k: int, kind: int, content: str, tags: list[list[str]], at: int, ch: str | None) -> str:
        tag_tuple = tuple(tuple(t) for t in tags)
        eid = compute_id(pubs[k], at, kind, tag_tuple, content)
        plan.append((k, kind, content, tag_tuple, at, ch, ()))
        return eid

    def effects(*fx: Any) -> None:
        k, kind, content, tags, at, ch, _ = plan[-1]
        plan[-1] = (k, kind, content, tags, at, ch, fx)

    for i in range(n_authors):
        add(i, 0, f'{{"name":"author {i}"}}', [], oldest, None)
    # Each DM as the relay opens it (rules/dms.py open_dm): the reader's 41010 naming one author.
    for j, dm in enumerate(ds.dms):
        add(reader, 41010, "", [["p", pubs[j]]], oldest, dm)
        effects(
            CreateChannel(Channel(dm, "", "private", pubs[reader], oldest, "dm")),
            PutMember(dm, pubs[reader], "member"),
            PutMember(dm, pubs[j], "member", invited_by=pubs[reader]),
            RegisterDm(dm, frozenset({pubs[reader], pubs[j]})),
            SetDmHidden(dm, pubs[reader], hidden=False),
        )
    messages: dict[str, list[str]] = {c: [] for c in ds.channels}
    planted = [w for w in SEARCH_WORDS for _ in range(SEARCH_HITS)]
    for i in range(n - len(plan)):
        a = rng.randrange(n_authors)
        at = oldest + 1 + i * step
        r = rng.random()
        ch = ds.channels[rng.randrange(n_channels)]
        if r < 0.65 or not messages[ch]:
            word = planted.pop() if planted and rng.random() < 0.02 else ""
            eid = add(a, 9, f"message {i} about things {word}".strip(), [["h", ch]], at, ch)
            messages[ch].append(eid)
        elif r < 0.75:
            root = messages[ch][rng.randrange(max(0, len(messages[ch]) - 50), len(messages[ch]))]
            tags = [["h", ch], ["e", root, "", "root"], ["e", root, "", "reply"]]
            eid = add(a, 9, f"reply {i}", tags, at, ch)
            effects(RecordThread(eid, root, root, 1))
        elif r < 0.85:
            target = messages[ch][rng.randrange(len(messages[ch]))]
            eid = add(a, 7, f"+{i}", [["h", ch], ["e", target]], at, ch)
            effects(PutReaction(eid, pubs[a], target, f"+{i}"))
        elif r < 0.90 and ds.dms:
            j = rng.randrange(len(ds.dms))
            add(reader if rng.random() < 0.5 else j, 9, f"dm {i}", [["h", ds.dms[j]]], at, ds.dms[j])
        else:
            add(a, 30078, f"record {i}", [["d", f"rec-{i}"]], at, None)
    if planted:
        raise ingest.BenchError("too few messages to plant the search words: raise --events")
    # Signing is the costly part of generation: chunks across every core.
    jobs = [(k, compute_id(pubs[k], at, kind, tags, content)) for k, kind, content, tags, at, _, _ in plan]
    with multiprocessing.get_context("fork").Pool(os.cpu_count() or 2, _sign_init, (secrets,)) as pool:
        sigs = [s for part in pool.map(_sign_chunk, _chunks(jobs, SIGN_CHUNK)) for s in part]
    for (k, kind, content, tags, at, ch, fx), (_, eid), sig in zip(plan, jobs, sigs, strict=True):
        ds.events.append((Event(eid, pubs[k], at, kind, tags, content, sig), ch, fx))
    return ds


def _chunks(seq: list[Any], size: int) -> Iterator[list[Any]]:
    for k in range(0, len(seq), size):
        yield seq[k : k + size]


def trusted_batches(ds: Dataset) -> Iterator[list[tuple[StoredEvent, tuple[Effect, ...]]]]:
    """The dataset as (envelope, effects) batches of LOAD_BATCH, marked verified without
    verifying: this script computed every id and made every signature (`verify_sample` checks
    a sample), and verification's cost is ingest.py's subject, not the store's. Verifying the
    1M events again here took ~80 s of the 2 cores the loads share."""
    now = int(time.time())
    for part in _chunks(ds.events, LOAD_BATCH):
        yield [(from_storage(ev, now, ch), fx) for ev, ch, fx in part]


# -- loading -------------------------------------------------------------------------------------
async def _send_as_reader(url: str, ds: Dataset, conn: ingest.Conn, window: int) -> ingest._Tally:
    """Publish the events queued on `conn` over one connection authenticated as the reader,
    `window` in flight at a time; the relay's OKs tallied."""
    async with aiohttp.ClientSession() as session:
        ws = await ingest.open_conn(session, url, ds.reader_secret, ingest.AUTH_TIMEOUT_S)
        try:
            tally = ingest._Tally()
            await ingest._pump(ws, url, conn, window, tally)
        finally:
            await ws.close()
    return tally


async def create_channels(url: str, ds: Dataset) -> None:
    conn = ingest.Conn(ds.reader_secret, ds.reader)
    for ch in ds.channels:
        ingest._add(
            conn,
            Event.create(
                ds.reader_secret, 9007, "", [["h", ch], ["name", f"q-{ch[:8]}"], ["visibility", "open"]]
            ),
        )
    tally = await _send_as_reader(url, ds, conn, 1)
    if tally.accepted != len(ds.channels) or tally.duplicates:
        raise ingest.BenchError(
            f"channel creation: {tally.accepted}/{len(ds.channels)} accepted ({tally.first_reject})"
        )


async def bulk_loads(
    stores: dict[str, tuple[str | None, Path]],
    batches: Iterator[list[tuple[StoredEvent, tuple[Effect, ...]]]],
    n: int,
    peer: tuple[str, Dataset, list[Item]] | None,
) -> dict[str, float]:
    """The loads overlapped (2 cores: SQLite's is mostly this process, PostgreSQL's mostly its
    server, nostr-relay's its own process): each store's `insert_many` of each batch in
    its own task, the peer's WebSocket load once SQLite's is done. Returns seconds per tag: the
    buzz loads from the common start to their own end, the peer's its own duration. Asserts
    every event STORED."""
    from buzz.store import open_store
    from buzz.store.base import InsertOutcome

    queues: dict[str, asyncio.Queue[list[tuple[StoredEvent, tuple[Effect, ...]]] | None]] = {
        tag: asyncio.Queue() for tag in stores
    }
    t0 = time.perf_counter()

    async def load(tag: str, store_url: str | None, data_dir: Path) -> float:
        store = open_store(store_url, data_dir)
        await store.open()
        loaded = 0
        try:
            while (batch := await queues[tag].get()) is not None:
                outcomes = await store.insert_many(batch)
                if outcomes.count(InsertOutcome.STORED) != len(batch):
                    raise ingest.BenchError(
                        f"bulk load {tag}: {outcomes.count(InsertOutcome.STORED)}/{len(batch)} stored"
                    )
                loaded += len(batch)
        finally:
            await store.close()
        if loaded != n:
            raise ingest.BenchError(f"bulk load {tag}: {loaded}/{n} events")
        return time.perf_counter() - t0

    async def feed() -> None:
        loop = asyncio.get_running_loop()
        # The pool's iterator blocks while a batch is being verified: off the loop, so that the
        # loads already queued go on meanwhile. Every store gets the same envelopes.
        while (batch := await loop.run_in_executor(None, next, batches, None)) is not None:
            for q in queues.values():
                q.put_nowait(batch)
        for q in queues.values():
            q.put_nowait(None)

    async def peer_load(after: asyncio.Task[float] | None) -> float:
        # After SQLite's load, beside the rest of PostgreSQL's: PostgreSQL's server alone is
        # then busy, so the peer takes the idle core rather than slowing both buzz loads.
        assert peer is not None
        if after is not None:
            await asyncio.shield(after)
        started = time.perf_counter()
        await ws_load(peer[0], peer[1], peer[2], 256)
        return time.perf_counter() - started

    tasks = {tag: asyncio.create_task(load(tag, *where)) for tag, where in stores.items()}
    if peer is not None:
        tasks["peer"] = asyncio.create_task(peer_load(tasks.get("sqlite")))
    await feed()
    return dict(zip(tasks, await asyncio.gather(*tasks.values()), strict=True))


async def ws_load(url: str, ds: Dataset, events: list[Item], window: int) -> float:
    """Load `events` into a peer over WebSocket (pipelined); returns seconds."""
    conn = ingest.Conn(ds.reader_secret, ds.reader)
    for ev, _, _ in events:
        ingest._add(conn, ev)
    async with aiohttp.ClientSession() as session:
        ws = await ingest.open_conn(session, url, ds.reader_secret, 0.05)
        try:
            tally = ingest._Tally()
            t0 = time.perf_counter()
            await asyncio.wait_for(ingest._pump(ws, url, conn, window, tally), 3600)
            # nostr-relay answers OK before its writer commits: wait until the last event reads back.
            deadline = time.monotonic() + 600
            while not await _req(ws, {"ids": [conn.ids[-1]]}, "last"):
                if time.monotonic() > deadline:
                    raise ingest.BenchError("peer: loaded events never became readable")
                await asyncio.sleep(0.2)
        finally:
            await ws.close()
    if tally.accepted != len(events):
        raise ingest.BenchError(
            f"peer load: {tally.accepted}/{len(events)} accepted ({tally.first_reject!r})"
        )
    return time.perf_counter() - t0


async def sample_through_relay(url: str, ds: Dataset, n: int) -> int:
    """N channel messages by the reader through the relay (EVENT→OK); they join ds.by_channel."""
    conn = ingest.Conn(ds.reader_secret, ds.reader)
    now = int(time.time())
    for i in range(n):
        ch = ds.channels[i % len(ds.channels)]
        ev = ingest._add(conn, Event.create(ds.reader_secret, 9, f"sample {i}", [["h", ch]], now - n + i))
        ds.by_channel[ch].append((ev.created_at, ev.id))
        ds.by_author_k9[ds.reader] = ds.by_author_k9.get(ds.reader, 0) + 1
    tally = await _send_as_reader(url, ds, conn, 64)
    if tally.accepted != n or tally.duplicates:
        raise ingest.BenchError(f"sample: {tally.accepted}/{n} accepted ({tally.first_reject!r})")
    return n


# -- queries -------------------------------------------------------------------------------------
async def _req(ws: Any, filt: dict[str, Any], sub: str) -> list[dict[str, Any]]:
    await ws.send_str(orjson.dumps(["REQ", sub, filt]).decode())
    out = []
    while True:
        msg = await ingest._recv_json(ws, ingest.MSG_TIMEOUT_S)
        if msg[0] == "EVENT" and msg[1] == sub:
            out.append(msg[2])
        elif msg[0] == "EOSE" and msg[1] == sub:
            await ws.send_str(orjson.dumps(["CLOSE", sub]).decode())
            return out
        elif msg[0] == "CLOSED" and msg[1] == sub:
            raise ingest.BenchError(f"REQ {filt} refused: {msg[2]!r}")


async def _count(ws: Any, filt: dict[str, Any], sub: str) -> int:
    await ws.send_str(orjson.dumps(["COUNT", sub, filt]).decode())
    while True:
        msg = await ingest._recv_json(ws, ingest.MSG_TIMEOUT_S)
        if msg[0] == "COUNT" and msg[1] == sub:
            return int(msg[2]["count"])
        if msg[0] == "NOTICE" or (msg[0] == "CLOSED" and msg[1] == sub):
            raise ingest.BenchError(f"COUNT refused: {msg!r}")


def _expect(cond: bool, what: str) -> None:
    if not cond:
        raise ingest.BenchError(f"wrong answer: {what}")


async def run_queries(
    url: str, ds: Dataset, reqs: int, warmup: int, wait: float, peer: bool
) -> dict[str, Any]:
    rng = random.Random(7)
    busy_authors = sorted(ds.by_author_k9, key=ds.by_author_k9.get, reverse=True)[:20]
    busy_channels = sorted(ds.channels, key=lambda c: len(ds.by_channel[c]), reverse=True)[:20]
    roots = sorted(ds.threads, key=ds.threads.get, reverse=True)[:20]
    all_ids = [ev.id for ev, _, _ in ds.events]
    newest = {c: sorted(ds.by_channel[c], key=lambda t: (-t[0], t[1])) for c in busy_channels}

    async def authors_kinds(ws: Any, i: int) -> None:
        a = busy_authors[i % len(busy_authors)]
        got = await _req(ws, {"authors": [a], "kinds": [9], "limit": 100}, f"a{i}")
        _expect(len(got) == min(100, ds.by_author_k9[a]), f"authors+kinds returned {len(got)}")

    async def channel_window(ws: Any, i: int) -> list[float]:
        """Three pages by `until`; each page is one REQ and one sample (the target is per query)."""
        c = busy_channels[i % len(busy_channels)]
        until = None
        pages = []
        for page in range(3):
            filt: dict[str, Any] = {"kinds": [9], "#h": [c], "limit": 50}
            if until is not None:
                filt["until"] = until
            t = time.perf_counter()
            got = await _req(ws, filt, f"w{i}.{page}")
            pages.append(time.perf_counter() - t)
            want = [x[1] for x in newest[c][50 * page : 50 * page + 50]]
            _expect(
                [e["id"] for e in got] == want, f"channel window page {page}: {len(got)} events, ids differ"
            )
            if len(got) < 50:
                break
            until = min(e["created_at"] for e in got) - 1
        return pages

    async def thread(ws: Any, i: int) -> None:
        r = roots[i % len(roots)]
        got = await _req(ws, {"kinds": [9], "#e": [r]}, f"t{i}")
        _expect(len(got) == ds.threads[r], f"thread returned {len(got)}, expected {ds.threads[r]}")

    async def ids_batch(ws: Any, i: int) -> None:
        want = set(rng.sample(all_ids, 100))
        got = await _req(ws, {"ids": sorted(want)}, f"i{i}")
        _expect({e["id"] for e in got} == want, f"ids batch returned {len(got)} of 100")

    async def search(ws: Any, i: int) -> None:
        w = SEARCH_WORDS[i % len(SEARCH_WORDS)]
        got = await _req(ws, {"kinds": [9], "search": w, "limit": 100}, f"s{i}")
        _expect(
            {e["id"] for e in got} == ds.search[w], f"search {w!r} returned {len(got)}/{len(ds.search[w])}"
        )

    async def count(ws: Any, i: int) -> None:
        c = busy_channels[i % len(busy_channels)]
        n = await _count(ws, {"kinds": [9], "#h": [c]}, f"c{i}")
        _expect(n == len(ds.by_channel[c]), f"COUNT {n}, expected {len(ds.by_channel[c])}")

    # Issue 25 item 3: filters without kinds (the reader may read every event of this store).
    prolific = sorted((a for a in ds.authors if a in ds.by_author), key=ds.by_author.get, reverse=True)[:20]

    def in_order(got: list[dict[str, Any]]) -> bool:
        keys = [(-e["created_at"], e["id"]) for e in got]
        return keys == sorted(keys) and len(set(keys)) == len(keys)

    async def everything(ws: Any, i: int) -> None:
        got = await _req(ws, {}, f"e{i}")
        want = min(1000, len(ds.events))
        _expect(
            len(got) == want and in_order(got), f"{{}} returned {len(got)} events, expected {want} in order"
        )

    async def authors_only(ws: Any, i: int) -> None:
        a = prolific[i % len(prolific)]
        got = await _req(ws, {"authors": [a]}, f"o{i}")
        want = min(1000, ds.by_author[a])
        _expect(
            len(got) == want and in_order(got) and {e["pubkey"] for e in got} == {a},
            f"authors-only returned {len(got)}, expected {want}",
        )

    queries = {
        "authors+kinds limit 100": authors_kinds,
        WINDOW: channel_window,
        "thread fetch #e root": thread,
        "ids batch of 100": ids_batch,
        "NIP-50 search": search,
        "COUNT #h": count,
        "{} (no kinds, limit 1000)": everything,
        "authors only, no kinds (limit 1000)": authors_only,
    }
    out: dict[str, Any] = {}
    async with aiohttp.ClientSession() as session:
        ws = await ingest.open_conn(session, url, ds.reader_secret, wait)
        try:
            for name, fn in queries.items():
                lat = []
                try:
                    for i in range(warmup + reqs):
                        t = time.perf_counter()
                        parts = await fn(ws, i)
                        if i >= warmup:
                            lat.extend(parts if parts is not None else [time.perf_counter() - t])
                except (ingest.BenchError, TimeoutError) as exc:
                    if not peer:
                        raise
                    if isinstance(exc, TimeoutError):  # no answer at all: the socket is unusable now
                        await ws.close()
                        ws = await ingest.open_conn(session, url, ds.reader_secret, wait)
                        exc = ingest.BenchError("no answer")
                    out[name] = {"unsupported": str(exc)[:120]}  # the yardstick may not answer it
                    continue
                lat.sort()
                out[name] = {"p50_ms": ingest._pct(lat, 50) * 1e3, "p95_ms": ingest._pct(lat, 95) * 1e3}
        finally:
            await ws.close()
    return out


# -- orchestration -------------------------------------------------------------------------------
def _channels(tmp: Path, ds: Dataset, db_url: str | None, tag: str) -> None:
    """The C channels through the relay on this store, which is then stopped for the bulk load."""
    relay = ingest.start_buzz(tmp, db_url, f"-{tag}")
    try:
        asyncio.run(create_channels(relay.url, ds))
    finally:
        relay.stop()


async def analyze(dsn: str) -> None:
    """ANALYZE a loaded PostgreSQL store (decision 354). A store in service is analyzed by
    autovacuum once enough of it changed; a bulk-loaded one read at once, and every copy of the
    cached template (a new database: no change counted), would be planned with no statistics."""
    import asyncpg

    conn = await asyncpg.connect(dsn, timeout=10)
    try:
        await conn.execute("ANALYZE")
    finally:
        await conn.close()


def _buzz_row(
    tmp: Path, ds: Dataset, db_url: str | None, args: argparse.Namespace, tag: str, load_s: float
) -> dict[str, Any]:
    """The relay on the loaded store (alone on the box's loads: they are all done): start time,
    size, the sample through it, the queries."""
    t0 = time.perf_counter()
    relay = ingest.start_buzz(tmp, db_url, f"-{tag}")
    start_s = time.perf_counter() - t0
    try:
        if db_url:
            size = asyncio.run(_pg_size(db_url))
        else:
            db = tmp / f"buzz-data-{tag}" / "relay.sqlite3"
            size = sum(p.stat().st_size for p in db.parent.glob("relay.sqlite3*"))
        print(f"  buzz {tag}: sample through the relay, then queries …", file=sys.stderr)
        asyncio.run(sample_through_relay(relay.url, ds, args.sample))
        q = asyncio.run(run_queries(relay.url, ds, args.reqs, args.warmup, ingest.AUTH_TIMEOUT_S, False))
    finally:
        relay.stop()
    return {
        "config": relay.config,
        "load_s": load_s,
        "load_events_per_s": len(ds.events) / load_s,
        "bytes_per_event": size / len(ds.events),
        "start_s": start_s,
        "queries": q,
        "load_avg": ingest.load_avg(),
    }


async def _pg_size(url: str) -> int:
    import asyncpg

    conn = await asyncpg.connect(url, timeout=5)
    try:
        return int(await conn.fetchval("SELECT pg_database_size(current_database())"))
    finally:
        await conn.close()


def run(args: argparse.Namespace) -> dict[str, Any]:
    wall0 = time.perf_counter()
    out: dict[str, Any] = {
        **ingest.machine_facts(),
        "events": args.events,
        "authors": args.authors,
        "channels": args.channels,
        "dms": args.dms,
        "reqs": args.reqs,
    }
    venv = Path(args.peer_venv).resolve()
    fast_ok = False if args.skip_peer else ingest.ensure_peer_venv(venv)
    print(f"dataset of {args.events:,} events …", file=sys.stderr)
    t0 = time.perf_counter()
    ds = make_dataset(args.events, args.authors, args.channels, args.dms, args.seed)
    verify_sample(ds)
    out["dataset_s"] = time.perf_counter() - t0
    out["dataset"] = ds.cached
    print(f"  {ds.cached}", file=sys.stderr)
    kinds: dict[int, int] = {}
    for ev, _, _ in ds.events:
        kinds[ev.kind] = kinds.get(ev.kind, 0) + 1
    out["kinds"] = kinds
    with tempfile.TemporaryDirectory(prefix="buzz-query-") as tmpdir, contextlib.ExitStack() as stack:
        tmp = Path(tmpdir)
        stores: dict[str, tuple[str | None, Path]] = {"sqlite": (None, tmp / "buzz-data-sqlite")}
        if not args.skip_pg:
            url = stack.enter_context(ingest.pg_database())
            if url is not None:
                stores["pg"] = (url, tmp / "buzz-data-pg")
        cache = StoreCache(
            store_key(dataset_key(args.events, args.authors, args.channels, args.dms, args.seed))
        )
        cached = None if args.fresh_load else cache.meta(stores)
        if cached is None:
            for tag, (db_url, _) in stores.items():
                _channels(tmp, ds, db_url, tag)
        peer, prefix = None, ds.events[: min(args.peer_events, len(ds.events))]
        if not args.skip_peer:
            ingest.PEER_SUBSCRIPTION_LIMIT = 128
            peer = ingest.start_peer(venv, tmp, fast_ok, args.peer_workers)
            stack.callback(peer.stop)
            out["peer_events"] = len(prefix)
        # The loads overlap (SQLite's verify + insert, PostgreSQL's insert of the same verified
        # envelopes, nostr-relay's prefix over WebSocket); each rate is thus under the others'
        # load, not a solo one. The queries below run one relay at a time, after every load.
        who = ", ".join(["buzz " + t for t in stores] + (["nostr-relay"] if peer else []))
        print(
            f"  loads at once ({who}) of {len(ds.events):,} events ({len(prefix):,} to nostr-relay) …",
            file=sys.stderr,
        )
        peer_load = (peer.url, ds, prefix) if peer is not None else None
        if cached is None:
            load_s = asyncio.run(bulk_loads(stores, trusted_batches(ds), len(ds.events), peer_load))
            out["loads_overlapped"] = list(load_s)
            print(f"  keeping the loaded stores in {cache.label} …", file=sys.stderr)
            t0 = time.perf_counter()
            cache.save(stores, load_s)
            out["store_cache"] = (
                f"loaded now, kept in {cache.label} ({time.perf_counter() - t0:.0f} s) for the next run"
            )
        else:
            t0 = time.perf_counter()
            cache.restore(stores)
            load_s = dict(cached["load_s"])
            out["loads_overlapped"] = list(load_s)
            out["store_cache"] = (
                f"reused the stores loaded {cached['date']}, kept in {cache.label} (copied back in"
                f" {time.perf_counter() - t0:.0f} s): the buzz load figures are that run's (--fresh-load loads again)"
            )
            if peer is not None:
                t0 = time.perf_counter()
                asyncio.run(ws_load(peer.url, ds, prefix, 256))
                load_s["peer"] = time.perf_counter() - t0
        for db_url, _ in stores.values():
            if db_url is not None:
                t0 = time.perf_counter()
                asyncio.run(analyze(db_url))
                out["pg_analyze_s"] = round(time.perf_counter() - t0, 1)
        base = {c: list(v) for c, v in ds.by_channel.items()}, dict(ds.by_author_k9)
        out["buzz"] = _buzz_row(tmp, ds, None, args, "sqlite", load_s["sqlite"])
        if "pg" in stores:
            ds.by_channel, ds.by_author_k9 = {c: list(v) for c, v in base[0].items()}, dict(base[1])
            out["buzz_pg"] = _buzz_row(tmp, ds, stores["pg"][0], args, "pg", load_s["pg"])
        if peer is not None:
            ds.events = prefix  # a prefix: profiles, DMs, then the mix in time order
            describe(ds, ds.events)
            print("  nostr-relay: queries …", file=sys.stderr)
            q = asyncio.run(run_queries(peer.url, ds, args.reqs, args.warmup, 0.05, True))
            size = sum(p.stat().st_size for p in (tmp / "peer-lmdb").rglob("*") if p.is_file())
            out["peer"] = {
                "config": peer.config,
                "load_s": load_s["peer"],
                "load_events_per_s": len(prefix) / load_s["peer"],
                "bytes_per_event": size / len(prefix),
                "queries": q,
                "load_avg": ingest.load_avg(),
            }
    out["load_avg_end"] = ingest.load_avg()
    out["wall_s"] = time.perf_counter() - wall0
    return out


TARGETS_MS = {"authors+kinds limit 100": 5, WINDOW: 5, "NIP-50 search": 50}


def render(out: dict[str, Any]) -> str:
    lines = clients.report_head("query", out)
    lines += [
        f"store: {out['events']:,} events ({', '.join(f'kind {k}: {v:,}' for k, v in sorted(out['kinds'].items()))}), "
        f"{out['authors']:,} authors, {out['channels']} channels, {out['dms']} DMs; {out['reqs']} measured queries each",
        f"dataset: {out['dataset']}",
    ]
    if out.get("store_cache"):
        lines.append(f"stores: {out['store_cache']}")
    if "pg_analyze_s" in out:
        lines.append(f"PostgreSQL store analyzed (ANALYZE) before the queries in {out['pg_analyze_s']} s")
    rows = [(k, out[k]) for k in ("buzz", "buzz_pg", "peer") if k in out]
    names = {"buzz": "buzz SQLite", "buzz_pg": "buzz PostgreSQL", "peer": "nostr-relay"}
    how = {
        "buzz": "insert_many, sample of 2,000 verified",
        "buzz_pg": "insert_many of the same envelopes",
        "peer": f"{out.get('peer_events', 0):,}-event prefix over WebSocket",
    }
    if out.get("loads_overlapped"):
        lines.append(
            f"loads overlapped ({', '.join(out['loads_overlapped'])}; buzz's timed from their common"
            " start to their own end, the peer's from its start after SQLite's end): not solo rates"
        )
    solo = " (overlapped, not solo)" if out.get("loads_overlapped") else ""
    for k, r in rows:
        start = f", relay start {r['start_s']:.2f} s" if "start_s" in r else ""
        lines.append(
            f"  {names[k]}: {r['config']}; load ({how[k]}) {r['load_events_per_s']:,.0f} ev/s in {r['load_s']:.0f} s{solo}, "
            f"{r['bytes_per_event']:,.0f} B/event{start}; load avg {r['load_avg']}"
        )
    qnames = list(out["buzz"]["queries"])
    header = f"{'query p50 / p95 ms':<40}" + "".join(f"{names[k]:>22}" for k, _ in rows)
    table_rows = []
    for q in qnames:
        cells = []
        for _, r in rows:
            v = r["queries"].get(q, {})
            cells.append(f"{v['p50_ms']:.2f} / {v['p95_ms']:.2f}" if "p50_ms" in v else "unsupported")
        table_rows.append(f"{q:<40}" + "".join(f"{c:>22}" for c in cells))
    lines += clients.table(header, table_rows)
    if "peer" in out:
        lines.append(
            f"nostr-relay holds {out['peer_events']:,} events, buzz {out['events']:,}: the ratios compare unequal stores"
        )
        for q in qnames:
            p = out["peer"]["queries"].get(q, {})
            if "p50_ms" in p:
                lines.append(
                    f"{q}: buzz SQLite p50 / nostr-relay p50 = {out['buzz']['queries'][q]['p50_ms'] / p['p50_ms']:.2f}×"
                )
    for q, limit in TARGETS_MS.items():
        for k, r in rows:
            if k == "peer":
                continue
            v = r["queries"][q]["p50_ms"]
            lines.append(
                f"target {q} p50 < {limit} ms on {names[k]}: {v:.2f} ms {'MET' if v < limit else 'NOT MET'}"
            )
    if out["events"] < 1_000_000:
        lines.append(f"NOTE: {out['events']:,} events, not the 1,000,000 of the issue's targets")
    lines.append(f"wall time of the script: {out['wall_s']:.0f} s")
    return "\n".join(lines)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-n", "--events", type=int, default=1_000_000, help="events in the store")
    ap.add_argument("--authors", type=int, default=1000)
    ap.add_argument("--channels", type=int, default=200)
    ap.add_argument("--dms", type=int, default=50, help="DMs, each between the reader and one author")
    ap.add_argument(
        "--sample", type=int, default=500, help="channel messages sent through the relay after the load"
    )
    ap.add_argument("--reqs", type=int, default=50, help="measured queries of each sort")
    ap.add_argument("--warmup", type=int, default=5, help="unmeasured queries of each sort first")
    ap.add_argument("--seed", type=int, default=17)
    ap.add_argument(
        "--peer-events", type=int, default=25_000, help="events loaded into nostr-relay (a prefix)"
    )
    ap.add_argument("--peer-venv", default=str(ingest.ROOT / ".bench-venv"))
    ap.add_argument("--peer-workers", type=int, default=1)
    ap.add_argument("--skip-peer", action="store_true", help="no nostr-relay")
    ap.add_argument("--skip-pg", action="store_true", help="no PostgreSQL")
    ap.add_argument(
        "--fresh-load", action="store_true", help="load the stores even when .bench-cache holds them loaded"
    )
    ap.add_argument(
        "--drop-cache",
        action="store_true",
        help="remove the loaded stores kept in .bench-cache and PostgreSQL, then exit",
    )
    ap.add_argument("--json", metavar="OUT.json", help="also write the results as JSON")
    args = ap.parse_args(argv)
    if not 20_000 <= args.events <= 2_000_000 or not 10 <= args.authors <= args.events // 10:
        ap.error("--events 20000–2000000, --authors 10–events/10")
    if not 1 <= args.channels <= 5000 or not 10 <= args.reqs <= 5000 or not 0 <= args.dms <= args.authors:
        ap.error("--channels 1–5000, --reqs 10–5000, --dms 0–authors")
    if args.peer_events < 20_000:
        ap.error("--peer-events at least 20000")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.drop_cache:
        StoreCache("").drop_others()  # every key's directory and database
        return 0
    return clients.bench_main(args, run, render)


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    sys.exit(main())
