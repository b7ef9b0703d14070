"""`GET`/`HEAD /media/…` and who may read a blob (media.md §7, §8, §9; checklist 16–33, 43),
on a real relay over real HTTP and WebSocket, SQLite and PostgreSQL."""

from __future__ import annotations

import os
import time
from typing import Any

import aiohttp

from buzz.core.event import Event
from tests.media.support import auth, get, imeta_of, unique_png, upload
from tests.support.relay import Identity, RunningRelay
from tests.workspace.helpers import accepted, create_channel, put_user


async def test_served_headers_ext_and_etag(relay: RunningRelay, alice: Identity) -> None:
    """Checklist 16, 17, 22: the bytes with the §7.2 headers; a wrong extension 404; 304."""
    data = unique_png()
    d = await upload(relay.http_url, alice, data)
    h = d["sha256"]
    a = await get(relay.http_url, alice, f"{h}.png")
    assert (a.status, a.body) == (200, data)
    assert a.headers["X-Content-Type-Options"] == "nosniff"
    assert a.headers["Content-Security-Policy"] == "default-src 'none'; sandbox"
    assert a.headers["Cache-Control"] == "private, max-age=31536000, immutable"
    assert a.headers["ETag"] == f'"{h}"' and a.headers["Content-Type"] == "image/png"
    assert a.headers["Content-Disposition"] == "inline" and a.headers["Access-Control-Allow-Origin"] == "*"
    assert (await get(relay.http_url, alice, h)).status == 200
    wrong = await get(relay.http_url, alice, f"{h}.jpg")
    assert (wrong.status, wrong.reason, wrong.json()) == (404, "blob not found", {"error": "blob not found"})
    cached = await get(relay.http_url, alice, h, extra={"If-None-Match": f'"{h}"'})
    assert cached.status == 304 and cached.body == b""
    head = await get(relay.http_url, alice, h, method="HEAD")
    assert (head.status, head.headers["Content-Length"], head.body) == (200, str(len(data)), b"")
    thumb = await get(relay.http_url, alice, f"{h}.thumb.jpg")
    assert (
        thumb.status == 200
        and thumb.headers["Content-Type"] == "image/jpeg"
        and thumb.body[:3] == b"\xff\xd8\xff"
    )
    pdf = b"%PDF-1.4\n" + os.urandom(2000)
    p = await upload(relay.http_url, alice, pdf)
    served = await get(relay.http_url, alice, f"{p['sha256']}.pdf")
    assert served.headers["Content-Disposition"] == f'attachment; filename="{p["sha256"]}.pdf"'
    assert (await get(relay.http_url, alice, f"{p['sha256']}.thumb.jpg")).status == 404
    text = await upload(relay.http_url, alice, b"hello\n")
    t = await get(relay.http_url, alice, text["sha256"])
    assert t.headers["Content-Type"] == "text/plain; charset=utf-8"
    assert t.headers["Content-Disposition"].startswith("attachment")


async def test_get_authorization(sqlite_relay: RunningRelay, alice: Identity) -> None:
    """Checklist 18, 19, 20."""
    base = sqlite_relay.http_url
    d = await upload(base, alice, unique_png())
    h = d["sha256"]
    assert (await get(base, None, h)).reason == "missing authorization"
    other = await get(base, None, h, event=auth(alice, "get", "cd" * 32))
    assert (other.status, other.reason) == (401, "authorization does not cover this blob")
    host_wide = auth(alice, "get", server=base)
    assert (await get(base, None, h, event=host_wide)).status == 200
    old = auth(alice, "get", h, created_at=int(time.time()) - 3601, expires_in=600)
    assert (await get(base, None, h, event=old)).reason == "authorization timestamp out of window"
    via_query = await get(base, alice, h, query=True)
    assert via_query.status == 200
    assert (await get(base, alice, h, query=True, method="HEAD")).status == 200
    options = await _options(base + f"/media/{h}")
    assert options == 204


async def _options(url: str) -> int:
    async with aiohttp.ClientSession() as s, s.options(url) as r:
        assert "Range" in r.headers["Access-Control-Allow-Headers"]
        return r.status


