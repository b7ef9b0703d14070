"""`PUT /upload` and `HEAD /upload` on a real relay, SQLite and PostgreSQL (media.md §4, §11;
checklist 1–3, 5–10, 15, 37, 38; issue 26 item 6: every bad upload gets its one clear error
and nothing is stored)."""

from __future__ import annotations

import asyncio
import os
import time
from typing import Any

import aiohttp
import pytest

from buzz.core.event import Event
from buzz.media.limits import MediaSettings
from tests.media.support import auth, header, png, put, sha, unique_png, upload
from tests.support.deadline import scaled
from tests.support.relay import Identity, RunningRelay, relay_on


async def stored_rows(running: RunningRelay) -> dict[str, list[Any]]:
    async def dump(conn: Any) -> dict[str, list[Any]]:
        out = {}
        for table in ("media_blobs", "media_uploaders", "media_refs", "media_chunks"):
            out[table] = sorted(tuple(r) for r in await conn.fetch(f"SELECT * FROM {table}"))
        return out

    return await running.relay.store._read(dump)  # type: ignore[attr-defined]


def leftovers(running: RunningRelay) -> list[str]:
    """Files in the media temporary folder (a refused upload leaves none)."""
    tmp = running.relay.media.blobs.tmp_dir
    return sorted(p.name for p in tmp.iterdir()) if tmp.is_dir() else []


async def test_upload_png_answers_a_descriptor(relay: RunningRelay, alice: Identity) -> None:
    """Checklist 1 and 8: the descriptor, then the same bytes again: one copy, same answer."""
    data = png(64, 48)
    first = await upload(relay.http_url, alice, data)
    h = sha(data)
    base = relay.http_url + "/media"  # RELAY_URL unset: links name the bound address, not :3000
    assert first["url"] == f"{base}/{h}.png" and first["thumb"] == f"{base}/{h}.thumb.jpg"
    assert (first["sha256"], first["size"], first["type"], first["dim"]) == (
        h,
        len(data),
        "image/png",
        "64x48",
    )
    assert len(first["blurhash"]) == 28 and abs(first["uploaded"] - time.time()) < 60
    again = await upload(relay.http_url, alice, data)
    assert again == first
    rows = await stored_rows(relay)
    assert len(rows["media_blobs"]) == 1 and len(rows["media_uploaders"]) == 1


async def test_second_uploader_of_the_same_bytes(relay: RunningRelay, alice: Identity, bob: Identity) -> None:
    data = unique_png()
    await upload(relay.http_url, alice, data)
    d = await upload(relay.http_url, bob, data)
    rows = await stored_rows(relay)
    assert len(rows["media_blobs"]) == 1
    assert {r[1] for r in rows["media_uploaders"]} == {alice.pubkey, bob.pubkey}
    assert d["sha256"] == sha(data)


