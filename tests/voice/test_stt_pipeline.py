"""Utterance segmentation, echo gate, barge-in, egress guard, STT worker (huddle.md §10.4–§10.7)."""

from __future__ import annotations

import shutil
import threading
from pathlib import Path

import numpy as np
import pytest

from buzz.voice.echo import EchoGate, MicVerdict, RemoteFloor
from buzz.voice.models import IncompleteModelBundle
from buzz.voice.stt import (
    POCKETSPHINX_FILES,
    PocketSphinxRecognizer,
    SpeechToText,
    SttWorker,
    publishable_transcript,
)
from buzz.voice.vad import UtteranceSegmenter

FRAME = np.zeros(320, np.float32)


def run(segmenter: UtteranceSegmenter, pattern: str, key_held: bool = True) -> list[int]:
    """Feed frames per character ('S' speech, '.' silence); return flushed lengths in frames."""
    out = []
    for ch in pattern:
        utterance = segmenter.frame(FRAME, ch == "S", key_held)
        if utterance is not None:
            out.append(len(utterance) // 320)
    return out


@pytest.mark.parametrize(
    ("pattern", "flushed"),
    [
        ("....", []),
        ("SSS" + "." * 14, []),  # 280 ms of silence: still collecting
        ("SSS" + "." * 15, [18]),  # 300 ms: flush speech plus the silence after it
        ("SS" + "." * 10 + "SS" + "." * 15, [29]),  # a short pause stays in one utterance
    ],
)
def test_vad_mode_flushes_after_300_ms_of_silence(pattern: str, flushed: list[int]) -> None:
    assert run(UtteranceSegmenter(), pattern) == flushed


def test_forced_flush_at_30_s() -> None:
    assert run(UtteranceSegmenter(), "S" * 1501) == [1500]


def test_push_to_talk_one_hold_is_one_utterance() -> None:
    segmenter = UtteranceSegmenter(push_to_talk=True)
    assert run(segmenter, "SS" + "." * 40 + "S") == []  # no silence flush
    utterance = segmenter.release_key()
    assert utterance is not None and len(utterance) == 43 * 320
    assert run(segmenter, "SSS", key_held=False) == [] and segmenter.release_key() is None


@pytest.mark.parametrize(
    ("text", "published"),
    [
        ("  hello there \n", "hello there"),
        ("   ", None),
        ("", None),
        ("my key is nsec1qqq", None),
        ("NCRYPTSEC1 abc", None),
        ("NsEc1", None),
        ("insecure", "insecure"),
    ],
)
def test_egress_guard(text: str, published: str | None) -> None:
    assert publishable_transcript(text) == published


def test_local_barge_in_and_cooldown() -> None:
    gate = EchoGate()
    gate.tts_started()
    verdicts = [gate.mic_frame(True, 20.0 * i) for i in range(20)]
    assert not any(v.feed for v in verdicts)  # TTS echo is never transcribed
    assert [i for i, v in enumerate(verdicts) if v.cancel_tts] == [14]  # 15 frames = 300 ms (issue 13)
    gate.tts_stopped(400.0)
    assert not gate.mic_frame(True, 420.0).feed  # within the 50 ms cooldown
    after = gate.mic_frame(True, 450.0)
    assert after.feed and after.reset_utterance
    assert gate.mic_frame(True, 470.0) == MicVerdict(feed=True)


def test_speech_interrupted_by_silence_does_not_barge_in() -> None:
    gate = EchoGate()
    gate.tts_started()
    pattern = [True] * 14 + [False] + [True] * 14
    assert not any(gate.mic_frame(s, 20.0 * i).cancel_tts for i, s in enumerate(pattern))


def test_local_barge_in_threshold_is_configurable() -> None:
    gate = EchoGate(barge_in_ms=600)
    gate.tts_started()
    verdicts = [gate.mic_frame(True, 20.0 * i) for i in range(40)]
    assert [i for i, v in enumerate(verdicts) if v.cancel_tts] == [29]  # 30 frames = 600 ms


def test_push_to_talk_discards_during_tts_without_barge_in() -> None:
    gate = EchoGate(push_to_talk=True)
    gate.tts_started()
    verdicts = [gate.mic_frame(True, 20.0 * i) for i in range(30)]
    assert not any(v.feed or v.cancel_tts for v in verdicts)


def test_remote_floor() -> None:
    floor = RemoteFloor()
    spurt = [floor.frame(4, False, 20.0 * i) for i in range(15)]
    assert spurt == [False] * 14 + [True]  # 15 non-DTX frames = 300 ms of speech
    assert floor.holder == 4
    assert not floor.frame(9, False, 0.0, is_agent=True)
    floor.frame(4, True, 1000.0)  # DTX starts: release pending
    floor.frame(4, False, 1400.0)  # speech again cancels it
    floor.frame(4, True, 1450.0)
    floor.tick(1900.0)
    assert floor.holder == 4
    floor.tick(1950.0)
    assert floor.holder is None


def test_remote_breaths_and_short_words_do_not_barge_in() -> None:
    """Five frames in 500 ms used to cut the agent off (100 ms of noise); now 300 ms of speech."""
    floor = RemoteFloor()
    now, cancels = 0.0, 0
    for _ in range(10):  # ten 200 ms bursts ("mm", breaths) with 300 ms of DTX between them
        for _ in range(10):
            cancels += floor.frame(7, False, now)
            now += 20.0
        for _ in range(15):
            cancels += floor.frame(7, True, now)
            now += 20.0
    assert cancels == 0 and floor.holder is None
    assert not any(floor.frame(8, False, 20.0 * i) for i in range(14))
    assert RemoteFloor(barge_in_ms=100).frame(5, False, 0.0) is False
    assert [RemoteFloor(barge_in_ms=20).frame(5, False, 0.0)] == [True]


class ScriptedVad:
    def speech_probability(self, frame: np.ndarray) -> float:
        return 1.0 if np.abs(frame).max() > 0.05 else 0.0


def burst(seconds_speech: float, seconds_silence: float) -> np.ndarray:
    t = np.arange(int(48000 * seconds_speech)) / 48000
    return np.concatenate([0.5 * np.sin(2 * np.pi * 300 * t), np.zeros(int(48000 * seconds_silence))]).astype(
        np.float32
    )


def test_speech_to_text_resamples_and_segments() -> None:
    stt = SpeechToText(vad=ScriptedVad())
    result = stt.feed(burst(0.5, 0.5), 0.0)
    assert len(result.utterances) == 1
    assert 0.75 <= len(result.utterances[0]) / 16000 <= 0.85  # speech + 300 ms silence at 16 kHz


def test_speech_during_tts_is_not_transcribed_and_barges_in() -> None:
    stt = SpeechToText(vad=ScriptedVad())
    stt.gate.tts_started()
    result = stt.feed(burst(0.5, 0.5), 0.0)
    assert result.utterances == [] and result.cancel_tts


class SlowRecognizer:
    def __init__(self, gate: threading.Event) -> None:
        self.gate = gate

    def transcribe(self, pcm_16k: np.ndarray) -> str:
        self.gate.wait(10)
        return " hello nsec1 " if len(pcm_16k) > 16000 else " hello "


def test_worker_drops_when_the_queue_is_full_and_guards_egress() -> None:
    release = threading.Event()
    texts: list[str] = []
    worker = SttWorker(
        SpeechToText(vad=ScriptedVad()), lambda: SlowRecognizer(release), texts.append, depth=3
    )
    worker.start()
    worker.submit(burst(0.3, 0.4), 0.0)  # one utterance; the recogniser then stalls
    accepted = [worker.submit(np.zeros(4800, np.float32), 0.0) for _ in range(10)]  # never blocks
    assert not all(accepted) and worker.dropped == accepted.count(False)
    release.set()
    worker.stop(timeout=10)
    assert texts == ["hello"]


def test_worker_flushes_at_stop_and_refuses_key_material() -> None:
    texts: list[str] = []
    release = threading.Event()
    release.set()
    worker = SttWorker(SpeechToText(vad=ScriptedVad()), lambda: SlowRecognizer(release), texts.append)
    worker.start()
    worker.submit(burst(1.2, 0.0), 0.0)  # still speaking when input ends
    worker.stop(timeout=10)
    assert texts == []  # the > 1 s utterance came back as "hello nsec1" and was refused


def test_incomplete_model_bundle_names_the_file(tmp_path: Path) -> None:
    import pocketsphinx

    source = Path(pocketsphinx.get_model_path()) / "en-us"
    for name in POCKETSPHINX_FILES:
        if name != "en-us/mdef":
            (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(source / name, tmp_path / name)
    with pytest.raises(IncompleteModelBundle, match=r"incomplete model bundle: .*en-us/mdef"):
        PocketSphinxRecognizer(tmp_path)
