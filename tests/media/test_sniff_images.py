"""Types from bytes (media.md §5) and images under decompression-bomb limits (§6), on real
files: the sniffer reads what `receive.facts` gathers, Pillow opens what it made."""

from __future__ import annotations

import io
import random
import struct
import time
import zipfile
import zlib
from pathlib import Path

import pytest
from PIL import Image

from buzz.media.images import INVALID, TOO_LARGE, ImageRefused, ImageWorker, inspect
from buzz.media.receive import facts
from buzz.media.sniff import APK, DMG, DOCX, ODT, Refused, sniff
from tests.media.support import jpeg, png


def sniffed(tmp_path: Path, data: bytes, declared: str | None = None) -> str:
    path = tmp_path / "body"
    path.write_bytes(data)
    try:
        return sniff(facts(path, declared), declared)
    except Refused as exc:
        return f"refused {exc.type}"


def zip_bytes(entries: list[tuple[str, bytes]], stored_first: bool = False) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as z:
        for i, (name, data) in enumerate(entries):
            method = zipfile.ZIP_STORED if (stored_first and i == 0) else zipfile.ZIP_DEFLATED
            z.writestr(zipfile.ZipInfo(name), data, compress_type=method)
    return out.getvalue()


def test_allowed_types(tmp_path: Path) -> None:
    """Checklist 11: PDF, text, random bytes; and the signature table."""
    assert sniffed(tmp_path, png()) == "image/png"
    assert sniffed(tmp_path, jpeg(), "image/png") == "image/jpeg"  # the bytes decide
    assert sniffed(tmp_path, b"GIF89a" + b"\0" * 20) == "image/gif"
    assert sniffed(tmp_path, b"RIFF\0\0\0\0WEBPVP8 ") == "image/webp"
    assert sniffed(tmp_path, b"RIFF\0\0\0\0WAVEfmt ") == "audio/wav"
    assert sniffed(tmp_path, b"\0\0\0\x18ftypisom\0\0\0\0mp41") == "video/mp4"
    assert sniffed(tmp_path, b"\0\0\0\x14ftypqt  \0\0\0\0") == "video/quicktime"
    assert sniffed(tmp_path, b"\0\0\0\x14ftypM4A \0\0\0\0") == "audio/mp4"
    assert sniffed(tmp_path, b"\x1a\x45\xdf\xa3\x9f\x42\x86\x81\x01\x42\x82\x84webm") == "video/webm"
    assert sniffed(tmp_path, b"%PDF-1.7\n%\xe2\xe3") == "application/pdf"
    assert sniffed(tmp_path, "hello, wörld\n".encode()) == "text/plain"
    assert sniffed(tmp_path, b"a,b\n1,2\n", "text/csv") == "text/csv"
    assert sniffed(tmp_path, b'{"a": 1}', "application/json") == "application/json"
    assert sniffed(tmp_path, b"{not json", "application/json") == "text/plain"
    assert sniffed(tmp_path, bytes(range(256)) * 4) == "application/octet-stream"
    tar = b"x" * 257 + b"ustar" + b"\0" * 250
    assert sniffed(tmp_path, tar) == "application/x-tar"
    assert sniffed(tmp_path, zlib.compress(b"x")[:0] + b"\x1f\x8b\x08" + b"\0" * 20) == "application/gzip"
    assert sniffed(tmp_path, zip_bytes([("a.txt", b"hi")])) == "application/zip"
    odt = zip_bytes([("mimetype", ODT.encode()), ("content.xml", b"<x/>")], stored_first=True)
    assert sniffed(tmp_path, odt) == ODT


def test_docx_recognised_from_the_central_directory(tmp_path: Path) -> None:
    """Checklist 12: large early entries do not hide `word/`."""
    big = random.Random(7).randbytes(5 << 20)  # incompressible: word/ starts 5 MB in
    data = zip_bytes([("[Content_Types].xml", big), ("word/document.xml", b"<w:document/>")])
    assert len(data) > 5 << 20
    assert sniffed(tmp_path, data) == DOCX


