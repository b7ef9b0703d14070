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


@pytest.fixture(autouse=True)
def _own_state_dir(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """`huddle join` keeps a seat file under $XDG_STATE_HOME; each test gets its own (the CLI
    subprocesses inherit the variable)."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path_factory.mktemp("state")))
