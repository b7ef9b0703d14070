"""Speech to text for the client's own microphone (huddle.md §10.4, guard of §10.5 item 4).

Shapes: capture PCM is 48 kHz mono (float32 in [−1, 1] or int16); the recogniser gets float32 at
16 kHz. `SpeechToText` is the synchronous pipeline (resample → 20 ms VAD frames → echo gate →
utterances → text); `SttWorker` runs it on a thread behind the bounded capture queue.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

import numpy as np

from buzz.core.huddle_wire import STT_QUEUE_DEPTH, STT_SAMPLE_RATE, VAD_FRAME, VAD_THRESHOLD
from buzz.voice.echo import EchoGate
from buzz.voice.models import check_model_bundle
from buzz.voice.pcm import SAMPLE_RATE, as_float, as_int16
from buzz.voice.vad import FRAME_MS, UtteranceSegmenter, Vad, WebRtcVad

log = logging.getLogger(__name__)

KEY_MATERIAL_MARKERS = ("nsec1", "ncryptsec1")


def publishable_transcript(text: str) -> str | None:
    """The trimmed transcript, or None when empty or carrying key material (§10.4, §10.5 item 4).

    `nsec1` / `ncryptsec1` are matched case-insensitively; a refusal is logged without the text.
    """
    trimmed = text.strip()
    if not trimmed:
        return None
    lowered = trimmed.lower()
    if any(marker in lowered for marker in KEY_MATERIAL_MARKERS):
        log.warning("transcript refused by the egress guard: it looks like key material")
        return None
    return trimmed


class Recognizer(Protocol):
    """Pluggable recogniser: float32 16 kHz mono utterance → text ("" when nothing was heard)."""

    def transcribe(self, pcm_16k: np.ndarray) -> str: ...


class ContextualRecognizer(Recognizer, Protocol):
    """A recogniser that can be told the room's channel name and people (whisper)."""

    def set_context(self, names: Sequence[str] = (), channel: str | None = None) -> None: ...


POCKETSPHINX_FILES = (
    "en-us/feat.params",
    "en-us/mdef",
    "en-us/means",
    "en-us/noisedict",
    "en-us/sendump",
    "en-us/transition_matrices",
    "en-us/variances",
    "en-us.lm.bin",
    "cmudict-en-us.dict",
)


class PocketSphinxRecognizer:
    """Offline default: PocketSphinx ≥ 5 with the US-English model its wheel ships.

    `model_dir` holds `en-us/`, `en-us.lm.bin` and `cmudict-en-us.dict` (default: the wheel's).
    Raises IncompleteModelBundle naming a missing file. Not thread-safe: one per worker.
    """

    def __init__(self, model_dir: str | Path | None = None) -> None:
        import pocketsphinx

        default = Path(pocketsphinx.get_model_path()) / "en-us"
        root = check_model_bundle(model_dir or default, POCKETSPHINX_FILES)
        self._decoder = pocketsphinx.Decoder(
            hmm=str(root / "en-us"),
            lm=str(root / "en-us.lm.bin"),
            dict=str(root / "cmudict-en-us.dict"),
            samprate=STT_SAMPLE_RATE,
            loglevel="FATAL",
        )

    def transcribe(self, pcm_16k: np.ndarray) -> str:
        self._decoder.start_utt()
        self._decoder.process_raw(as_int16(pcm_16k).tobytes(), full_utt=True)
        self._decoder.end_utt()
        hyp = self._decoder.hyp()
        return hyp.hypstr if hyp is not None else ""


class Resampler:
    """Streaming anti-aliased resampler (soxr), 48 kHz → 16 kHz mono float32 by default."""

    def __init__(self, in_rate: int = SAMPLE_RATE, out_rate: int = STT_SAMPLE_RATE) -> None:
        import soxr

        self._stream = soxr.ResampleStream(in_rate, out_rate, 1, dtype="float32", quality="HQ")

    def process(self, pcm: np.ndarray, *, last: bool = False) -> np.ndarray:
        return self._stream.resample_chunk(as_float(pcm).reshape(-1), last=last)


@dataclass(slots=True)
class SttResult:
    """What one `feed` produced: finished utterances (float32 16 kHz) and a local barge-in."""

    utterances: list[np.ndarray] = field(default_factory=list)
    cancel_tts: bool = False


