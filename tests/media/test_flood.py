"""1,000 parallel uploads against a real `buzz relay serve` process (issue 26 item 6): each
gets one clear HTTP answer (200, or 429 `too many uploads` with Retry-After), nothing partial is
stored, and the relay's resident memory stays under a bound derived from its configuration —
never the naive file size × concurrency."""

from __future__ import annotations

import asyncio
import os
from collections import Counter
from pathlib import Path

import aiohttp

from buzz.media.limits import UPLOAD_BUFFER_BYTES, UPLOADS_PER_REPLICA
from tests.media.support import auth, header, sha
from tests.operator.support import served
from tests.support.relay import Identity

UPLOADS = 1000
BODY_BYTES = 1 << 20
# What one connection may hold in the relay while it is refused or waits: aiohttp's read
# buffer (2 × 64 KiB before it pauses the socket), the request and handler objects (~20 KiB
# measured) fit inside since a refused body is never read.
PER_CONNECTION_BYTES = 128 << 10
# What one admitted upload holds: its UPLOAD_BUFFER_BYTES of body, the same again in the
# worker thread writing the previous piece, and the hash and file objects.
PER_UPLOAD_BYTES = 3 * UPLOAD_BUFFER_BYTES


def rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


async def test_thousand_parallel_uploads(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    body = os.urandom(BODY_BYTES)
    digest = sha(body)
    people = [Identity.new() for _ in range(UPLOADS)]
    async with served(data_dir, env={"BUZZ_MEDIA_QUOTA_BYTES": "0"}) as relay:
        pid = relay.proc.pid
        baseline = rss_bytes(pid)
        bound = baseline + UPLOADS_PER_REPLICA * PER_UPLOAD_BYTES + UPLOADS * PER_CONNECTION_BYTES
        peak = baseline
        done = asyncio.Event()

        async def watch() -> None:
            nonlocal peak
            while not done.is_set():
                peak = max(peak, rss_bytes(pid))
                await asyncio.sleep(0.01)

        async def one(session: aiohttp.ClientSession, who: Identity) -> tuple[int, str | None, str | None]:
            headers = {"X-SHA-256": digest, "Content-Type": "application/octet-stream"}
            headers |= header(auth(who, "upload", digest))
            async with session.put(
                relay.http_url + "/upload", data=body, headers=headers, expect100=True
            ) as r:
                await r.read()
                return r.status, r.headers.get("X-Reason"), r.headers.get("Retry-After")

        watcher = asyncio.create_task(watch())
        connector = aiohttp.TCPConnector(limit=0, force_close=True)
        timeout = aiohttp.ClientTimeout(total=240)
        async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:
            answers = await asyncio.gather(*(one(session, who) for who in people))
        done.set()
        await watcher
        counts = Counter((status, reason) for status, reason, _ in answers)
        # 429 from the upload slots; 503 from the relay's HTTP guard when more requests are in
        # progress than its open-file budget allows (decision 150): both say retry, no third kind
        assert set(counts) <= {(200, None), (429, "too many uploads"), (503, None)}, counts
        assert counts[(200, None)] >= UPLOADS_PER_REPLICA
        assert all(after is not None for status, _, after in answers if status != 200)
        assert peak <= bound, f"peak RSS {peak >> 20} MiB over the bound {bound >> 20} MiB"
        naive = UPLOADS * BODY_BYTES
        assert peak - baseline < naive // 4  # far below holding every body at once
        blob_dir = data_dir / "media" / digest[:2]
        assert sorted(p.name for p in blob_dir.iterdir()) == [digest]
        tmp = data_dir / "media" / "tmp"
        assert not tmp.exists() or list(tmp.iterdir()) == []
        print(
            f"peak RSS growth {(peak - baseline) >> 20} MiB (bound {(bound - baseline) >> 20} MiB); {dict(counts)}"
        )
