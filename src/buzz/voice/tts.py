"""Text to speech of agent replies: text preparation, chunking and shaping (huddle.md §10.6).

Shapes: engines return float32 mono at 24 000 Hz in [−1, 1]. A rendered chunk is 480 samples
(20 ms) of leading silence, its sentences separated by 2400 samples (100 ms) of silence, and a
192-sample (8 ms) linear fade-out at the end.
"""

from __future__ import annotations

import collections
import re
from collections.abc import Iterator
from typing import Generic, Protocol, TypeVar

import numpy as np

from buzz.core.huddle_wire import (
    TTS_FADE_OUT_MS,
    TTS_LEAD_IN_MS,
    TTS_MAX_CHUNK_CHARS,
    TTS_QUEUE_DEPTH,
    TTS_SAMPLE_RATE,
    TTS_SENTENCE_GAP_MS,
)

LEAD_IN_SAMPLES = TTS_SAMPLE_RATE * TTS_LEAD_IN_MS // 1000  # 480
FADE_OUT_SAMPLES = TTS_SAMPLE_RATE * TTS_FADE_OUT_MS // 1000  # 192
SENTENCE_GAP_SAMPLES = TTS_SAMPLE_RATE * TTS_SENTENCE_GAP_MS // 1000  # 2400
_TERMINATORS = ".!?;:,"
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


class TtsEngine(Protocol):
    """Pluggable engine: text → float32 mono PCM at 24 000 Hz."""

    def synthesize(self, text: str) -> np.ndarray: ...


def prepare_text(text: str) -> str:
    """Trim, collapse whitespace, capitalise the first letter, end with `.` unless it ends in
    one of `.!?;:,`. Empty text stays empty (and yields no audio)."""
    text = " ".join(text.split())
    if not text:
        return ""
    text = text[0].upper() + text[1:]
    return text if text[-1] in _TERMINATORS else text + "."


def _split_long(sentence: str, limit: int) -> list[str]:
    """Cut a sentence longer than `limit` at word boundaries (a longer single word is cut hard)."""
    parts: list[str] = []
    current = ""
    for word in sentence.split(" "):
        while len(word) > limit:
            if current:
                parts.append(current)
                current = ""
            parts.append(word[:limit])
            word = word[limit:]
        candidate = f"{current} {word}" if current else word
        if len(candidate) <= limit:
            current = candidate
        else:
            parts.append(current)
            current = word
    if current:
        parts.append(current)
    return parts


def chunk_sentences(text: str, limit: int = TTS_MAX_CHUNK_CHARS) -> list[list[str]]:
    """Split prepared text into sentences and pack them into chunks of at most `limit` chars.

    Each chunk is its list of sentences; the characters of a chunk count one space between them.
    """
    sentences = [part for s in _SENTENCE_END.split(text) if s for part in _split_long(s, limit)]
    chunks: list[list[str]] = []
    size = 0
    for sentence in sentences:
        if chunks and size + 1 + len(sentence) <= limit:
            chunks[-1].append(sentence)
            size += 1 + len(sentence)
        else:
            chunks.append([sentence])
            size = len(sentence)
    return chunks


def shape_chunk(sentences: list[np.ndarray]) -> np.ndarray:
    """Lead-in silence, sentences joined by 100 ms gaps, 8 ms fade-out (float32, 24 kHz)."""
    gap = np.zeros(SENTENCE_GAP_SAMPLES, np.float32)
    parts: list[np.ndarray] = [np.zeros(LEAD_IN_SAMPLES, np.float32)]
    for i, pcm in enumerate(sentences):
        if i:
            parts.append(gap)
        parts.append(np.asarray(pcm, np.float32))
    chunk = np.concatenate(parts)
    fade = min(FADE_OUT_SAMPLES, len(chunk))
    chunk[len(chunk) - fade :] *= np.linspace(1.0, 0.0, fade, dtype=np.float32)
    return chunk


def render_reply(engine: TtsEngine, text: str) -> Iterator[np.ndarray]:
    """The shaped chunks of one reply, synthesised lazily: the next chunk is made only when the
    player asks for it, so synthesis overlaps playback of the current one."""
    for sentences in chunk_sentences(prepare_text(text)):
        yield shape_chunk([engine.synthesize(s) for s in sentences])


T = TypeVar("T")


class ReplyQueue(Generic[T]):
    """Agent replies waiting to be spoken: at most 8; `offer` drops a reply while it is full."""

    def __init__(self, depth: int = TTS_QUEUE_DEPTH) -> None:
        self.depth = depth
        self.dropped = 0
        self._items: collections.deque[T] = collections.deque()

    def __len__(self) -> int:
        return len(self._items)

    def offer(self, item: T) -> bool:
        if len(self._items) >= self.depth:
            self.dropped += 1
            return False
        self._items.append(item)
        return True

    def take(self) -> T | None:
        return self._items.popleft() if self._items else None

    def clear(self) -> None:
        self._items.clear()
