"""The media numbers (media.md §11, §16, §17) and the relay's media settings, pure.

Every cap, window and rate the media code enforces is a constant here or a field of
`MediaSettings`, which `settings_from_env` reads from the environment (invalid values raise
ValueError naming the variable, so startup stops: media.md §16).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum

KIB = 1024
MIB = 1024 * KIB

AUTH_FUTURE_SKEW_S = 5
UPLOAD_AUTH_WINDOW_S = 600
GET_AUTH_WINDOW_S = 3600
IMAGE_MAX_BYTES = 50 * MIB
GIF_MAX_BYTES = 10 * MIB
VIDEO_MAX_BYTES = 500 * MIB
AUDIO_MAX_BYTES = 100 * MIB
FILE_MAX_BYTES = 100 * MIB
MAX_IMAGE_PIXELS = 25_000_000
MAX_IMAGE_FRAMES = 1000
IMAGE_PROCESS_TIMEOUT_S = 30
IMAGE_WORKERS = 2  # images decoded at once per replica: each may hold MAX_IMAGE_PIXELS × 4 bytes
THUMB_MAX_SIDE = 320
THUMB_JPEG_QUALITY = 80
BLURHASH_COMPONENTS = (4, 3)
BLURHASH_SOURCE_SIDE = 32  # blurhash is computed from the thumbnail scaled to fit this (decision 192)
RANGE_MAX_BYTES = 16 * MIB
QUOTA_DEFAULT_BYTES = 1024 * MIB
UPLOADS_PER_REPLICA = 8
UPLOADS_PER_PUBKEY = 2
UPLOADS_PER_MINUTE = 30
MEDIA_ORPHAN_GRACE_S = 86_400
GC_INTERVAL_S = 3600
TMP_MAX_AGE_S = 3600
ACCESS_CACHE_TTL_S = 10
ACCESS_CACHE_ENTRIES = 10_000
DB_CHUNK_BYTES = MIB
UPLOAD_IDLE_TIMEOUT_S = 30.0  # no body byte for this long: the upload is incomplete (slots are few)
UPLOAD_BUFFER_BYTES = MIB  # body bytes an upload holds before they are hashed and written
SERVE_CHUNK_BYTES = 256 * KIB  # bytes read from a file per write of a served blob
JSON_SNIFF_MAX_BYTES = 16 * MIB  # a declared application/json larger than this is text/plain (decision 191)
REF_SCAN_MAX = 200  # referencing events read per access decision (decision 193)
SNIFF_HEAD_BYTES = 4096
SNIFF_TAIL_BYTES = 1024


class MediaClass(StrEnum):
    """The per-type cap classes of media.md §11 item 3."""

    IMAGE = "image"
    GIF = "gif"
    VIDEO = "video"
    AUDIO = "audio"
    FILE = "file"


DEFAULT_CAPS: Mapping[MediaClass, int] = {
    MediaClass.IMAGE: IMAGE_MAX_BYTES,
    MediaClass.GIF: GIF_MAX_BYTES,
    MediaClass.VIDEO: VIDEO_MAX_BYTES,
    MediaClass.AUDIO: AUDIO_MAX_BYTES,
    MediaClass.FILE: FILE_MAX_BYTES,
}
CAP_VARIABLES: Mapping[MediaClass, str] = {
    MediaClass.IMAGE: "BUZZ_MEDIA_MAX_IMAGE_BYTES",
    MediaClass.GIF: "BUZZ_MEDIA_MAX_GIF_BYTES",
    MediaClass.VIDEO: "BUZZ_MEDIA_MAX_VIDEO_BYTES",
    MediaClass.AUDIO: "BUZZ_MEDIA_MAX_AUDIO_BYTES",
    MediaClass.FILE: "BUZZ_MEDIA_MAX_FILE_BYTES",
}
STORES = ("auto", "files", "db")


@dataclass(frozen=True)
class MediaSettings:
    """What the relay's media routes obey. `base_url` None = derived from RELAY_URL."""

    enabled: bool = True
    base_url: str | None = None
    store: str = "auto"
    shared_dir: bool = False
    quota_bytes: int = QUOTA_DEFAULT_BYTES  # 0 = unlimited
    max_total_bytes: int = 0  # 0 = unlimited
    caps: Mapping[MediaClass, int] = field(default_factory=lambda: dict(DEFAULT_CAPS))
    uploads_per_replica: int = UPLOADS_PER_REPLICA
    uploads_per_pubkey: int = UPLOADS_PER_PUBKEY
    uploads_per_minute: int = UPLOADS_PER_MINUTE
    upload_idle_timeout_s: float = UPLOAD_IDLE_TIMEOUT_S

    @property
    def max_cap(self) -> int:
        """MEDIA_MAX_BYTES: the pre-body cap when the declared type has no class."""
        return max(self.caps.values())

    def validate(self) -> None:
        if self.store not in STORES:
            raise ValueError(f"BUZZ_MEDIA_STORE must be auto, files or db, got {self.store!r}")
        if self.base_url is not None:
            check_base_url(self.base_url)
        if self.caps[MediaClass.GIF] > self.caps[MediaClass.IMAGE]:
            raise ValueError("BUZZ_MEDIA_MAX_GIF_BYTES must not exceed BUZZ_MEDIA_MAX_IMAGE_BYTES")