def test_refused_types(tmp_path: Path) -> None:
    """Checklist 10: SVG, HTML, declared JavaScript, PE (even named .png), ELF, APK, Mach-O, DMG."""
    assert sniffed(tmp_path, b"  <svg xmlns='http://www.w3.org/2000/svg'/>") == "refused image/svg+xml"
    assert sniffed(tmp_path, b'<?xml version="1.0"?>\n<svg/>') == "refused image/svg+xml"
    assert sniffed(tmp_path, b"\xef\xbb\xbf<!DOCTYPE html><p>x") == "refused text/html"
    assert sniffed(tmp_path, b"<SCRIPT>alert(1)</SCRIPT>") == "refused text/html"
    assert sniffed(tmp_path, b"console.log(1)", "application/javascript") == "refused application/javascript"
    assert sniffed(tmp_path, b"MZ\x90\0" + b"\0" * 100, "image/png") == "refused application/x-msdownload"
    assert sniffed(tmp_path, b"\x7fELF\x02\x01\x01" + b"\0" * 50) == "refused application/x-executable"
    assert sniffed(tmp_path, b"\xcf\xfa\xed\xfe" + b"\0" * 50) == "refused application/x-mach-binary"
    apk = zip_bytes([("AndroidManifest.xml", b"x"), ("classes.dex", b"y")])
    assert sniffed(tmp_path, apk) == f"refused {APK}"
    dmg = b"\0" * 2048 + b"koly" + b"\0" * 508
    assert sniffed(tmp_path, dmg) == f"refused {DMG}"


def bomb_png(width: int, height: int) -> bytes:
    """A PNG whose header declares `width` × `height` with a tiny compressed body (a zip bomb)."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    raw = zlib.compress(b"\0" * (1 << 20), 9)  # a megabyte of zero rows, far less than declared
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", raw) + chunk(b"IEND", b"")


def test_decompression_bomb_refused_before_decoding(tmp_path: Path) -> None:
    """Checklist 13: 10 000 × 10 000 declared, refused from the header alone (fast, small)."""
    path = tmp_path / "bomb.png"
    path.write_bytes(bomb_png(10_000, 10_000))
    started = time.process_time()
    with pytest.raises(ImageRefused, match=TOO_LARGE):
        inspect(path)
    assert time.process_time() - started < 1.0  # a decode of 10^8 pixels takes far longer
    # just over the bound (Pillow's own check would only warn up to 2×): still refused
    path.write_bytes(bomb_png(5001, 5000))
    with pytest.raises(ImageRefused, match=TOO_LARGE):
        inspect(path)


def test_truncated_and_garbage_images(tmp_path: Path) -> None:
    data = jpeg(400, 300)
    path = tmp_path / "cut.jpg"
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(ImageRefused, match=INVALID):
        inspect(path)
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + b"\0" * 40)
    with pytest.raises(ImageRefused, match=INVALID):
        inspect(path)


def test_exif_orientation_dims_and_thumbnail(tmp_path: Path) -> None:
    """Checklist 14: 4000 × 3000 with orientation 6 → dim 3000x4000, a JPEG thumb in 320 × 320
    with no EXIF left."""
    path = tmp_path / "photo.jpg"
    path.write_bytes(jpeg(4000, 3000, orientation=6, quality=70))
    facts_ = inspect(path)
    assert (facts_.width, facts_.height) == (3000, 4000)
    thumb = Image.open(io.BytesIO(facts_.thumb))
    assert thumb.format == "JPEG" and thumb.size == (240, 320)
    assert not thumb.getexif() and "icc_profile" not in thumb.info
    assert len(facts_.blurhash) == 28  # 4 × 3 components


def test_small_image_not_enlarged_and_transparency_flattened(tmp_path: Path) -> None:
    path = tmp_path / "dot.png"
    im = Image.new("RGBA", (10, 8), (0, 0, 0, 0))
    im.save(path, "PNG")
    facts_ = inspect(path)
    thumb = Image.open(io.BytesIO(facts_.thumb))
    assert thumb.size == (10, 8)
    assert thumb.convert("RGB").getpixel((5, 4)) >= (250, 250, 250)  # white, not black


async def test_image_worker_limits_time(tmp_path: Path) -> None:
    path = tmp_path / "ok.png"
    path.write_bytes(png())
    worker = ImageWorker(workers=1, timeout_s=30)
    assert (await worker.inspect(path)).width == 64
    slow = ImageWorker(workers=1, timeout_s=0.0)
    with pytest.raises(ImageRefused, match="timed out"):
        await slow.inspect(path)
    assert (await worker.inspect(path)).height == 48  # the slot came back after the slow one
