"""Content types decided from the bytes (media.md §5), pure.

`TYPES` is the allowed table of §5.2 (type → extension, cap class, inline or attachment);
`REFUSED_DECLARED` the declared types refused whatever the bytes (§5.3 item 2). `sniff(facts,
declared)` decides the stored type from `Facts` the runner gathered from the received file
(first and last bytes, ZIP entry names, whether the whole body is UTF-8 text, whether it parses
as JSON) and raises `Refused(type)` for the active content and programs of §5.3. The request's
declared type only chooses among types the bytes are consistent with.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from buzz.media.limits import MediaClass


@dataclass(frozen=True, slots=True)
class TypeInfo:
    ext: str
    cls: MediaClass
    inline: bool


_I, _V, _A, _F = MediaClass.IMAGE, MediaClass.VIDEO, MediaClass.AUDIO, MediaClass.FILE
DOCX = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"
XLSX = "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"
PPTX = "application/vnd.openxmlformats-officedocument.presentationml.presentation"
ODT = "application/vnd.oasis.opendocument.text"
ODS = "application/vnd.oasis.opendocument.spreadsheet"
ODP = "application/vnd.oasis.opendocument.presentation"
EPUB = "application/epub+zip"

TYPES: dict[str, TypeInfo] = {
    "image/jpeg": TypeInfo("jpg", _I, True),
    "image/png": TypeInfo("png", _I, True),
    "image/gif": TypeInfo("gif", MediaClass.GIF, True),
    "image/webp": TypeInfo("webp", _I, True),
    "video/mp4": TypeInfo("mp4", _V, True),
    "video/quicktime": TypeInfo("mov", _V, False),
    "video/webm": TypeInfo("webm", _V, True),
    "audio/mpeg": TypeInfo("mp3", _A, True),
    "audio/mp4": TypeInfo("m4a", _A, True),
    "audio/ogg": TypeInfo("ogg", _A, True),
    "audio/wav": TypeInfo("wav", _A, True),
    "audio/flac": TypeInfo("flac", _A, True),
    "application/pdf": TypeInfo("pdf", _F, False),
    DOCX: TypeInfo("docx", _F, False),
    XLSX: TypeInfo("xlsx", _F, False),
    PPTX: TypeInfo("pptx", _F, False),
    ODT: TypeInfo("odt", _F, False),
    ODS: TypeInfo("ods", _F, False),
    ODP: TypeInfo("odp", _F, False),
    EPUB: TypeInfo("epub", _F, False),
    "application/zip": TypeInfo("zip", _F, False),
    "application/gzip": TypeInfo("gz", _F, False),
    "application/x-bzip2": TypeInfo("bz2", _F, False),
    "application/x-xz": TypeInfo("xz", _F, False),
    "application/zstd": TypeInfo("zst", _F, False),
    "application/x-7z-compressed": TypeInfo("7z", _F, False),
    "application/vnd.rar": TypeInfo("rar", _F, False),
    "application/x-tar": TypeInfo("tar", _F, False),
    "text/plain": TypeInfo("txt", _F, False),
    "text/csv": TypeInfo("csv", _F, False),
    "text/markdown": TypeInfo("md", _F, False),
    "application/json": TypeInfo("json", _F, False),
    "application/octet-stream": TypeInfo("bin", _F, False),
}
IMAGE_TYPES = frozenset({"image/jpeg", "image/png", "image/gif", "image/webp"})
# §5.3 item 2: script cannot be recognised from bytes, so its declaration is refused.
REFUSED_DECLARED = frozenset(
    {
        "image/svg+xml",
        "text/html",
        "application/xhtml+xml",
        "application/javascript",
        "text/javascript",
        "application/x-javascript",
    }
)
# Declared text types a UTF-8 body may be stored as (§5.2 `text/plain` row).
TEXT_DECLARED = frozenset({"text/csv", "text/markdown", "application/json"})
MARKUP_SNIFF_BYTES = 1024
_MARKUP_STARTS = (b"<!doctype html", b"<html", b"<head", b"<body", b"<script", b"<iframe", b"<svg")
_MP4_BRANDS = frozenset(
    {b"isom", b"mp41", b"mp42", b"avc1", b"dash", b"M4V "} | {f"iso{n}".encode() for n in range(2, 10)}
)
# Simple signatures at offset 0, in order (longer ones first where they share a prefix).
_MAGIC: tuple[tuple[bytes, str], ...] = (
    (b"\x89PNG\r\n\x1a\n", "image/png"),
    (b"\xff\xd8\xff", "image/jpeg"),
    (b"GIF87a", "image/gif"),
    (b"GIF89a", "image/gif"),
    (b"%PDF-", "application/pdf"),
    (b"fLaC", "audio/flac"),
    (b"OggS", "audio/ogg"),
    (b"ID3", "audio/mpeg"),
    (b"\x1f\x8b", "application/gzip"),
    (b"BZh", "application/x-bzip2"),
    (b"\xfd7zXZ\x00", "application/x-xz"),
    (b"\x28\xb5\x2f\xfd", "application/zstd"),
    (b"7z\xbc\xaf\x27\x1c", "application/x-7z-compressed"),
    (b"Rar!\x1a\x07", "application/vnd.rar"),
)
# §5.3 item 3: native programs, refused with these type names.
_PROGRAMS: tuple[tuple[bytes, str], ...] = (
    (b"MZ", "application/x-msdownload"),
    (b"\x7fELF", "application/x-executable"),
    (b"\xfe\xed\xfa\xce", "application/x-mach-binary"),
    (b"\xfe\xed\xfa\xcf", "application/x-mach-binary"),
    (b"\xce\xfa\xed\xfe", "application/x-mach-binary"),
    (b"\xcf\xfa\xed\xfe", "application/x-mach-binary"),
    (b"\xca\xfe\xba\xbe", "application/x-mach-binary"),
)
APK = "application/vnd.android.package-archive"
DMG = "application/x-apple-diskimage"
_OPENDOCUMENT = {ODT: ODT, ODS: ODS, ODP: ODP, EPUB: EPUB}
_OOXML_DIRS = (("word/", DOCX), ("xl/", XLSX), ("ppt/", PPTX))


class Refused(Exception):
    """Bytes (or a declaration) of a type §5.3 refuses; `type` names it in the 415 reason."""

    def __init__(self, type_: str) -> None:
        super().__init__(type_)
        self.type = type_


@dataclass(frozen=True, slots=True)
class Facts:
    """What the sniffer needs from a received body of `size` bytes: its first bytes (`head`,
    at least 4 KiB when there are that many), its last 1 KiB (`tail`), the names of its ZIP
    central directory (None when it is not a readable ZIP), whether the whole body is UTF-8
    without NUL (`utf8_text`), and whether it parses as JSON (None when not tried)."""

    head: bytes
    tail: bytes
    size: int
    zip_names: tuple[str, ...] | None = None
    utf8_text: bool = False
    json_ok: bool | None = None


def declared_type(header: str | None) -> str | None:
    """The media type of a Content-Type header, lowercase, without parameters; None when absent."""
    if not header:
        return None
    value = header.split(";", 1)[0].strip().lower()
    return value or None


def check_declared(declared: str | None) -> None:
    """§5.3 item 2: raises Refused for a declared active type (before any byte is read)."""
    if declared in REFUSED_DECLARED:
        raise Refused(declared)


def is_zip(head: bytes) -> bool:
    return head.startswith((b"PK\x03\x04", b"PK\x05\x06"))


def _markup(head: bytes) -> str | None:
    """§5.3 item 1: HTML / SVG / XHTML text, by its first non-whitespace characters."""
    text = head[:MARKUP_SNIFF_BYTES]
    if text.startswith(b"\xef\xbb\xbf"):
        text = text[3:]
    start = text.lstrip(b" \t\r\n\f").lower()
    if start.startswith(_MARKUP_STARTS):
        return "image/svg+xml" if start.startswith(b"<svg") else "text/html"
    if start.startswith(b"<?xml"):
        if b"<svg" in start:
            return "image/svg+xml"
        if b"<html" in start:
            return "application/xhtml+xml"
    return None


def _first_zip_entry(head: bytes) -> tuple[str, bytes] | None:
    """Name and stored data of the first local entry, when it is stored uncompressed."""
    if len(head) < 30 or not head.startswith(b"PK\x03\x04"):
        return None
    method, size, name_len, extra_len = struct.unpack_from("<H8xI4xHH", head, 8)
    start = 30 + name_len + extra_len
    if method != 0 or start + size > len(head):
        return None
    name = head[30 : 30 + name_len].decode("utf-8", "replace")
    return name, head[start : start + size]


def _zip_type(facts: Facts) -> str:
    names = facts.zip_names or ()
    if any(n == "AndroidManifest.xml" for n in names):
        raise Refused(APK)
    first = _first_zip_entry(facts.head)
    if first is not None and first[0] == "mimetype":
        declared = first[1].decode("ascii", "replace").strip()
        if declared in _OPENDOCUMENT:
            return declared
    for prefix, mime in _OOXML_DIRS:
        if any(n.startswith(prefix) for n in names):
            return mime
    return "application/zip"


def _iso_bmff(head: bytes) -> str | None:
    """video/mp4, video/quicktime or audio/mp4 from an `ftyp` box's brands."""
    if len(head) < 16 or head[4:8] != b"ftyp":
        return None
    box = struct.unpack_from(">I", head, 0)[0]
    end = min(max(box, 16), len(head))
    brands = {head[8:12]} | {head[i : i + 4] for i in range(16, end - 3, 4)}
    major = head[8:12]
    if major == b"qt  ":
        return "video/quicktime"
    if major == b"M4A ":
        return "audio/mp4"
    if brands & _MP4_BRANDS:
        return "video/mp4"
    if b"M4A " in brands:
        return "audio/mp4"
    return None


