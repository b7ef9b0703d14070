"""STT suppression while TTS plays, barge-in and cooldown (huddle.md §10.7). Pure: time passed in.

Times are milliseconds on the caller's monotonic clock. Microphone frames are the 20 ms VAD
frames of `vad`.
"""

from __future__ import annotations

from dataclasses import dataclass

from buzz.core.huddle_wire import BARGE_IN_GAP_MS, BARGE_IN_MIN_MS, FLOOR_RELEASE_MS, TTS_COOLDOWN_MS

MIC_FRAME_MS = 20
REMOTE_FRAME_MS = 20


def barge_in_frames(barge_in_ms: int) -> int:
    """20 ms frames of speech needed to barge in (at least one)."""
    return max(1, -(-barge_in_ms // MIC_FRAME_MS))


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
    consecutive speech frames, and once they reach `barge_in_ms` (default 300 ms, 15 frames) it
    raises `cancel_tts` (local barge-in), so a breath or a cough does not cut the reply. The
    frames that raised it are discarded as well. After TTS stops, frames are discarded for 50 ms,
    then the utterance state is reset once and audio flows again.
    """

    def __init__(self, *, push_to_talk: bool = False, barge_in_ms: int = BARGE_IN_MIN_MS) -> None:
        self.push_to_talk = push_to_talk
        self.barge_in_frames = barge_in_frames(barge_in_ms)
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
            if self._speech_run == self.barge_in_frames:
                return MicVerdict(feed=False, reset_utterance=True, cancel_tts=True)
            return DISCARD
        if self._cooldown_until is not None:
            if now_ms < self._cooldown_until:
                return DISCARD
            self._cooldown_until = None
            return MicVerdict(feed=True, reset_utterance=True)
        return PASS


class RemoteFloor:
    """Remote barge-in (§10.7, issue 13 item 6): talk spurts of each non-agent peer.

    A spurt is a run of non-DTX frames with no gap over 200 ms; once it holds `barge_in_ms` of
    audio (default 300 ms, 15 frames) that peer gets the floor and `tts_cancel` is raised
    (returned True). The floor is released 500 ms after its holder starts sending DTX; any
    non-DTX frame from the holder cancels a pending release. Agents' frames are never counted.
    """

    def __init__(self, barge_in_ms: int = BARGE_IN_MIN_MS) -> None:
        self.holder: int | None = None
        self.barge_in_frames = barge_in_frames(barge_in_ms)
        self._spurts: dict[int, tuple[float, int]] = {}  # peer → (last non-DTX ms, frames)
        self._release_at: float | None = None

    def forget(self, peer_index: int) -> None:
        """The peer left: drop its spurt, and the floor if it held it."""
        self._spurts.pop(peer_index, None)
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
        last, count = self._spurts.get(peer_index, (now_ms, 0))
        if now_ms - last > BARGE_IN_GAP_MS:
            count = 0
        count += 1
        self._spurts[peer_index] = (now_ms, count)
        if count >= self.barge_in_frames:
            if self.holder != peer_index:
                self.holder = peer_index
                self._release_at = None
            return True
        return False