@pytest.mark.parametrize(
    ("case", "status", "reason"),
    [
        ("no sha", 400, "missing or malformed X-SHA-256"),
        ("upper sha", 400, "missing or malformed X-SHA-256"),
        ("no auth", 401, "missing authorization"),
        ("wrong kind", 401, "wrong authorization kind"),
        ("bad signature", 401, "invalid authorization signature"),
        ("verb get", 401, "authorization verb mismatch"),
        ("expired", 401, "authorization expired"),
        ("old", 401, "authorization timestamp out of window"),
        ("other x", 401, "authorization does not cover this blob"),
        ("other server", 401, "authorization server mismatch"),
        ("query auth", 401, "missing authorization"),
    ],
)
async def test_refused_before_storing(
    sqlite_relay: RunningRelay, alice: Identity, case: str, status: int, reason: str
) -> None:
    """Checklist 2, 3, 4, 5, 20 over the wire: the reason in X-Reason and the body; nothing stored."""
    data = unique_png()
    h = sha(data)
    now = int(time.time())
    headers: dict[str, str] = {"X-SHA-256": h}
    good = auth(alice, "upload", h)
    by_case = {
        "no sha": {"X-SHA-256": ""} | header(good),
        "upper sha": {"X-SHA-256": h.upper()} | header(good),
        "no auth": headers,
        "wrong kind": headers | header(Event.create(alice.secret, 27235, "x", [["t", "upload"], ["x", h]])),
        "bad signature": headers
        | header(Event(good.id, good.pubkey, good.created_at, good.kind, good.tags, good.content, "0" * 128)),
        "verb get": headers | header(auth(alice, "get", h)),
        "expired": headers | header(auth(alice, "upload", h, expires_in=-5)),
        "old": headers | header(auth(alice, "upload", h, created_at=now - 601)),
        "other x": headers | header(auth(alice, "upload", "cd" * 32)),
        "other server": headers | header(auth(alice, "upload", h, server="https://elsewhere.example")),
        "query auth": headers,
    }
    path = "/upload" + (
        f"?auth={__import__('tests.media.support', fromlist=['token']).token(good)}"
        if case == "query auth"
        else ""
    )
    async with (
        aiohttp.ClientSession() as s,
        s.put(sqlite_relay.http_url + path, data=data, headers=by_case[case]) as r,
    ):
        body = await r.json()
        assert (r.status, r.headers.get("X-Reason"), body) == (status, reason, {"error": reason})
        assert r.headers["Access-Control-Allow-Origin"] == "*"
    rows = await stored_rows(sqlite_relay)
    assert rows["media_blobs"] == [] and leftovers(sqlite_relay) == []


async def test_server_tag_for_this_host_is_accepted(sqlite_relay: RunningRelay, alice: Identity) -> None:
    data = unique_png()
    event = auth(alice, "upload", sha(data), server=sqlite_relay.http_url + "/upload")
    answer = await put(sqlite_relay.http_url, None, data, event=event)
    assert answer.status == 200, answer.reason


async def test_hash_mismatch_stores_nothing(relay: RunningRelay, alice: Identity) -> None:
    """Checklist 6."""
    data, other = unique_png(), unique_png()
    answer = await put(relay.http_url, alice, data, sha256=sha(other))
    assert (answer.status, answer.reason) == (400, "hash mismatch")
    assert (await stored_rows(relay))["media_blobs"] == [] and leftovers(relay) == []


async def test_replayed_upload_authorization_is_refused(relay: RunningRelay, alice: Identity) -> None:
    """Issue 26 item 6 (decision 190): an upload authorization is used once."""
    data = unique_png()
    event = auth(alice, "upload", sha(data))
    assert (await put(relay.http_url, None, data, event=event)).status == 200
    replay = await put(relay.http_url, None, data, event=event)
    assert (replay.status, replay.reason) == (401, "authorization already used")


