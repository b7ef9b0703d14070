"""Browser: files (issue 26 item 3, media spec §15) — attach, drop and paste into the composer
with progress and cancel, several files in one message, images inline at their reserved size
(blurhash placeholder, full size on a click), file cards that save under their name, the thread's
composer, and a private channel's image kept from an outsider."""

from __future__ import annotations

import hashlib
import io
import os
from pathlib import Path

import orjson
from PIL import Image

from buzz.client.files import Files
from buzz.client.identity import Identity as ClientIdentity
from buzz.core.event import Event
from buzz.core.imeta import imeta_tags
from tests.agent.support import add_member, create_channel
from tests.support.relay import Identity, RunningRelay, relay_on
from tests.web.browser import assert_all_passed, require_browser, run_scenario

CHECKS = [
    "Attach file uploads several files with progress; the message carries them",
    "an image shows at its dim size before it loads, blurhash behind it, no layout jump",
    "a click on the image opens it full size",
    "a file card is a link named after the file with size and type, saved under its name",
    "a file dropped on the channel is attached",
    "a pasted image is attached and shows inline",
    "an upload shows its progress and Cancel upload aborts it: nothing is sent",
    "a refused file shows the relay's reason and holds the message back",
    "the thread panel attaches files too",
    "screenshots at 1280×800 and 390×844",
    "a private channel: a member sees its image, an outsider gets 404 like an unknown blob",
    "a hostile imeta draws nothing active and fetches nothing from another host",
    "a photo's location is removed before it is uploaded",
    "the CSP reported nothing",
]
GPS_IFD = 0x8825
CODE = (
    "Here is the handler:\n\n```python\ndef handler(event, limit=10):\n    seen = set()\n"
    "    for item in event.items:\n        if item.id in seen:\n            continue\n"
    "        seen.add(item.id)\n        yield item\n```"
)


