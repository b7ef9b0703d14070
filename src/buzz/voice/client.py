"""The asyncio shell of a huddle participant: `HuddleSession` on an aiohttp WebSocket, plus the
Nostr side (transcripts out, agent replies in). Used by `buzz huddle join` (huddle.md §10).

Tasks while joined: the socket reader (control messages applied at once, frames to the jitter
buffers and, with `record_dir`, to the per-peer WAVs in `seq` order, remote barge-in), a 20 ms
capture clock (microphone → Opus frames → socket, and 100 ms batches to the STT worker), a 10 ms
playout clock (per-peer PCM for a device; recordings never come from it, decision 276), the reply
speaker (agent replies → TTS → `tts.wav`), and a watcher for agent replies on the relay.

The host supplies a connected `RelayClient` and a `Signer`; this module never holds a key.
The microphone is a WAV file (headless) or silence; live devices are the host's business.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp
import numpy as np

from buzz.client import RelayClient
from buzz.client.errors import NetworkError
from buzz.core.event import Event
from buzz.core.huddle_control import Retry
from buzz.core.huddle_wire import (
    AGENT_REFRESH,
    BARGE_IN_MIN_MS,
    CLIENT_CHALLENGE_TIMEOUT,
    CLIENT_HANDSHAKE_TIMEOUT,
    CLIENT_JOINED_TIMEOUT,
    CLIENT_MAX_MESSAGE_BYTES,
    CURRENT_PROTOCOL_VERSION,
    FRAME_SAMPLES,
    PLAYOUT_TICK_MS,
    TTS_SAMPLE_RATE,
    parse_relay_frame,
)
from buzz.core.kinds import AUTH_KIND
from buzz.voice import seat
from buzz.voice.agents import AgentDirectory, room_vocabulary
from buzz.voice.echo import EchoGate, RemoteFloor
from buzz.voice.engines import SttChoice, build_recognizer
from buzz.voice.guidelines import GuidelinesNotifier, i_post_guidelines
from buzz.voice.receiver import default_decoder
from buzz.voice.recording import PeerRecorder
from buzz.voice.replies import ReplySpeaker
from buzz.voice.room_view import RoomSnapshot, RoomView
from buzz.voice.session import HuddleSession, JoinFailed, Phase
from buzz.voice.stt import Recognizer, SpeechToText, SttWorker
from buzz.voice.transcripts import Signer, TranscriptPublisher
from buzz.voice.tts import TtsEngine
from buzz.voice.wav import PeerWavs, WavWriter, iter_frames, read_wav_48k

log = logging.getLogger(__name__)

FRAME_MS = 20
STT_BATCH_FRAMES = 5  # 100 ms batches into the STT queue (§10.4)
TRAILING_SILENCE_FRAMES = 25  # 500 ms of silence after the input, before leaving
_CLOSING = (
    aiohttp.WSMsgType.CLOSE,
    aiohttp.WSMsgType.CLOSING,
    aiohttp.WSMsgType.CLOSED,
    aiohttp.WSMsgType.ERROR,
)


@dataclass(frozen=True, slots=True)
class HuddleOptions:
    """One join. `transcribe`: True always, False never, None auto (while agents are present)."""

    relay_url: str
    channel_id: str
    parent_channel_id: str | None = None
    protocol_version: int = CURRENT_PROTOCOL_VERSION
    input_wav: Path | None = None
    record_dir: Path | None = None
    transcribe: bool | None = None
    speak_replies: bool = True
    leave_after_input: bool = False
    duration_s: float | None = None
    stt: SttChoice = field(default_factory=SttChoice)
    barge_in_ms: int = BARGE_IN_MIN_MS
    voice_guidelines: bool = True  # post 48106 to the agents (when this seat is the room's poster)
    agents_check_s: float = AGENT_REFRESH  # how often the agent list is read for newcomers
    # With leave_after_input: how long to stay for the agents' answers to what was said, so the
    # reply is heard and lands before the room empties (a TTL huddle archives when it does).
    reply_wait_s: float = 20.0
    display: Callable[[str], None] | None = None  # live roster / speaking lines (the CLI's stderr)
    view: Callable[[RoomSnapshot], None] | None = None  # the whole room every 500 ms (a TTY panel)
    room_context: bool = True  # tell the recogniser the members' names and the channel's name

    @property
    def audio_url(self) -> str:
        return f"{self.relay_url.rstrip('/')}/huddle/{self.channel_id}/audio"


@dataclass
class HuddleReport:
    """What happened, for the CLI's JSON output and for tests."""

    peer_index: int | None = None
    protocol_version: int | None = None  # as negotiated with the relay
    roster: dict[int, str] = field(default_factory=dict)
    frames_sent: int = 0
    frames_received: int = 0
    frames_dropped: int = 0
    transcripts: list[dict[str, object]] = field(default_factory=list)
    replies_spoken: int = 0
    replies_cancelled: int = 0
    replies: list[dict[str, object]] = field(default_factory=list)  # as heard; `cut` by barge-in
    guidelines: list[dict[str, object]] = field(default_factory=list)  # 48106 posted: id, agents
    stt_dropped: int = 0
    recordings: list[str] = field(default_factory=list)
    recording_late: int = 0  # packets that came after their place in a recording was written
    # The huddle was ended while this client sat in it (`huddle leave --end`, an archive, the
    # TTL): the relay's `room_ended`. A normal way to leave, so the report is still the answer.
    ended: bool = False