class SpeechToText:
    """Capture PCM → utterances, synchronously; no threads (§10.4, gated by §10.7)."""

    def __init__(
        self,
        *,
        vad: Vad | None = None,
        push_to_talk: bool = False,
        gate: EchoGate | None = None,
    ) -> None:
        self.vad = vad or WebRtcVad()
        self.segmenter = UtteranceSegmenter(push_to_talk=push_to_talk)
        self.gate = gate or EchoGate(push_to_talk=push_to_talk)
        self.key_held = True
        self._resampler = Resampler()
        self._pending = np.zeros(0, np.float32)

    def feed(self, pcm_48k: np.ndarray, now_ms: float) -> SttResult:
        """Feed captured 48 kHz audio that started at `now_ms`; returns what it completed."""
        return self._run_frames(self._resampler.process(pcm_48k), now_ms)

    def finish(self, now_ms: float) -> SttResult:
        """End of input (leave, end of a WAV): drain the resampler and flush a pending utterance."""
        result = self._run_frames(self._resampler.process(np.zeros(0, np.float32), last=True), now_ms)
        utterance = self.segmenter.release_key()
        if utterance is not None:
            result.utterances.append(utterance)
        return result

    def release_key(self) -> np.ndarray | None:
        """Push-to-talk key released: the hold's utterance, if any."""
        self.key_held = False
        return self.segmenter.release_key()

    def _run_frames(self, pcm_16k: np.ndarray, now_ms: float) -> SttResult:
        result = SttResult()
        pending = np.concatenate([self._pending, pcm_16k])
        count = len(pending) // VAD_FRAME
        for i in range(count):
            frame = pending[i * VAD_FRAME : (i + 1) * VAD_FRAME]
            speech = self.vad.speech_probability(frame) > VAD_THRESHOLD
            verdict = self.gate.mic_frame(speech, now_ms + i * FRAME_MS)
            result.cancel_tts |= verdict.cancel_tts
            if verdict.reset_utterance:
                self.segmenter.reset()
            if verdict.feed:
                utterance = self.segmenter.frame(frame, speech, self.key_held)
                if utterance is not None:
                    result.utterances.append(utterance)
        self._pending = pending[count * VAD_FRAME :]
        return result


class SttWorker:
    """Runs `SpeechToText` and a recogniser on a thread behind a bounded queue (§10.4).

    `submit` never blocks: with the queue full (50 batches) the new audio is dropped and counted.
    `on_text` receives each publishable transcript; `on_cancel_tts` a local barge-in. Both are
    called on the worker thread.
    """

    def __init__(
        self,
        pipeline: SpeechToText,
        recognizer_factory: Callable[[], Recognizer],
        on_text: Callable[[str], None],
        on_cancel_tts: Callable[[], None] = lambda: None,
        depth: int = STT_QUEUE_DEPTH,
    ) -> None:
        self.pipeline = pipeline
        self.dropped = 0
        self._factory = recognizer_factory
        self._on_text = on_text
        self._on_cancel = on_cancel_tts
        self._queue: queue.Queue[tuple[np.ndarray, float] | None] = queue.Queue(maxsize=depth)
        self._thread = threading.Thread(target=self._run, name="buzz-stt", daemon=True)
        self._context_lock = threading.Lock()
        self._context: tuple[tuple[str, ...], str | None] | None = None
        self._recognizer: Recognizer | None = None

    def set_context(self, names: Sequence[str], channel: str | None) -> None:
        """Pass the room's people and channel name to the recogniser, if it takes them
        (`ContextualRecognizer`); kept for a recogniser that is not built yet. Any thread."""
        with self._context_lock:
            self._context = (tuple(names), channel)
            recognizer = self._recognizer
        if recognizer is not None:
            self._apply_context(recognizer)

    def _apply_context(self, recognizer: Recognizer) -> None:
        with self._context_lock:
            context = self._context
        if context is not None and hasattr(recognizer, "set_context"):
            recognizer.set_context(*context)

    def start(self) -> None:
        self._thread.start()

    def submit(self, pcm_48k: np.ndarray, now_ms: float) -> bool:
        """Hand one capture batch to the worker; False (and counted) when the queue is full."""
        try:
            self._queue.put_nowait((pcm_48k, now_ms))
        except queue.Full:
            self.dropped += 1
            return False
        return True

    def stop(self, timeout: float | None = None) -> None:
        """Process the queued audio, flush a pending utterance, then end the thread (blocking)."""
        self._queue.put(None)
        self._thread.join(timeout)

    def _run(self) -> None:
        recognizer = self._factory()
        with self._context_lock:
            self._recognizer = recognizer
        self._apply_context(recognizer)
        now_ms = 0.0
        while (item := self._queue.get()) is not None:
            pcm, now_ms = item
            self._handle(recognizer, self.pipeline.feed(pcm, now_ms))
        self._handle(recognizer, self.pipeline.finish(now_ms))

    def _handle(self, recognizer: Recognizer, result: SttResult) -> None:
        if result.cancel_tts:
            self._on_cancel()
        for utterance in result.utterances:
            text = publishable_transcript(recognizer.transcribe(utterance))
            if text is not None:
                self._on_text(text)
