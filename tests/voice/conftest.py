"""Shared, session-scoped voice engines (each loads a model once)."""

from __future__ import annotations

import pytest

from buzz.voice.espeak import EspeakNgEngine
from buzz.voice.stt import PocketSphinxRecognizer


@pytest.fixture(scope="session")
def espeak() -> EspeakNgEngine:
    return EspeakNgEngine()


@pytest.fixture(scope="session")
def sphinx() -> PocketSphinxRecognizer:
    return PocketSphinxRecognizer()