def _room_ended(failure: BaseException | None) -> bool:
    """Whether the audio socket ended with the relay's `room_ended` (decision 98)."""
    return (
        isinstance(failure, JoinFailed) and failure.error is not None and failure.error.code == "room_ended"
    )


def lost_reason(code: int | None, reason: str, *, audio: bool) -> str:
    """Why the join ended without our leave, for the `network_error` line: the audio socket's
    close code and reason (1012 is the relay's drain or restart, huddle.md §9.5), or the Nostr
    connection's end."""
    if not audio:
        return "relay connection closed"
    if code in (None, 1006):
        return "audio socket closed (no close frame: the relay went away)"
    close = f"close {code}{f': {reason}' if reason else ''}"
    if code == 1012:
        return f"the relay restarted or is draining ({close})"
    return f"audio socket closed by the relay ({close})"


def _default_tts() -> TtsEngine:
    from buzz.voice.espeak import EspeakNgEngine

    return EspeakNgEngine()


class HuddleClient(RoomView):
    """Join one huddle and run until the input ends (`leave_after_input`), `duration_s`
    passes, or `stop()` is called. Raises JoinFailed when the relay refuses the join (its
    `error`), TimeoutError when the handshake takes too long, and NetworkError ("connection
    lost: …") when the audio socket or the Nostr connection closes without our leave."""

    def __init__(
        self,
        options: HuddleOptions,
        signer: Signer,
        nostr: RelayClient,
        *,
        recognizer_factory: Callable[[], Recognizer] | None = None,
        tts_factory: Callable[[], TtsEngine] = _default_tts,
    ) -> None:
        self.options = options
        self.signer = signer
        self.nostr = nostr
        self.report = HuddleReport()
        self._wavs = PeerWavs(options.record_dir) if options.record_dir else None
        self._recorder = PeerRecorder(self._wavs, default_decoder) if self._wavs is not None else None
        self.session = self._new_session(options.protocol_version)
        self.agents = AgentDirectory(nostr.query, options.channel_id)
        self.publisher = TranscriptPublisher(
            options.channel_id, signer, self.agents, self._publish, options.transcribe
        )
        self.guidelines = GuidelinesNotifier(options.channel_id, signer, self.agents, self._publish)
        factory = recognizer_factory or (lambda: build_recognizer(options.stt))
        pipeline = SpeechToText(gate=EchoGate(barge_in_ms=options.barge_in_ms))
        self.stt = SttWorker(pipeline, factory, self._on_text, self._on_cancel_tts)
        self._t0 = time.monotonic()
        self.speaker = ReplySpeaker(tts_factory, self._play_tts, self.stt.pipeline.gate, self.now_ms)
        self.floor = RemoteFloor(options.barge_in_ms)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop = asyncio.Event()
        self._publishing: set[asyncio.Task[object]] = set()
        self._reply_seen = asyncio.Event()
        self.seated = asyncio.Event()  # set once the relay's `joined` gave this client its seat
        self._joined_at = 0
        self._names: dict[str, str] = {}  # pubkey → kind 0 display name ("" when it has none)
        self._tts_wav: WavWriter | None = None
        self._close_reason = ""  # the relay's close reason on the audio socket, when it gave one

    def _new_session(self, protocol_version: int) -> HuddleSession:
        return HuddleSession(
            self._sign_auth,
            parent_channel_id=self.options.parent_channel_id,
            protocol_version=protocol_version,
            tap=self._recorder,
        )

    def now_ms(self) -> float:
        return (time.monotonic() - self._t0) * 1000.0

    def stop(self) -> None:
        """Leave at the next opportunity."""
        self._stop.set()

    # -- run -------------------------------------------------------------------------------
    async def run(self) -> HuddleReport:
        self._loop = asyncio.get_running_loop()
        if self.options.record_dir:
            self.options.record_dir.mkdir(parents=True, exist_ok=True)
        await self.agents.refresh()  # on connect (§10.5 item 2)
        async with aiohttp.ClientSession() as http:
            try:
                ws = await self._connect(http)
            except JoinFailed:
                self._close_outputs()
                raise
            try:
                await self._joined(ws)
            finally:
                await ws.close()
                self._close_outputs()
        return self.report

    async def _connect(self, http: aiohttp.ClientSession) -> aiohttp.ClientWebSocketResponse:
        """Open the socket and join; once, fall back to the relay's version when it answers
        `unsupported_version` with one this client speaks (v3 → v2 on an older relay, §4.3)."""
        for attempt in range(2):
            ws = await http.ws_connect(
                self.options.audio_url, max_msg_size=CLIENT_MAX_MESSAGE_BYTES, autoping=True, heartbeat=None
            )
            try:
                await asyncio.wait_for(self._handshake(ws), CLIENT_HANDSHAKE_TIMEOUT)
                self.report.protocol_version = self.session.protocol_version
                return ws
            except JoinFailed as exc:
                await ws.close()
                fallback = exc.error.current_version if exc.error is not None else None
                speaks = fallback is not None and 2 <= fallback < self.session.protocol_version
                if attempt or exc.retry is not Retry.WITH_VERSION or not speaks:
                    raise
                assert fallback is not None
                self.session = self._new_session(fallback)
            except BaseException:
                await ws.close()
                raise
        raise AssertionError("unreachable")

    async def _handshake(self, ws: aiohttp.ClientWebSocketResponse) -> None:
        for timeout in (CLIENT_CHALLENGE_TIMEOUT, CLIENT_JOINED_TIMEOUT):
            msg = await ws.receive(timeout)
            if msg.type != aiohttp.WSMsgType.TEXT:
                raise JoinFailed(None, f"socket closed during the handshake ({msg.type.name})")
            for reply in self.session.receive_text(msg.data):
                await ws.send_str(reply)
        if self.session.phase is not Phase.JOINED:
            raise JoinFailed(None, "no joined after auth")
        self.report.peer_index = self.session.peer_index
        self._joined_at = int(time.time())
        self._save_seat()
        self.seated.set()

    def _save_seat(self) -> None:
        """Keep the seat file `buzz huddle status` reads in step with the roster (best effort)."""
        index = self.session.peer_index
        if index is None:
            return
        try:
            seat.write_seat(
                self.options.relay_url,
                self.options.channel_id,
                self.signer.pubkey,
                peer_index=index,
                protocol_version=self.session.protocol_version,
                joined_at=self._joined_at,
                roster=self.session.roster,
            )
        except OSError as exc:
            log.warning("could not write the huddle seat file: %s", exc)

    async def _joined(self, ws: aiohttp.ClientWebSocketResponse) -> None:
        self.stt.start()
        tasks = [
            asyncio.create_task(self._read(ws)),
            asyncio.create_task(self._playout()),
            asyncio.create_task(self._watch_replies()),
        ]
        if self.options.voice_guidelines:
            tasks.append(asyncio.create_task(self._tell_agents()))
        if self.options.room_context:
            tasks.append(asyncio.create_task(self._learn_room()))
        if self.options.display is not None:
            tasks.append(asyncio.create_task(self._show_room(self.options.display)))
        if self.options.view is not None:
            tasks.append(asyncio.create_task(self._show_view(self.options.view)))
        if self.options.speak_replies:
            tasks.append(asyncio.create_task(self.speaker.run()))
        capture = asyncio.create_task(self._capture(ws))
        stopper = asyncio.create_task(self._stop.wait())
        # The Nostr connection dying (the relay killed, the network gone) ends the join too:
        # transcripts and replies need it, and its loss must be reported, not swallowed.
        nostr_gone = asyncio.create_task(
            self.nostr.wait_closed() if not self.nostr.closed else asyncio.Event().wait()
        )
        try:
            waiting = {tasks[0], capture, stopper, nostr_gone}
            deadline = self.options.duration_s
            done, _ = await asyncio.wait(waiting, timeout=deadline, return_when=asyncio.FIRST_COMPLETED)
            failure = tasks[0].exception() if tasks[0] in done else None
            self.report.ended = _room_ended(failure)
            if failure is not None and not self.report.ended:
                raise failure
            if stopper not in done and not self.report.ended and (tasks[0] in done or nostr_gone in done):
                raise NetworkError(
                    f"connection lost: {lost_reason(ws.close_code, self._close_reason, audio=tasks[0] in done)}"
                )
            input_ended = capture in done
        except BaseException:
            input_ended = False
            raise
        finally:
            capture.cancel()
            stopper.cancel()
            nostr_gone.cancel()
            # Flush the last utterance. Not against a clock: the work is bounded by what is
            # queued (STT_QUEUE_DEPTH batches and one utterance), and on a loaded box a bound in
            # seconds dropped the transcript of the end of the input without a word (Ctrl-C
            # still ends the wait).
            await asyncio.to_thread(self.stt.stop)
            await asyncio.sleep(0)
            if self._publishing:
                await asyncio.gather(*self._publishing, return_exceptions=True)
            if input_ended and self.options.leave_after_input:
                await self._await_answers()
            seat.remove_seat(self.options.relay_url, self.options.channel_id, self.signer.pubkey)
            leave = self.session.leave()
            self.publisher.session_id += 1  # later transcripts belong to an ended session
            if leave is not None and not ws.closed:
                with contextlib.suppress(Exception):
                    await ws.send_str(leave)
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, capture, return_exceptions=True)
            self.report.roster = dict(self.session.roster)
            self.report.stt_dropped = self.stt.dropped
            self.report.replies_spoken = self.speaker.spoken
            self.report.replies_cancelled = self.speaker.cancelled
            self.report.replies = [r.to_json() for r in self.speaker.log]
            self.report.guidelines = [
                {"id": e.id, "agents": e.tag_values("p")} for e in self.guidelines.posted
            ]
            self.report.frames_dropped = self.session.receiver.dropped

    # -- socket reader -----------------------------------------------------------------------
    async def _read(self, ws: aiohttp.ClientWebSocketResponse) -> None:
        """Until the socket closes; keeps the relay's close reason (`async for` hides it)."""
        while True:
            msg = await ws.receive()
            if msg.type in _CLOSING:
                self._close_reason = msg.extra if isinstance(msg.extra, str) else ""
                return
            if msg.type == aiohttp.WSMsgType.TEXT:
                before = dict(self.session.roster)
                self.session.receive_text(msg.data)  # control path: applied at once (§10.3)
                if self.session.roster != before:
                    self._save_seat()
            elif msg.type == aiohttp.WSMsgType.BINARY:
                now = self.now_ms()
                if self.session.receive_binary(msg.data, now):
                    self.report.frames_received += 1
                    self._remote_barge_in(msg.data, now)

    def _remote_barge_in(self, message: bytes, now: float) -> None:
        frame = parse_relay_frame(message, self.session.protocol_version)
        if frame is None or frame.header is None:
            return
        is_agent = self.session.roster.get(frame.peer_index) in self.agents.agents
        if self.floor.frame(frame.peer_index, frame.header.dtx, now, is_agent=is_agent):
            self.speaker.cancel()

    # -- microphone --------------------------------------------------------------------------
    def _mic(self) -> Iterator[np.ndarray | None]:
        """20 ms frames of the input WAV, then None once (end of input), then silence."""
        if self.options.input_wav is not None:
            yield from iter_frames(read_wav_48k(self.options.input_wav))
            yield None
        while True:
            yield np.zeros(FRAME_SAMPLES, np.int16)

    async def _capture(self, ws: aiohttp.ClientWebSocketResponse) -> None:
        """20 ms capture clock. After the input ends with `leave_after_input`, 500 ms of room
        tone follow, so the last utterance ends on silence as live speech does, then return."""
        start = time.monotonic()
        batch: list[np.ndarray] = []
        remaining: int | None = None
        for i, pcm in enumerate(self._mic()):
            if pcm is None:
                if self.options.leave_after_input:
                    remaining = TRAILING_SILENCE_FRAMES
                continue
            if remaining is not None:
                if remaining == 0:
                    return
                remaining -= 1
            for message in self.session.capture(pcm):
                await ws.send_bytes(message)
                self.report.frames_sent += 1
            batch.append(pcm)
            if len(batch) == STT_BATCH_FRAMES:
                self.stt.submit(np.concatenate(batch), self.now_ms() - FRAME_MS * (STT_BATCH_FRAMES - 1))
                batch = []
            delay = start + (i + 1) * FRAME_MS / 1000 - time.monotonic()
            await asyncio.sleep(max(0.0, delay))

    # -- playout -----------------------------------------------------------------------------
    async def _playout(self) -> None:
        tick_s = PLAYOUT_TICK_MS / 1000
        next_at = time.monotonic()
        while True:
            # Headless there is no device to play to; the tick still drains the jitter buffers.
            self.session.tick(self.now_ms())
            next_at += tick_s
            delay = next_at - time.monotonic()
            if delay < -0.3:  # a stall over 300 ms: reset the schedule, do not catch up (§10.3)
                next_at = time.monotonic()
            await asyncio.sleep(max(0.0, delay))

    def _play_tts(self, block: np.ndarray) -> None:
        if self.options.record_dir is None:
            return
        if self._tts_wav is None:
            self._tts_wav = WavWriter(self.options.record_dir / "tts.wav", TTS_SAMPLE_RATE)
        self._tts_wav.write(block)

    def _close_outputs(self) -> None:
        if self._recorder is not None:
            self._recorder.close()  # what was held for reordering, before the files close
            self.report.recording_late = self._recorder.late
        if self._wavs is not None:
            self._wavs.close()
            self.report.recordings = [str(w.path) for w in self._wavs.writers.values()]
        if self._tts_wav is not None:
            self._tts_wav.close()
            self.report.recordings.append(str(self._tts_wav.path))

    # -- Nostr side --------------------------------------------------------------------------
    def _sign_auth(self, challenge: str) -> dict[str, object]:
        tags = [["relay", self.options.relay_url], ["challenge", challenge]]
        return self.signer.sign(AUTH_KIND, "", tags).to_dict()

    def _on_text(self, text: str) -> None:
        """STT worker thread → the loop: publish with the current session id."""
        assert self._loop is not None
        session_id = self.publisher.session_id
        self._loop.call_soon_threadsafe(self._spawn_publish, text, session_id)

    def _spawn_publish(self, text: str, session_id: int) -> None:
        task: asyncio.Task[object] = asyncio.ensure_future(self._publish_transcript(text, session_id))
        self._publishing.add(task)
        task.add_done_callback(self._publishing.discard)

    async def _publish_transcript(self, text: str, session_id: int) -> None:
        outcome = await self.publisher.submit(text, session_id)
        if outcome.accepted and outcome.event is not None and outcome.event.tag_values("p"):
            self._reply_seen.clear()  # wait for the answer to this one (leave_after_input)
        self.report.transcripts.append(
            {
                "accepted": outcome.accepted,
                "message": outcome.message,
                "id": outcome.event.id if outcome.event else None,
                "content": outcome.event.content if outcome.event else None,
            }
        )

    def _on_cancel_tts(self) -> None:
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self.speaker.cancel)

    async def _publish(self, event: Event) -> tuple[bool, str]:
        result = await self.nostr.publish(event)
        return result.accepted, result.message

    async def _learn_room(self) -> None:
        """The room's vocabulary for the recogniser: the display names (kind 0) of the channel's
        members (39002) and the channel's name (39000), read on join and at each agent check."""
        while True:
            try:
                names, channel = await room_vocabulary(self.nostr.query, self.options.channel_id)
                self.stt.set_context(names, channel)
            except Exception as exc:  # a vocabulary is a bonus: recognition works without it
                if self.nostr.closed:  # the join is ending with its own network_error line
                    return
                log.warning("reading the room's names failed: %s", exc)
            await asyncio.sleep(self.options.agents_check_s)

    async def _tell_agents(self) -> None:
        """Voice guidelines (48106) to every agent in the huddle, newcomers included (item 4)."""
        while True:
            agents = await self.agents.refresh()
            if i_post_guidelines(self.session.roster, self.session.peer_index, agents):
                try:
                    await self.guidelines.check(agents)
                except Exception as exc:  # the relay went away: try again at the next check
                    if self.nostr.closed:  # the join is ending with its own network_error line
                        return
                    log.warning("posting voice guidelines failed: %s", exc)
            await asyncio.sleep(self.options.agents_check_s)

    async def _await_answers(self) -> None:
        """After the input ended: when a transcript went to agents, stay until an agent has
        answered and the answer was spoken, or `reply_wait_s` passes (then leave anyway)."""
        addressed = any(
            o.accepted and o.event is not None and o.event.tag_values("p") for o in self.publisher.outcomes
        )
        if not addressed or self.options.reply_wait_s <= 0:
            return
        deadline = time.monotonic() + self.options.reply_wait_s
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(self.options.reply_wait_s):
                await self._reply_seen.wait()
                while self.options.speak_replies and (len(self.speaker.queue) or self.speaker.tts_active):
                    if time.monotonic() >= deadline:
                        break
                    await asyncio.sleep(0.05)

    async def _watch_replies(self) -> None:
        """Agent replies: kind 9 in the huddle channel by `bot` members, from now on (§10.6)."""
        since = int(time.time())
        sub = await self.nostr.subscribe([{"kinds": [9], "#h": [self.options.channel_id], "since": since}])
        async for event in sub:
            if event.pubkey == self.signer.pubkey or event.created_at < since:
                continue
            agents = await self.agents.current()
            if event.pubkey not in agents:
                continue
            self._reply_seen.set()
            if self.options.speak_replies:
                self.speaker.offer(event.content, event.id)
