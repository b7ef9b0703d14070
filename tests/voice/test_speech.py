"""THE SPEECH TEST: eSpeak NG → WAV → Opus 20 ms frames → relay prefix → receiver → STT.

The sentence is spoken by our TTS engine into a WAV, read back as the microphone, sent as v2
frames, received and decoded as a huddle peer would (jitter buffer, 10 ms playout into a per-peer
WAV), then transcribed by the default offline STT (soxr, WebRTC VAD, PocketSphinx) on its worker
thread. Synthetic speech recognises roughly (libraries.md), so only a subset of words must come
back. Networking is disabled throughout (checklist 48).
"""

from __future__ import annotations

import socket
from pathlib import Path

import numpy as np
import pytest

from buzz.core.huddle_control import Joined, RosterEntry
from buzz.core.huddle_wire import relay_frame
from buzz.voice.espeak import EspeakNgEngine
from buzz.voice.opus import SAMPLE_RATE, OpusEncoder
from buzz.voice.receiver import Receiver
from buzz.voice.sender import FrameSender
from buzz.voice.stt import PocketSphinxRecognizer, SpeechToText, SttWorker
from buzz.voice.tts import TTS_SAMPLE_RATE, render_reply
from buzz.voice.wav import PeerWavs, iter_frames, read_wav_48k, write_wav

# Sentences that survived eSpeak NG → Opus → PocketSphinx at 150–200 wpm in trials.
SENTENCES = ["the meeting starts tomorrow morning", "the quick brown fox jumps over the lazy dog"]
SPEAKER, LISTENER = "b" * 64, "a" * 64
BATCH = 4800  # 100 ms capture batches into the STT queue (§10.4)


@pytest.fixture
def offline(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: object, **kwargs: object) -> None:
        raise OSError("networking is disabled in this test")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "getaddrinfo", refuse)


def huddle_round_trip(mic: np.ndarray, out_dir: Path) -> np.ndarray:
    """Send `mic` (48 kHz int16) as peer 3 and play it out at the listener; returns its WAV."""
    sender = FrameSender(OpusEncoder())
    receiver = Receiver(protocol_version=2)
    receiver.on_control(Joined(2, LISTENER, 0, (RosterEntry(0, LISTENER), RosterEntry(3, SPEAKER))))
    wavs = PeerWavs(out_dir)
    now_ms = 0.0
    tail = [np.zeros(960, np.int16)] * 25  # 500 ms of room tone so the jitter buffer drains
    for frame in [*iter_frames(mic), *tail]:
        for message in sender.frame(frame):
            receiver.on_frame(relay_frame(3, message), now_ms)
        for _ in range(2):
            wavs.write(receiver.tick(now_ms))
            now_ms += 10.0
    wavs.close()
    return read_wav_48k(wavs.writers[3].path)


@pytest.mark.parametrize("sentence", SENTENCES)
def test_spoken_sentence_survives_the_huddle(
    sentence: str, offline: None, espeak: EspeakNgEngine, sphinx: PocketSphinxRecognizer, tmp_path: Path
) -> None:
    spoken = np.concatenate(list(render_reply(espeak, sentence)))
    write_wav(tmp_path / "tts.wav", spoken, TTS_SAMPLE_RATE)
    mic = read_wav_48k(tmp_path / "tts.wav")
    heard = huddle_round_trip(mic, tmp_path)
    assert abs(len(heard) - len(mic)) < SAMPLE_RATE  # the listener heard about as much as was said

    texts: list[str] = []
    worker = SttWorker(SpeechToText(), lambda: sphinx, texts.append)
    worker.start()
    for start in range(0, len(heard), BATCH):
        assert worker.submit(heard[start : start + BATCH], start / 48.0)
    worker.stop(timeout=30)

    transcript = " ".join(texts)
    print(f"transcript: {transcript!r}")
    assert len(set(transcript.split()) & set(sentence.split()) - {"the"}) >= 2, transcript
