"""PCM sample conversions shared by the pipeline. Float PCM is float32 in [−1, 1]; int16 is
full scale ±32767 (the conversion clips)."""

from __future__ import annotations

import numpy as np

SAMPLE_RATE = 48000  # Hz: capture, Opus and playout rate of a huddle (§10.2)


def as_float(pcm: np.ndarray) -> np.ndarray:
    """Flat float32: int16 is divided by 32768, floats pass through."""
    arr = np.asarray(pcm).reshape(-1)
    if arr.dtype == np.int16:
        return arr.astype(np.float32) / 32768.0
    return arr.astype(np.float32, copy=False)


def as_int16(pcm: np.ndarray) -> np.ndarray:
    """Flat int16 (e.g. from PyAV's float32 planar decoder output): floats are scaled by 32767
    and clipped; other integer types are clipped."""
    arr = np.asarray(pcm).reshape(-1)
    if arr.dtype == np.int16:
        return arr
    if np.issubdtype(arr.dtype, np.floating):
        return np.clip(np.rint(arr * 32767.0), -32768, 32767).astype(np.int16)
    return np.clip(arr, -32768, 32767).astype(np.int16)


def pad_to(pcm: np.ndarray, size: int) -> np.ndarray:
    """The first `size` samples, zero-padded when shorter (the short last frame, §10.2)."""
    arr = np.asarray(pcm).reshape(-1)
    if arr.size >= size:
        return arr[:size]
    return np.concatenate([arr, np.zeros(size - arr.size, arr.dtype)])
