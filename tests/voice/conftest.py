"""Shared, session-scoped voice engines (each loads a model once)."""

from __future__ import annotations

import pytest

from buzz.voice.espeak import EspeakNgEngine
from buzz.voice.stt import PocketSphinxRecognizer
from buzz.voice.whisper import WhisperRecognizer


@pytest.fixture(scope="session")
def espeak() -> EspeakNgEngine:
    return EspeakNgEngine()


@pytest.fixture(scope="session")
def sphinx() -> PocketSphinxRecognizer:
    return PocketSphinxRecognizer()


@pytest.fixture(scope="session")
def whisper() -> WhisperRecognizer:
    """The default recogniser; the model is loaded once per process and shared."""
    return WhisperRecognizer()