def check_base_url(url: str) -> None:
    """media.md §16: http(s), ends with `/media`, not with `/`. Raises ValueError."""
    if not url.startswith(("http://", "https://")):
        raise ValueError(f"BUZZ_MEDIA_BASE_URL must be an http:// or https:// URL, got {url!r}")
    if url.endswith("/") or not url.endswith("/media"):
        raise ValueError(f"BUZZ_MEDIA_BASE_URL must end with /media (and no /), got {url!r}")


def _bool(name: str, value: str) -> bool:
    v = value.strip().lower()
    if v in ("1", "true", "yes", "on"):
        return True
    if v in ("0", "false", "no", "off", ""):
        return False
    raise ValueError(f"{name} must be true or false, got {value!r}")


def _size(name: str, value: str, *, zero_ok: bool) -> int:
    try:
        n = int(value)
    except ValueError:
        raise ValueError(f"{name} must be an integer number of bytes, got {value!r}") from None
    if n < 0 or (n == 0 and not zero_ok):
        raise ValueError(f"{name} must be {'non-negative' if zero_ok else 'positive'}, got {n}")
    return n


def settings_from_env(env: Mapping[str, str]) -> MediaSettings:
    """The BUZZ_MEDIA_* variables of media.md §16 (absent = default). Raises ValueError."""
    kw: dict[str, object] = {}
    if (v := env.get("BUZZ_MEDIA_ENABLED")) is not None:
        kw["enabled"] = _bool("BUZZ_MEDIA_ENABLED", v)
    if v := env.get("BUZZ_MEDIA_BASE_URL"):
        kw["base_url"] = v
    if v := env.get("BUZZ_MEDIA_STORE"):
        kw["store"] = v.strip().lower()
    if (v := env.get("BUZZ_MEDIA_SHARED_DIR")) is not None:
        kw["shared_dir"] = _bool("BUZZ_MEDIA_SHARED_DIR", v)
    if (v := env.get("BUZZ_MEDIA_QUOTA_BYTES")) is not None:
        kw["quota_bytes"] = _size("BUZZ_MEDIA_QUOTA_BYTES", v, zero_ok=True)
    if (v := env.get("BUZZ_MEDIA_MAX_TOTAL_BYTES")) is not None:
        kw["max_total_bytes"] = _size("BUZZ_MEDIA_MAX_TOTAL_BYTES", v, zero_ok=True)
    caps = dict(DEFAULT_CAPS)
    for cls, var in CAP_VARIABLES.items():
        if (v := env.get(var)) is not None:
            caps[cls] = _size(var, v, zero_ok=False)
    kw["caps"] = caps
    settings = MediaSettings(**kw)  # type: ignore[arg-type]
    settings.validate()
    return settings
