"""STT suppression while TTS plays, barge-in and cooldown (huddle.md §10.7). Pure: time passed in.

Times are milliseconds on the caller's monotonic clock. Microphone frames are the 20 ms VAD
frames of `vad`.
"""

from __future__ import annotations

from dataclasses import dataclass

from buzz.core.huddle_wire import (
    BARGE_IN_LOCAL_MS,
    BARGE_IN_REMOTE_FRAMES,
    BARGE_IN_REMOTE_WINDOW_MS,
    FLOOR_RELEASE_MS,
    TTS_COOLDOWN_MS,
)

MIC_FRAME_MS = 20
BARGE_IN_LOCAL_FRAMES = BARGE_IN_LOCAL_MS // MIC_FRAME_MS  # 16


@dataclass(frozen=True, slots=True)
class MicVerdict:
    """What to do with one microphone frame: reset the utterance first, feed it, stop TTS."""

    feed: bool
    reset_utterance: bool = False
    cancel_tts: bool = False


PASS = MicVerdict(feed=True)
DISCARD = MicVerdict(feed=False, reset_utterance=True)


class EchoGate:
    """Decides per mic frame while TTS plays and for 50 ms after (`TTS_COOLDOWN`).

    While TTS is active: push-to-talk discards the audio; VAD mode discards it too but counts
    consecutive speech frames, and the 16th (320 ms) raises `cancel_tts` (local barge-in). The
    frames that raised it are discarded as well. After TTS stops, frames are discarded for 50 ms,
    then the utterance state is reset once and audio flows again.
    """

    def __init__(self, *, push_to_talk: bool = False) -> None:
        self.push_to_talk = push_to_talk
        self.tts_active = False
        self._speech_run = 0
        self._cooldown_until: float | None = None

    def tts_started(self) -> None:
        self.tts_active = True
        self._speech_run = 0
        self._cooldown_until = None

    def tts_stopped(self, now_ms: float) -> None:
        if self.tts_active:
            self.tts_active = False
            self._cooldown_until = now_ms + TTS_COOLDOWN_MS

    def mic_frame(self, is_speech: bool, now_ms: float) -> MicVerdict:
        if self.tts_active:
            if self.push_to_talk:
                return DISCARD
            self._speech_run = self._speech_run + 1 if is_speech else 0
            if self._speech_run == BARGE_IN_LOCAL_FRAMES:
                return MicVerdict(feed=False, reset_utterance=True, cancel_tts=True)
            return DISCARD
        if self._cooldown_until is not None:
            if now_ms < self._cooldown_until:
                return DISCARD
            self._cooldown_until = None
            return MicVerdict(feed=True, reset_utterance=True)
        return PASS


class RemoteFloor:
    """Remote barge-in (§10.7): non-DTX frames of each non-agent peer in 500 ms windows.

    Five or more in one window give that peer the floor and raise `tts_cancel` (returned True).
    The floor is released 500 ms after its holder starts sending DTX; any non-DTX frame from the
    holder cancels a pending release. Agents' frames are never counted.
    """

    def __init__(self) -> None:
        self.holder: int | None = None
        self._windows: dict[int, tuple[float, int]] = {}  # peer → (window start ms, count)
        self._release_at: float | None = None

    def forget(self, peer_index: int) -> None:
        """The peer left: drop its window, and the floor if it held it."""
        self._windows.pop(peer_index, None)
        if self.holder == peer_index:
            self.holder = None
            self._release_at = None

    def tick(self, now_ms: float) -> None:
        if self._release_at is not None and now_ms >= self._release_at:
            self.holder = None
            self._release_at = None

    def frame(self, peer_index: int, dtx: bool, now_ms: float, *, is_agent: bool = False) -> bool:
        """Count one received frame; True when it raises `tts_cancel`."""
        self.tick(now_ms)
        if is_agent:
            return False
        if dtx:
            if peer_index == self.holder and self._release_at is None:
                self._release_at = now_ms + FLOOR_RELEASE_MS
            return False
        if peer_index == self.holder:
            self._release_at = None
        start, count = self._windows.get(peer_index, (now_ms, 0))
        if now_ms - start >= BARGE_IN_REMOTE_WINDOW_MS:
            start, count = now_ms, 0
        count += 1
        self._windows[peer_index] = (start, count)
        if count >= BARGE_IN_REMOTE_FRAMES:
            if self.holder != peer_index:
                self.holder = peer_index
                self._release_at = None
            return True
        return False
