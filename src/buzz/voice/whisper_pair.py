"""The default speech recogniser: two Whisper models, the more confident one's text wins.

tiny.en and base make different mistakes on the same utterance, and each model knows how sure
it is: the mean log-probability per token of its chosen beam. Taking the text of the more
confident model is a standard system combination (hypothesis selection); on bench/stt.py's 132
utterances it gives WER 0.138 against tiny.en's 0.184 and base's 0.166 alone (decision 97).
Both models decode the utterance at once (the second on a worker thread; CTranslate2 releases
the GIL), so the latency is about base's alone.
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from buzz.voice.whisper import WhisperRecognizer
from buzz.voice.whisper_base import SPLIT_BUNDLE_NAME


class WhisperPair:
    """`transcribe(float32 16 kHz mono) -> str`: every recogniser transcribes; the text with
    the highest mean token log-probability is returned (the first recogniser wins ties; "" when
    none heard speech). `set_context` goes to every recogniser. Thread-safe like its parts."""

    def __init__(self, recognizers: Sequence[WhisperRecognizer]) -> None:
        if not recognizers:
            raise ValueError("WhisperPair needs at least one recogniser")
        self.recognizers = tuple(recognizers)
        self.language = self.recognizers[0].language
        self._pool = ThreadPoolExecutor(max(1, len(self.recognizers) - 1), "whisper-pair")

    def set_context(self, names: Sequence[str] = (), channel: str | None = None) -> None:
        for recognizer in self.recognizers:
            recognizer.set_context(names, channel)

    def transcribe_scored(self, pcm_16k: np.ndarray) -> tuple[str, float]:
        first, *rest = self.recognizers
        pending = [self._pool.submit(r.transcribe_scored, pcm_16k) for r in rest]
        results = [first.transcribe_scored(pcm_16k), *(f.result() for f in pending)]
        return max(results, key=lambda result: result[1])

    def transcribe(self, pcm_16k: np.ndarray) -> str:
        return self.transcribe_scored(pcm_16k)[0]


def default_pair() -> WhisperPair:
    """The packaged tiny.en and the packaged base (English forced), both told the room's
    context. English only (`voice/engines.py` refuses another language before loading)."""
    return WhisperPair((WhisperRecognizer(None, "en"), WhisperRecognizer(SPLIT_BUNDLE_NAME, "en")))