async def test_ranges(relay: RunningRelay, alice: Identity) -> None:
    """Checklist 21: 206 with Content-Range; 416 past the end; an open range of a 40 MiB blob
    answers 16 MiB (on PostgreSQL this reads only the chunks it overlaps)."""
    data = os.urandom(40 << 20)
    d = await upload(relay.http_url, alice, data)
    h = d["sha256"]
    part = await get(relay.http_url, alice, h, extra={"Range": "bytes=0-99"})
    assert (part.status, part.headers["Content-Range"], part.body) == (
        206,
        f"bytes 0-99/{len(data)}",
        data[:100],
    )
    mid = await get(relay.http_url, alice, h, extra={"Range": "bytes=1048570-1048589"})
    assert mid.body == data[1048570:1048590]  # across a 1 MiB chunk boundary
    tail = await get(relay.http_url, alice, h, extra={"Range": "bytes=-7"})
    assert tail.body == data[-7:]
    beyond = await get(relay.http_url, alice, h, extra={"Range": f"bytes={len(data)}-"})
    assert (beyond.status, beyond.headers["Content-Range"]) == (416, f"bytes */{len(data)}")
    open_range = await get(relay.http_url, alice, h, extra={"Range": "bytes=1-"})
    assert open_range.status == 206 and len(open_range.body) == 16 << 20
    assert open_range.headers["Content-Range"] == f"bytes 1-{16 << 20}/{len(data)}"
    assert open_range.body == data[1 : 1 + (16 << 20)]
    whole = await get(relay.http_url, alice, h)
    assert whole.status == 200 and whole.body == data


async def refused_event(client: Any, event: Event, message: str) -> None:
    result = await client.publish(event)
    assert (result.accepted, result.message) == (False, message)


async def test_private_channel_blob(
    relay: RunningRelay, alice: Identity, bob: Identity, carol: Identity
) -> None:
    """Checklist 23, 24, 26, 27, 29: served to members and the uploader; a non-member with a
    valid authorization gets the very answer of an unknown hash; removal takes effect; an
    outsider cannot widen the audience; posting it in an open channel does."""
    base = relay.http_url
    d = await upload(base, alice, unique_png())
    h = d["sha256"]
    unknown = "ef" * 32
    assert (await get(base, bob, h)).status == 404  # checklist 26: unreferenced, not the uploader
    async with relay.client(alice) as ca, relay.client(bob) as cb, relay.client(carol) as cc:
        private = await create_channel(ca, alice, "private", name="design")
        await put_user(ca, alice, private, bob.pubkey)
        msg = Event.create(
            alice.secret, 9, f"mockup\n{d['url']}", [["h", private], imeta_of(d, name="m.png")]
        )
        await accepted(ca, msg)
        member = await get(base, bob, h)
        assert (member.status, member.body[:8]) == (200, b"\x89PNG\r\n\x1a\n")
        outsider, missing = await get(base, carol, h), await get(base, carol, unknown)
        assert (outsider.status, outsider.reason, outsider.body) == (
            missing.status,
            missing.reason,
            missing.body,
        )
        assert dict(outsider.headers).keys() - {"Date"} == dict(missing.headers).keys() - {"Date"}
        thumb = await get(base, carol, f"{h}.thumb.jpg")
        assert thumb.status == 404
        open_ch = await create_channel(cc, carol, "open", name="lobby")
        stolen = Event.create(carol.secret, 9, d["url"], [["h", open_ch], imeta_of(d)])
        await refused_event(cc, stolen, f"invalid: imeta blob not found: {h}")
        assert (await get(base, carol, h)).status == 404
        # bob is removed from the channel: his next read is refused (the relay's own change)
        await accepted(ca, Event.create(alice.secret, 9001, "", [["h", private], ["p", bob.pubkey]]))
        assert (await get(base, bob, h)).status == 404
        # alice posts it in an open channel: now every authenticated reader may read it
        await accepted(cb, Event.create(bob.secret, 9021, "", [["h", open_ch]]))
        await accepted(ca, Event.create(alice.secret, 9021, "", [["h", open_ch]]))
        await accepted(ca, Event.create(alice.secret, 9, d["url"], [["h", open_ch], imeta_of(d)]))
        assert (await get(base, carol, h)).status == 200
        assert (await get(base, bob, h)).status == 200


