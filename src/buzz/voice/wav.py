"""WAV files as the microphone and as per-peer output (stdlib `wave`, 16-bit PCM only).

Shapes: PCM is int16 mono; `read_wav_48k` mixes channels down and resamples to 48 kHz, the
huddle capture rate (huddle.md §10.2).
"""

from __future__ import annotations

import wave
from collections.abc import Iterator
from pathlib import Path
from types import TracebackType

import numpy as np

from buzz.core.huddle_wire import FRAME_SAMPLES
from buzz.voice.pcm import SAMPLE_RATE, as_float, as_int16, pad_to


def read_wav(path: str | Path) -> tuple[np.ndarray, int]:
    """(int16 mono samples, sample rate in Hz). Channels are averaged. Raises ValueError unless
    the file is 16-bit PCM."""
    with wave.open(str(path), "rb") as wav:
        if wav.getsampwidth() != 2:
            raise ValueError(f"{path}: only 16-bit PCM WAV is supported")
        channels, rate = wav.getnchannels(), wav.getframerate()
        data = np.frombuffer(wav.readframes(wav.getnframes()), dtype="<i2")
    if channels > 1:
        data = data.reshape(-1, channels).mean(axis=1).astype(np.int16)
    return data.astype(np.int16), rate


def resample(pcm: np.ndarray, in_rate: int, out_rate: int) -> np.ndarray:
    """Anti-aliased resampling (soxr) of mono PCM; returns int16."""
    if in_rate == out_rate:
        return as_int16(pcm)
    import soxr

    return as_int16(soxr.resample(as_float(pcm), in_rate, out_rate))


def read_wav_48k(path: str | Path) -> np.ndarray:
    """A WAV file as 48 kHz int16 mono microphone input."""
    pcm, rate = read_wav(path)
    return resample(pcm, rate, SAMPLE_RATE)


def iter_frames(pcm: np.ndarray, size: int = FRAME_SAMPLES) -> Iterator[np.ndarray]:
    """Consecutive frames of `size` samples; the last short one is zero-padded (§10.2)."""
    for start in range(0, len(pcm), size):
        yield pad_to(pcm[start : start + size], size)


def write_wav(path: str | Path, pcm: np.ndarray, rate: int) -> None:
    """Write mono PCM (int16, or float in [−1, 1]) as a 16-bit WAV."""
    with WavWriter(path, rate) as out:
        out.write(pcm)


class WavWriter:
    """An open 16-bit mono WAV that grows as samples are written (one per remote peer)."""

    def __init__(self, path: str | Path, rate: int = SAMPLE_RATE) -> None:
        self.path = Path(path)
        self.samples = 0
        self._wav = wave.open(str(path), "wb")  # noqa: SIM115 - closed by close() / __exit__
        self._wav.setnchannels(1)
        self._wav.setsampwidth(2)
        self._wav.setframerate(rate)

    def write(self, pcm: np.ndarray) -> None:
        data = as_int16(pcm).astype("<i2", copy=False)
        self._wav.writeframes(data.tobytes())
        self.samples += len(data)

    def close(self) -> None:
        self._wav.close()

    def __enter__(self) -> WavWriter:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


class PeerWavs:
    """One WavWriter per remote `peer_index`, created on first audio, at `directory/peer-<i>.wav`."""

    def __init__(self, directory: str | Path, rate: int = SAMPLE_RATE) -> None:
        self.directory = Path(directory)
        self.rate = rate
        self.writers: dict[int, WavWriter] = {}

    def write(self, buffers: dict[int, np.ndarray]) -> None:
        """Append one playout tick's per-peer buffers (e.g. `Receiver.tick(now)`)."""
        for index, pcm in buffers.items():
            self.append(index, pcm)

    def append(self, index: int, pcm: np.ndarray) -> None:
        """Append samples to peer `index`'s WAV (e.g. from `recording.PeerRecorder`)."""
        writer = self.writers.get(index)
        if writer is None:
            writer = self.writers[index] = WavWriter(self.directory / f"peer-{index}.wav", self.rate)
        writer.write(pcm)

    def close(self) -> None:
        for writer in self.writers.values():
            writer.close()