def _ebml_webm(head: bytes) -> bool:
    return head.startswith(b"\x1a\x45\xdf\xa3") and b"\x42\x82\x84webm" in head[:64]


def _mpeg_frame(head: bytes) -> bool:
    """An MPEG audio frame header: 11 sync bits, a valid version, layer and bitrate."""
    if len(head) < 4 or head[0] != 0xFF or head[1] & 0xE0 != 0xE0:
        return False
    version, layer, bitrate = (head[1] >> 3) & 3, (head[1] >> 1) & 3, head[2] >> 4
    return version != 1 and layer != 0 and bitrate not in (0, 15)


def _binary(facts: Facts) -> str | None:
    head = facts.head
    for magic, mime in _PROGRAMS:
        if head.startswith(magic):
            raise Refused(mime)
    if len(facts.tail) >= 512 and facts.tail[-512:].startswith(b"koly"):
        raise Refused(DMG)
    if is_zip(head):
        return _zip_type(facts)
    for magic, mime in _MAGIC:
        if head.startswith(magic):
            return mime
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return "image/webp"
    if head[:4] == b"RIFF" and head[8:12] == b"WAVE":
        return "audio/wav"
    if (mp4 := _iso_bmff(head)) is not None:
        return mp4
    if _ebml_webm(head):
        return "video/webm"
    if head[257:262] == b"ustar":
        return "application/x-tar"
    if _mpeg_frame(head):
        return "audio/mpeg"
    return None


def sniff(facts: Facts, declared: str | None) -> str:
    """The stored type of a body (a key of TYPES). Raises Refused for §5.3 content."""
    check_declared(declared)
    found = _binary(facts)
    if found is not None:
        return found
    if facts.utf8_text:
        if (markup := _markup(facts.head)) is not None:
            raise Refused(markup)
        if declared == "application/json":
            return "application/json" if facts.json_ok else "text/plain"
        if declared in TEXT_DECLARED:
            return declared
        return "text/plain"
    return "application/octet-stream"


def type_info(mime: str) -> TypeInfo:
    return TYPES[mime]


def cap_class(declared: str | None) -> MediaClass | None:
    """The cap class of a declared type when it is one of §5.2's, else None (MEDIA_MAX_BYTES)."""
    info = TYPES.get(declared or "")
    return info.cls if info is not None else None
