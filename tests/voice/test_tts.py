"""TTS text preparation, chunking, shaping, reply queue and the eSpeak NG engine (huddle.md §10.6)."""

from __future__ import annotations

import numpy as np
import pytest

from buzz.voice.espeak import EspeakNgEngine
from buzz.voice.tts import (
    FADE_OUT_SAMPLES,
    LEAD_IN_SAMPLES,
    SENTENCE_GAP_SAMPLES,
    ReplyQueue,
    chunk_sentences,
    prepare_text,
    render_reply,
    shape_chunk,
)


@pytest.mark.parametrize(
    ("text", "prepared"),
    [
        ("  hello   there\n world ", "Hello there world."),
        ("done!", "Done!"),
        ("what?", "What?"),
        ("a list:", "A list:"),
        ("wait,", "Wait,"),
        ("one; two;", "One; two;"),
        ("", ""),
        (" \t\n", ""),
        ("élan vital", "Élan vital."),
    ],
)
def test_prepare_text(text: str, prepared: str) -> None:
    assert prepare_text(text) == prepared


def test_chunks_pack_sentences_up_to_200_characters() -> None:
    text = prepare_text(" ".join(f"Sentence number {i} is here." for i in range(20)))
    chunks = chunk_sentences(text)
    assert all(len(" ".join(c)) <= 200 for c in chunks)
    assert " ".join(s for c in chunks for s in c) == text
    assert len(chunks) > 1 and all(len(c) > 1 for c in chunks[:-1])


def test_long_sentence_is_cut_at_word_boundaries() -> None:
    text = prepare_text("word " * 100)
    chunks = chunk_sentences(text)
    assert all(len(" ".join(c)) <= 200 for c in chunks)
    assert " ".join(s for c in chunks for s in c).split() == text.split()
    assert chunk_sentences(prepare_text("x" * 450)) == [["X" + "x" * 199], ["x" * 200], ["x" * 50 + "."]]


class FakeEngine:
    def __init__(self) -> None:
        self.calls: list[str] = []

    def synthesize(self, text: str) -> np.ndarray:
        self.calls.append(text)
        return np.full(1000, 0.5, np.float32)


def test_shape_chunk_lead_in_gap_and_fade() -> None:
    chunk = shape_chunk([np.full(1000, 0.5, np.float32), np.full(1000, 0.5, np.float32)])
    assert len(chunk) == LEAD_IN_SAMPLES + 1000 + SENTENCE_GAP_SAMPLES + 1000
    assert not chunk[:LEAD_IN_SAMPLES].any()
    assert not chunk[LEAD_IN_SAMPLES + 1000 : LEAD_IN_SAMPLES + 1000 + SENTENCE_GAP_SAMPLES].any()
    tail = chunk[-FADE_OUT_SAMPLES:]
    assert tail[-1] == 0.0 and np.all(np.diff(tail) <= 0) and chunk[-FADE_OUT_SAMPLES - 1] == 0.5


def test_render_reply_is_lazy_and_empty_text_is_silent() -> None:
    engine = FakeEngine()
    chunks = render_reply(engine, "first. " + "second sentence here. " * 12)
    assert engine.calls == []
    next(chunks)
    made = len(engine.calls)
    assert 0 < made < 13
    assert list(render_reply(engine, "   ")) == []


def test_reply_queue_holds_eight() -> None:
    queue = ReplyQueue()
    assert [queue.offer(str(i)) for i in range(10)] == [True] * 8 + [False] * 2
    assert queue.dropped == 2 and queue.take() == "0" and len(queue) == 7


def test_espeak_engine_speaks_at_24_khz(espeak: EspeakNgEngine) -> None:
    assert espeak.native_rate == 22050
    pcm = espeak.synthesize("Hello there.")
    assert pcm.dtype == np.float32
    assert 0.4 < len(pcm) / 24000 < 3.0
    assert 0.01 < float(np.sqrt(np.mean(pcm**2))) < 1.0
    assert espeak.synthesize(" ").size == 0