async def raw_request(
    port: int, head: bytes, body_chunks: list[bytes], expect_continue: bool
) -> tuple[bytes, int]:
    """Send `head`, then the body piece by piece while reading; returns (answer head, bytes of
    body the relay let us send before it answered)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(head)
        await writer.drain()
        if expect_continue:
            line = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), scaled(10))
            return line, 0
        sent = 0
        answer = asyncio.ensure_future(reader.readuntil(b"\r\n\r\n"))
        for piece in body_chunks:
            if answer.done():
                break
            try:
                writer.write(piece)
                await asyncio.wait_for(writer.drain(), scaled(5))
            except (ConnectionError, TimeoutError):
                break
            sent += len(piece)
            await asyncio.sleep(0)
        return await asyncio.wait_for(answer, scaled(10)), sent
    finally:
        writer.close()


async def test_refused_before_the_body_is_read(sqlite_relay: RunningRelay, alice: Identity) -> None:
    """Checklist 2: with `Expect: 100-continue` the 401 replaces `100 Continue`; without it the
    relay answers while a 50 MiB body is still being sent, and closes."""
    port = int(sqlite_relay.http_url.rsplit(":", 1)[1])
    size = 50 << 20
    h = "ab" * 32
    head = (
        f"PUT /upload HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nX-SHA-256: {h}\r\n"
        f"Content-Length: {size}\r\nContent-Type: application/octet-stream\r\n"
    ).encode()
    answer, _ = await raw_request(port, head + b"Expect: 100-continue\r\n\r\n", [], expect_continue=True)
    assert answer.startswith(b"HTTP/1.1 401"), answer
    assert b"X-Reason: missing authorization" in answer
    chunk = os.urandom(1 << 20)
    answer, sent = await raw_request(port, head + b"\r\n", [chunk] * 50, expect_continue=False)
    assert answer.startswith(b"HTTP/1.1 401"), answer
    assert sent < size


async def test_expect_continue_accepts_a_good_upload(sqlite_relay: RunningRelay, alice: Identity) -> None:
    data = unique_png()
    answer = await put(sqlite_relay.http_url, alice, data, extra={"Expect": "100-continue"})
    assert answer.status == 200, answer.reason


def upload_head(port: int, who: Identity, h: str, length: int) -> bytes:
    ((name, value),) = header(auth(who, "upload", h)).items()
    return (
        f"PUT /upload HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nX-SHA-256: {h}\r\n"
        f"Content-Length: {length}\r\n{name}: {value}\r\n\r\n"
    ).encode()


async def wait_for(condition: Any, what: str, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.02)


async def test_truncated_body_stores_nothing(tmp_path: Any, alice: Identity) -> None:
    """Issue 26 item 6: a body that stops short and then stalls answers 400 `incomplete body`;
    one whose connection drops leaves nothing either (the slot comes back)."""
    async with relay_on(tmp_path, media=MediaSettings(upload_idle_timeout_s=0.5)) as running:
        port = int(running.http_url.rsplit(":", 1)[1])
        data = os.urandom(300_000)
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(upload_head(port, alice, sha(data), len(data)) + data[:100_000])
        await writer.drain()
        answer = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), scaled(10))
        writer.close()
        assert answer.startswith(b"HTTP/1.1 400") and b"X-Reason: incomplete body" in answer, answer
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(upload_head(port, alice, sha(data), len(data)) + data[:100_000])
        await writer.drain()
        writer.close()  # the connection drops mid-body
        slots = running.relay.media.slots
        await wait_for(lambda: slots.in_progress == 0, "the upload slot to come back")
        assert (await stored_rows(running))["media_blobs"] == [] and leftovers(running) == []


async def test_type_caps_and_refused_types(relay: RunningRelay, alice: Identity) -> None:
    """Checklist 9 and 10 over the wire: an 11 MiB GIF 413 (after the body, by its bytes), a
    declared video over 500 MiB 413 before any body, a PE named .png 415."""
    gif = b"GIF89a" + os.urandom((11 << 20) - 6)
    answer = await put(relay.http_url, alice, gif)
    assert (answer.status, answer.reason) == (413, f"file too large ({len(gif)} bytes, max {10 << 20})")
    h = "ab" * 32
    headers = {"X-SHA-256": h, "Content-Type": "video/mp4", "Content-Length": str((500 << 20) + 1)}
    headers |= header(auth(alice, "upload", h))
    async with (
        aiohttp.ClientSession() as s,
        s.head(
            relay.http_url + "/upload",
            headers={"X-SHA-256": h, "X-Content-Type": "video/mp4", "X-Content-Length": str((500 << 20) + 1)}
            | header(auth(alice, "upload", h)),
        ) as r,
    ):
        assert (r.status, r.headers["X-Reason"]) == (
            413,
            f"file too large ({(500 << 20) + 1} bytes, max {500 << 20})",
        )
    pe = b"MZ\x90\x00" + os.urandom(1000)
    answer = await put(relay.http_url, alice, pe, declared="image/png")
    assert (answer.status, answer.reason) == (415, "content type not allowed: application/x-msdownload")
    svg = b"<svg xmlns='http://www.w3.org/2000/svg'><script>alert(1)</script></svg>"
    assert (await put(relay.http_url, alice, svg)).reason == "content type not allowed: image/svg+xml"
    js = await put(relay.http_url, alice, b"alert(1)", declared="text/javascript")
    assert (js.status, js.reason) == (415, "content type not allowed: text/javascript")
    rows = await stored_rows(relay)
    assert rows["media_blobs"] == [] and leftovers(relay) == []


async def test_decompression_bomb_upload(relay: RunningRelay, alice: Identity) -> None:
    """Checklist 13 over the wire: a zip bomb as a PNG is refused from its header."""
    from tests.media.test_sniff_images import bomb_png

    answer = await put(relay.http_url, alice, bomb_png(10_000, 10_000))
    assert (answer.status, answer.reason) == (400, "image dimensions exceed 25000000 pixels")
    cut = png(200, 200)[:-30]
    answer = await put(relay.http_url, alice, cut)
    assert (answer.status, answer.reason) == (400, "invalid image")
    assert (await stored_rows(relay))["media_blobs"] == []


async def test_preflight(sqlite_relay: RunningRelay, alice: Identity) -> None:
    """Checklist 15: HEAD /upload answers what a PUT would, storing nothing."""
    h = "ab" * 32

    async def head(extra: dict[str, str], with_auth: bool = True) -> tuple[int, str | None]:
        headers = {"X-SHA-256": h, **extra} | (header(auth(alice, "upload", h)) if with_auth else {})
        async with (
            aiohttp.ClientSession() as s,
            s.head(sqlite_relay.http_url + "/upload", headers=headers) as r,
        ):
            return r.status, r.headers.get("X-Reason")

    assert await head({"X-Content-Length": "1000", "X-Content-Type": "image/png"}) == (200, None)
    assert await head({"X-Content-Length": "1000"}, with_auth=False) == (200, None)
    assert await head({"X-Content-Length": str(60 << 20), "X-Content-Type": "image/png"}) == (
        413,
        f"file too large ({60 << 20} bytes, max {50 << 20})",
    )
    assert await head({}) == (411, "length required")
    assert await head({"X-Content-Length": "10", "X-Content-Type": "image/svg+xml"}) == (
        415,
        "content type not allowed: image/svg+xml",
    )
    assert (await stored_rows(sqlite_relay))["media_blobs"] == []


async def test_quota_and_collection(tmp_path: Any, alice: Identity, bob: Identity) -> None:
    """Checklist 37: past the quota 413 `quota exceeded`; after the blob is collected the same
    upload succeeds. Bob's quota is his own."""
    async with relay_on(tmp_path, media=MediaSettings(quota_bytes=150_000)) as running:
        first, second = os.urandom(100_000), os.urandom(100_000)
        await upload(running.http_url, alice, first)
        refused = await put(running.http_url, alice, second)
        assert (refused.status, refused.reason) == (413, "quota exceeded")
        await upload(running.http_url, bob, second)
        assert await running.relay.media.collect(now=int(time.time()) + 2 * 86_400) == 2
        await upload(running.http_url, alice, second)


async def test_rates(sqlite_relay: RunningRelay, alice: Identity) -> None:
    """Checklist 38: a third upload in progress by one pubkey, and the 31st in a minute, 429."""
    media = sqlite_relay.relay.media
    assert media.slots.take(alice.pubkey, 1, time.monotonic()) is None
    assert media.slots.take(alice.pubkey, 1, time.monotonic()) is None
    answer = await put(sqlite_relay.http_url, alice, unique_png())
    assert (answer.status, answer.reason, answer.headers["Retry-After"]) == (429, "too many uploads", "1")
    media.slots.release(alice.pubkey, 1)
    media.slots.release(alice.pubkey, 1)
    statuses = [(await put(sqlite_relay.http_url, alice, unique_png())).status for _ in range(29)]
    assert statuses == [200] * 28 + [429]  # 2 slots taken above + 28 = 30 started this minute
