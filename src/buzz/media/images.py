"""Image checks, dimensions, thumbnails and blurhash with Pillow (media.md §6).

`inspect(path)` runs in a worker thread: it reads the dimensions from the header and refuses
more than MAX_IMAGE_PIXELS before any pixel is decoded (Pillow's own bomb check is set to the
same bound and its warning raised as an error), decodes the first frame fully (a JPEG at the
reduced scale its DCT allows, `Image.draft`: the whole stream is still decoded), applies the
EXIF orientation, and makes the thumbnail: flattened onto white, fit into 320 × 320 (never
enlarged), a baseline JPEG of quality 80 with no metadata. `ImageWorker` runs at most
IMAGE_WORKERS of them at once (each may hold a 25-megapixel frame) with a 30 s limit.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import threading
import warnings
from dataclasses import dataclass
from pathlib import Path

import blurhash
from PIL import Image, ImageOps

from buzz.media.limits import (
    BLURHASH_COMPONENTS,
    BLURHASH_SOURCE_SIDE,
    IMAGE_PROCESS_TIMEOUT_S,
    IMAGE_WORKERS,
    MAX_IMAGE_FRAMES,
    MAX_IMAGE_PIXELS,
    THUMB_JPEG_QUALITY,
    THUMB_MAX_SIDE,
)

Image.MAX_IMAGE_PIXELS = MAX_IMAGE_PIXELS
# Process-wide on purpose: `warnings.catch_warnings` is not thread-safe, and a bomb warning
# must be an error on every thread that opens an image.
warnings.simplefilter("error", Image.DecompressionBombWarning)

TOO_LARGE = f"image dimensions exceed {MAX_IMAGE_PIXELS} pixels"
INVALID = "invalid image"
TIMED_OUT = "image processing timed out"
_SWAPPED_ORIENTATIONS = frozenset({5, 6, 7, 8})
_EXIF_ORIENTATION = 0x0112


class ImageRefused(ValueError):
    """An image the relay refuses (400 with this reason)."""


@dataclass(frozen=True, slots=True)
class ImageFacts:
    """Dimensions after EXIF orientation, the blurhash, and the thumbnail's JPEG bytes."""

    width: int
    height: int
    blurhash: str
    thumb: bytes


def _oriented_size(im: Image.Image) -> tuple[int, int]:
    width, height = im.size
    try:
        orientation = im.getexif().get(_EXIF_ORIENTATION)
    except Exception:  # a broken EXIF block orients nothing
        orientation = None
    return (height, width) if orientation in _SWAPPED_ORIENTATIONS else (width, height)


def _blurhash(thumb: Image.Image) -> str:
    small = thumb.copy()
    small.thumbnail((BLURHASH_SOURCE_SIDE, BLURHASH_SOURCE_SIDE))
    raw = small.tobytes()  # RGB, row by row
    w, h = small.size
    rows = [[list(raw[(y * w + x) * 3 : (y * w + x) * 3 + 3]) for x in range(w)] for y in range(h)]
    x, y = BLURHASH_COMPONENTS
    return str(blurhash.encode(rows, components_x=x, components_y=y))


def _flatten(frame: Image.Image) -> Image.Image:
    if frame.mode in ("RGBA", "LA", "P", "PA") or "transparency" in frame.info:
        rgba = frame.convert("RGBA")
        white = Image.new("RGB", rgba.size, (255, 255, 255))
        white.paste(rgba, mask=rgba.getchannel("A"))
        return white
    return frame.convert("RGB")


def inspect(path: Path) -> ImageFacts:
    """media.md §6 for the image file at `path`. Raises ImageRefused."""
    try:
        im = Image.open(path)
    except (Image.DecompressionBombError, Image.DecompressionBombWarning):
        raise ImageRefused(TOO_LARGE) from None
    except Exception:
        raise ImageRefused(INVALID) from None
    with im:
        width, height = im.size
        if width * height > MAX_IMAGE_PIXELS:
            raise ImageRefused(TOO_LARGE)
        try:
            if getattr(im, "n_frames", 1) > MAX_IMAGE_FRAMES:
                raise ImageRefused(INVALID)
            oriented = _oriented_size(im)
            if im.format == "JPEG":
                im.draft("RGB", (THUMB_MAX_SIDE, THUMB_MAX_SIDE))
            im.seek(0)
            im.load()
            frame = ImageOps.exif_transpose(im) or im
            thumb = _flatten(frame)
            thumb.thumbnail((THUMB_MAX_SIDE, THUMB_MAX_SIDE), Image.Resampling.LANCZOS)
            out = io.BytesIO()
            thumb.save(out, "JPEG", quality=THUMB_JPEG_QUALITY, progressive=False, optimize=False)
            hash_text = _blurhash(thumb)
        except ImageRefused:
            raise
        except (Image.DecompressionBombError, Image.DecompressionBombWarning):
            raise ImageRefused(TOO_LARGE) from None
        except Exception:
            raise ImageRefused(INVALID) from None
    return ImageFacts(oriented[0], oriented[1], hash_text, out.getvalue())


class ImageWorker:
    """`inspect` off the event loop: at most `workers` at once, each within `timeout_s`.

    A timed-out image keeps its slot until its thread ends (Pillow cannot be interrupted), so
    memory stays bounded by `workers` decodes; the upload is answered at once."""

    def __init__(self, workers: int = IMAGE_WORKERS, timeout_s: float = IMAGE_PROCESS_TIMEOUT_S) -> None:
        self._workers = workers
        self._slots: asyncio.Semaphore | None = None
        self._timeout_s = timeout_s

    async def inspect(self, path: Path) -> ImageFacts:
        loop = asyncio.get_running_loop()
        if self._slots is None:
            self._slots = asyncio.Semaphore(self._workers)
        slots = self._slots
        await slots.acquire()
        done: asyncio.Future[ImageFacts] = loop.create_future()

        def work() -> None:
            try:
                result: ImageFacts | BaseException = inspect(path)
            except BaseException as exc:
                result = exc
            with contextlib.suppress(RuntimeError):  # the loop closed meanwhile (shutdown)
                loop.call_soon_threadsafe(_settle, done, result, slots)

        threading.Thread(target=work, name="media-image", daemon=True).start()
        try:
            return await asyncio.wait_for(asyncio.shield(done), self._timeout_s)
        except TimeoutError:
            done.add_done_callback(lambda f: f.cancelled() or f.exception())  # retrieved: no warning
            raise ImageRefused(TIMED_OUT) from None


def _settle(
    future: asyncio.Future[ImageFacts], result: ImageFacts | BaseException, slots: asyncio.Semaphore
) -> None:
    slots.release()
    if future.done():
        return
    if isinstance(result, BaseException):
        future.set_exception(result)
    else:
        future.set_result(result)
