"""Voice activity detection and utterance segmentation (huddle.md §10.4).

Shapes: VAD frames are 320 samples (20 ms at 16 kHz); utterances are float32 at 16 kHz.
"""

from __future__ import annotations

import collections
from typing import Protocol

import numpy as np

from buzz.core.huddle_wire import MAX_UTTERANCE_SAMPLES, SILENCE_FLUSH_MS, STT_SAMPLE_RATE, VAD_FRAME
from buzz.voice.pcm import as_int16

FRAME_MS = VAD_FRAME * 1000 // STT_SAMPLE_RATE  # 20
SILENCE_FLUSH_FRAMES = SILENCE_FLUSH_MS // FRAME_MS  # 15
# The VAD fires a little after a word starts (soft onsets: "s", "f", "h"); without the audio just
# before the first speech frame the recogniser hears "and" for "send" (bench/stt.py).
PRE_ROLL_MS = 200
PRE_ROLL_FRAMES = PRE_ROLL_MS // FRAME_MS  # 10


class Vad(Protocol):
    """Pluggable detector: probability in [0, 1] that a 320-sample 16 kHz frame is speech."""

    def speech_probability(self, frame: np.ndarray) -> float: ...


class WebRtcVad:
    """WebRTC VAD (`webrtcvad-wheels`), aggressiveness 2, read as probability 0 or 1."""

    def __init__(self, aggressiveness: int = 2) -> None:
        import webrtcvad

        self._vad = webrtcvad.Vad(aggressiveness)

    def speech_probability(self, frame: np.ndarray) -> float:
        return 1.0 if self._vad.is_speech(as_int16(frame).tobytes(), STT_SAMPLE_RATE) else 0.0


class UtteranceSegmenter:
    """Collects speech frames and the silent frames after them into utterances.

    VAD mode: flush after 300 ms of consecutive silence, force a flush at 30 s (480 000 samples).
    An utterance starts with up to 200 ms of the audio before its first speech frame (pre-roll).
    Push-to-talk mode: a frame is speech only while the key is held, there is no silence flush,
    and `release_key()` ends the utterance of that hold.
    """

    def __init__(self, *, push_to_talk: bool = False, pre_roll_frames: int = PRE_ROLL_FRAMES) -> None:
        self.push_to_talk = push_to_talk
        self._before: collections.deque[np.ndarray] = collections.deque(maxlen=max(1, pre_roll_frames))
        self._pre_roll = pre_roll_frames > 0
        self._frames: list[np.ndarray] = []
        self._samples = 0
        self._silent_run = 0

    @property
    def collecting(self) -> bool:
        return bool(self._frames)

    def reset(self) -> None:
        """Discard accumulated speech (TTS echo suppression, leave)."""
        self._frames.clear()
        self._before.clear()
        self._samples = 0
        self._silent_run = 0

    def _take(self) -> np.ndarray:
        utterance = np.concatenate(self._frames).astype(np.float32, copy=False)
        self._frames.clear()
        self._samples = 0
        self._silent_run = 0
        return utterance

    def frame(self, frame: np.ndarray, is_speech: bool, key_held: bool = True) -> np.ndarray | None:
        """Feed one 320-sample frame; returns a finished utterance (float32, 16 kHz) or None."""
        speech = is_speech and (key_held or not self.push_to_talk)
        samples = np.asarray(frame, dtype=np.float32)
        if not speech and not self._frames:
            if self._pre_roll:
                self._before.append(samples)
            return None
        if self.push_to_talk and not key_held:
            return None
        if not self._frames and self._before:
            self._frames.extend(self._before)
            self._samples += sum(len(f) for f in self._before)
            self._before.clear()
        self._frames.append(samples)
        self._samples += len(frame)
        self._silent_run = 0 if speech else self._silent_run + 1
        if self._samples >= MAX_UTTERANCE_SAMPLES:
            return self._take()
        if not self.push_to_talk and self._silent_run >= SILENCE_FLUSH_FRAMES:
            return self._take()
        return None

    def release_key(self) -> np.ndarray | None:
        """Push-to-talk: the key went up; the hold's utterance, if any speech was collected."""
        return self._take() if self._frames else None