async def test_dm_blob_and_profile_picture(
    relay: RunningRelay, alice: Identity, bob: Identity, carol: Identity
) -> None:
    """Checklist 25 and 33."""
    base = relay.http_url
    d = await upload(base, alice, unique_png())
    async with relay.client(alice) as ca:
        opened = await ca.publish(Event.create(alice.secret, 41010, "", [["p", bob.pubkey]]))
        assert opened.accepted, opened.message
        dms = await ca.query([{"kinds": [41010], "authors": [alice.pubkey]}])
        assert dms
        dm_channel = await _dm_channel(ca, alice, bob)
        await accepted(ca, Event.create(alice.secret, 9, d["url"], [["h", dm_channel], imeta_of(d)]))
        assert (await get(base, bob, d["sha256"])).status == 200
        assert (await get(base, carol, d["sha256"])).status == 404
        pic = await upload(base, alice, unique_png())
        profile = f'{{"name":"Alice","picture":"{pic["url"]}"}}'
        await accepted(ca, Event.create(alice.secret, 0, profile, []))
        assert (await get(base, carol, pic["sha256"])).status == 200


async def _dm_channel(client: Any, who: Identity, other: Identity) -> str:
    found = await client.query([{"kinds": [39002], "#p": [who.pubkey]}])
    for event in found:
        h = event.first_tag("d")
        if h and other.pubkey in event.tag_values("p"):
            return str(h)
    raise AssertionError(f"no DM channel found in {[e.tags for e in found]}")


async def test_imeta_ingest_refusals(relay: RunningRelay, alice: Identity) -> None:
    """Checklist 28, 30, 31, 32, 51, 43."""
    base = relay.http_url
    d = await upload(base, alice, unique_png())
    async with relay.client(alice) as ca:
        ch = await create_channel(ca, alice, "open")
        missing = "ef" * 32
        fake = dict(d, url=d["url"].replace(d["sha256"], missing), sha256=missing)
        await refused_event(
            ca,
            Event.create(alice.secret, 9, "x", [["h", ch], imeta_of(fake)]),
            f"invalid: imeta blob not found: {missing}",
        )
        bad_x = [*imeta_of(d)[:3], f"x {'cd' * 32}", *imeta_of(d)[4:]]
        await refused_event(
            ca, Event.create(alice.secret, 9, "x", [["h", ch], bad_x]), "invalid: imeta x does not match url"
        )
        wrong_size = [t if not t.startswith("size ") else "size 1" for t in imeta_of(d)]
        await refused_event(
            ca,
            Event.create(alice.secret, 9, "x", [["h", ch], wrong_size]),
            "invalid: imeta size does not match the stored blob",
        )
        no_dim = [t for t in imeta_of(d) if not t.startswith("dim ")]
        await refused_event(
            ca, Event.create(alice.secret, 9, "x", [["h", ch], no_dim]), "invalid: imeta missing dim"
        )
        many = [["imeta", f"url https://elsewhere.example/{i}.png"] for i in range(21)]
        await refused_event(
            ca,
            Event.create(alice.secret, 9, "x", [["h", ch], *many]),
            "invalid: too many imeta tags (max 20)",
        )
        foreign = Event.create(
            alice.secret, 9, "x", [["h", ch], ["imeta", "url https://elsewhere.example/a.png", "m image/png"]]
        )
        await accepted(ca, foreign)
        blossom = Event.create(alice.secret, 24242, "Upload", [["t", "upload"], ["x", d["sha256"]]])
        # An authorization token is never published (docs/decisions.md 170): the refusal says where it goes.
        await refused_event(
            ca, blossom, "invalid: Blossom auth events are sent in an Authorization header, never published"
        )
        ok = Event.create(
            alice.secret, 9, d["url"], [["h", ch], imeta_of(d, name="shot.png", alt="a red square")]
        )
        await accepted(ca, ok)


async def test_upload_by_http_then_bridge_event(sqlite_relay: RunningRelay, alice: Identity) -> None:
    """The same imeta checks on the HTTP bridge (POST /events)."""
    from buzz.client.http_bridge import BridgeClient

    d = await upload(sqlite_relay.http_url, alice, unique_png())
    async with sqlite_relay.client(alice) as ca:
        ch = await create_channel(ca, alice, "open")
    bad = [t if not t.startswith("m ") else "m image/gif" for t in imeta_of(d)]
    async with BridgeClient(sqlite_relay.url, alice.secret) as bridge:
        try:
            await bridge.publish(Event.create(alice.secret, 9, "x", [["h", ch], bad]))
        except Exception as exc:  # BridgeError with the relay's text
            assert "imeta m does not match the stored blob" in str(exc)
        else:
            raise AssertionError("an imeta with the wrong type was accepted")