def _image(width: int, height: int, hue: int) -> bytes:
    """A PNG with a diagonal gradient and a few bands (something a blurhash can show)."""
    img = Image.new("RGB", (width, height))
    img.putdata(
        [
            (
                (x * 255 // width + hue) % 256,
                (y * 255 // height),
                (120 + 40 * ((x // 97 + y // 61) % 3)) % 256,
            )
            for y in range(height)
            for x in range(width)
        ]
    )
    out = io.BytesIO()
    img.save(out, "PNG")
    return out.getvalue()


def _photo_with_location() -> bytes:
    """An 800 × 600 JPEG whose EXIF says where it was taken and to turn it (orientation 6)."""
    img = Image.linear_gradient("L").resize((800, 600)).convert("RGB")
    exif = Image.Exif()
    exif[0x0112] = 6
    exif[GPS_IFD] = {1: "N", 2: (52.0, 22.0, 12.5), 3: "E", 4: (4.0, 53.0, 30.0)}
    out = io.BytesIO()
    img.save(out, "JPEG", exif=exif.tobytes())
    return out.getvalue()


def _pdf() -> bytes:
    body = b"%PDF-1.4\n1 0 obj << /Type /Catalog >> endobj\n" + b"% notes of the design review\n" * 100
    return body + b"trailer << /Root 1 0 R >>\n%%EOF\n"


def _size_text(n: int) -> str:
    """As the page writes sizes (render/files.ts formatSize), for sizes under 1 MiB."""
    if n < 1024:
        return f"{n} B"
    v = n / 1024
    return f"{round(v)} KB" if v >= 100 else f"{v:.1f} KB"


async def test_files_in_the_browser(tmp_path: Path, alice: Identity, bob: Identity, carol: Identity) -> None:
    require_browser()
    async with relay_on(tmp_path / "relay") as relay:
        await _scenario(relay, tmp_path, alice, bob, carol)


async def _scenario(relay: RunningRelay, tmp: Path, alice: Identity, bob: Identity, carol: Identity) -> None:
    async with relay.client(alice) as client:
        general = await create_channel(client, alice, "general")
        leads = await create_channel(client, alice, "leads", "private")
        random = await create_channel(client, alice, "random")
        for who in (bob, carol):
            await add_member(client, alice, general, who.pubkey)
        await add_member(client, alice, leads, bob.pubkey)
    for who, name in ((alice, "Alice"), (bob, "Bob"), (carol, "Carol")):
        async with relay.client(who) as client:
            assert (await client.publish(_event(who, 0, orjson.dumps({"name": name}).decode(), []))).accepted
    async with relay.client(bob) as client:
        for text in ("Morning! The review is at ten.", CODE):
            assert (await client.publish(_event(bob, 9, text, [["h", general]]))).accepted
        # imeta naming other hosts is stored unchanged (media.md §9.2): the page must draw it safely.
        hostile = [["h", random], *_hostile_imeta()]
        assert (await client.publish(_event(bob, 9, "look at these", hostile))).accepted

    payloads = {
        "photo.png": ("image/png", _image(1200, 800, 0)),
        "pasted.png": ("image/png", _image(160, 120, 90)),
        "secret.png": ("image/png", _image(400, 300, 180)),
        "report.pdf": ("application/pdf", _pdf()),
        "notes.csv": ("text/csv", b"step,owner,minutes\nbuild,Bob,12\ntest,Carol,30\n"),
        "big.bin": ("application/octet-stream", os.urandom(8 * 1024 * 1024)),
        "trip.jpg": ("image/jpeg", _photo_with_location()),
        "drawing.svg": (
            "image/svg+xml",
            b'<svg xmlns="http://www.w3.org/2000/svg"><script>alert(1)</script></svg>',
        ),
    }
    files = {}
    for name, (mime, data) in payloads.items():
        path = tmp / name
        path.write_bytes(data)
        files[name] = {
            "path": str(path),
            "type": mime,
            "sha256": hashlib.sha256(data).hexdigest(),
            "sizeText": _size_text(len(data)),
        }

    report = await run_scenario(
        "files",
        {
            "url": relay.http_url + "/",
            "secret": alice.secret,
            "bob": bob.secret,
            "carol": carol.secret,
            "leads": leads,
            "files": files,
            "photo": {"width": 1200, "height": 800},
            "thumb": {"width": 320, "height": 213},
        },
        timeout=280,
    )
    assert_all_passed(report, CHECKS)

    # The message the page sent has the CLI's shape (media.md §13): the text, one URL line per
    # file, one imeta per file with the descriptor's keys and the file's name.
    async with relay.client(alice) as client:
        sent = await client.query([{"kinds": [9], "authors": [alice.pubkey], "#h": [general]}])
    review = next(e for e in sent if e.content.startswith("Design review"))
    metas = imeta_tags(review)
    assert [m["name"] for m in metas] == ["photo.png", "report.pdf"]
    assert [m["x"] for m in metas] == [files["photo.png"]["sha256"], files["report.pdf"]["sha256"]]
    assert review.content.split("\n")[1:] == [m["url"] for m in metas]
    assert list(metas[0]) == ["url", "m", "x", "size", "dim", "blurhash", "thumb", "name"]
    assert metas[0]["dim"] == "1200x800" and metas[0]["m"] == "image/png"
    assert list(metas[1]) == ["url", "m", "x", "size", "name"] and metas[1]["m"] == "application/pdf"
    pasted = next(e for e in sent if e.content.startswith("Pasted from the clipboard"))
    assert imeta_tags(pasted)[0]["name"].startswith("Pasted image ")
    # The cancelled upload never reached the relay: no blob, nothing sent with it.
    assert await relay.relay.media.readable(files["big.bin"]["sha256"], alice.pubkey) is None
    never = next(e for e in sent if e.content == "Never mind the big file")
    assert imeta_tags(never) == []
    await _location_removed(relay, alice, random, files["trip.jpg"]["sha256"], tmp)


async def _location_removed(
    relay: RunningRelay, alice: Identity, channel: str, original: str, tmp: Path
) -> None:
    """The photo the page sent is another file than the one picked: upright, without EXIF."""
    async with relay.client(alice) as client:
        sent = await client.query([{"kinds": [9], "authors": [alice.pubkey], "#h": [channel]}])
    (meta,) = imeta_tags(next(e for e in sent if e.content.startswith("From the offsite")))
    assert meta["x"] != original and meta["m"] == "image/jpeg" and meta["dim"] == "600x800"
    files = Files(relay.url, ClientIdentity(alice.secret))
    try:
        got = await files.get(url=meta["url"], output=str(tmp / "downloaded.jpg"))
    finally:
        await files.close()
    stored = Image.open(got.path or "")
    assert stored.size == (600, 800)
    assert stored.getexif().get_ifd(GPS_IFD) == {} and 0x0112 not in stored.getexif()


def _hostile_imeta() -> list[list[str]]:
    fake = hashlib.sha256(b"nothing stored").hexdigest()
    return [
        [
            "imeta",
            f"url https://evil.example/{fake}.svg",
            "m image/svg+xml",
            f"x {fake}",
            "size 100",
            "dim 10x10",
            "name diagram.svg",
        ],
        [
            "imeta",
            f"url https://evil.example/{fake}.png",
            "m image/png",
            f"x {fake}",
            "size 100",
            "dim 640x480",
            "name <img src=x onerror=alert(1)>.png",
        ],
        ["imeta", "url javascript:alert(1)", "m text/html", "name javascript.html"],
        [
            "imeta",
            f"url https://evil.example/{fake}.html",
            "m text/html",
            f"x {fake}",
            "size 100",
            "name page.html",
        ],
    ]


def _event(who: Identity, kind: int, content: str, tags: list[list[str]]) -> Event:
    return Event.create(who.secret, kind, content, tags)
