"""Shared, session-scoped voice engines for huddle tests (each loads its model once)."""

from __future__ import annotations

import pytest

from buzz.voice.espeak import EspeakNgEngine
from buzz.voice.whisper import WhisperRecognizer


@pytest.fixture(scope="session")
def espeak() -> EspeakNgEngine:
    return EspeakNgEngine()


@pytest.fixture(scope="session")
def whisper() -> WhisperRecognizer:
    """The default recogniser; the model is loaded once per process and shared."""
    return WhisperRecognizer()
