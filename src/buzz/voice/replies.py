"""Speaking agent replies on a listening client (huddle.md §10.6) with barge-in (§10.7).

Replies (kind 9 by `bot` members of the huddle channel) wait in a queue of 8; one at a time is
synthesised chunk by chunk (the next chunk is made while the current one plays) and played in
10 ms blocks (240 samples at 24 kHz) at real-time pace into `output`. While it plays, the echo
gate discards microphone audio; `cancel()` (local or remote barge-in) stops playback at the
next 10 ms block and discards the rest of the reply; 50 ms of cooldown follow (the gate's).

Only the speakable part of a reply is synthesised (no harness markers, URLs or code:
`speakable`). Every reply taken from the queue is logged in `log` as a `SpokenReply`, and one
that was cut by barge-in is marked `cut` there (the client's transcript of the huddle).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np

from buzz.core.huddle_wire import PLAYOUT_TICK_MS, TTS_SAMPLE_RATE
from buzz.voice.echo import EchoGate
from buzz.voice.speakable import speakable
from buzz.voice.tts import ReplyQueue, TtsEngine, render_reply

log = logging.getLogger(__name__)

BLOCK_SAMPLES = TTS_SAMPLE_RATE * PLAYOUT_TICK_MS // 1000  # 240


@dataclass(slots=True)
class SpokenReply:
    """One reply as the huddle heard it: `cut` when barge-in stopped it before the end."""

    text: str
    event_id: str | None = None
    cut: bool = False
    spoken: str = ""  # what was synthesised (the speakable part)

    def to_json(self) -> dict[str, object]:
        return {"id": self.event_id, "content": self.text, "spoken": self.spoken, "cut": self.cut}


class ReplySpeaker:
    """`output(block)` receives float32 24 kHz blocks; `clock_ms()` is the session clock the
    echo gate shares with the microphone path."""

    def __init__(
        self,
        engine_factory: Callable[[], TtsEngine],
        output: Callable[[np.ndarray], None],
        gate: EchoGate,
        clock_ms: Callable[[], float],
    ) -> None:
        self.queue: ReplyQueue[SpokenReply] = ReplyQueue()
        self.gate = gate
        self.spoken = 0
        self.cancelled = 0
        self.tts_active = False
        self.log: list[SpokenReply] = []
        self._ids: dict[int, str | None] = {}
        self._engine_factory = engine_factory
        self._output = output
        self._clock_ms = clock_ms
        self._wake = asyncio.Event()
        self._cancel = False

    def offer(self, text: str, event_id: str | None = None) -> bool:
        """Queue a reply; False (dropped) while 8 are waiting."""
        entry = SpokenReply(text, event_id)
        queued = self.queue.offer(entry)
        self._wake.set()
        return queued

    def cancel(self) -> None:
        """`tts_cancel`: stop the current reply within one 10 ms block; no-op when silent."""
        if self.tts_active:
            self._cancel = True

    async def run(self) -> None:
        """Speak replies until cancelled (the task)."""
        engine = await asyncio.to_thread(self._engine_factory)
        while True:
            entry = self.queue.take()
            if entry is None:
                self._wake.clear()
                await self._wake.wait()
                continue
            entry.spoken = speakable(entry.text)
            self.log.append(entry)
            await self._speak(engine, entry)

    async def _speak(self, engine: TtsEngine, entry: SpokenReply) -> None:
        chunks: Iterator[np.ndarray] = render_reply(engine, entry.spoken)
        pending = asyncio.ensure_future(asyncio.to_thread(next, chunks, None))
        self.tts_active, self._cancel = True, False
        self.gate.tts_started()
        try:
            while (chunk := await pending) is not None:
                pending = asyncio.ensure_future(asyncio.to_thread(next, chunks, None))  # overlap
                if not await self._play(chunk):
                    self.cancelled += 1
                    entry.cut = True
                    return
            self.spoken += 1
        except Exception:
            log.exception("speaking a reply failed")
        finally:
            pending.cancel()
            self.tts_active = False
            self.gate.tts_stopped(self._clock_ms())

    async def _play(self, chunk: np.ndarray) -> bool:
        """Play one chunk at real-time pace; False when cancelled (the rest is discarded)."""
        start = time.monotonic()
        for i, offset in enumerate(range(0, len(chunk), BLOCK_SAMPLES)):
            if self._cancel:
                return False
            self._output(chunk[offset : offset + BLOCK_SAMPLES])
            delay = start + (i + 1) * PLAYOUT_TICK_MS / 1000 - time.monotonic()
            await asyncio.sleep(max(0.0, delay))
        return not self._cancel
