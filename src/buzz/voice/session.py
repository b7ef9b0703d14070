"""Sans-I/O client side of one audio socket (huddle.md §3, §4.3, §5.5–§5.7, §6, §10.1–§10.3).

`HuddleSession` takes what the socket received and returns what to send; the shell that runs
`buzz huddle join` owns the WebSocket, the timeouts of §10.1 (5 s for `challenge`, 5 s after
`auth` for `joined`, 15 s overall), the capture pacing and the output (device or per-peer WAVs).
The host supplies `sign_auth(challenge) -> event`: this module never holds a private key.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from buzz.core.huddle_control import (
    Auth,
    Challenge,
    ErrorMessage,
    Joined,
    Leave,
    Left,
    Retry,
    Roster,
    parse_server_message,
    retry_advice,
)
from buzz.core.huddle_wire import CURRENT_PROTOCOL_VERSION, HuddleWireError
from buzz.voice.receiver import Decoder, PacketTap, Receiver, default_decoder
from buzz.voice.sender import Encoder, FrameSender


class Phase(enum.Enum):
    AWAIT_CHALLENGE = "await_challenge"
    AWAIT_JOINED = "await_joined"
    JOINED = "joined"
    CLOSED = "closed"


class JoinFailed(Exception):
    """The relay sent `error` (or broke protocol): the join on this socket is over (§4.3).

    `error` is None for a protocol violation; `retry` is the §4.3 advice, decided on `code`.
    """

    def __init__(self, error: ErrorMessage | None, detail: str = "") -> None:
        super().__init__(error.display if error is not None else detail)
        self.error = error
        self.retry = retry_advice(error) if error is not None else Retry.NEVER


def _default_encoder() -> Encoder:
    from buzz.voice.opus import OpusEncoder

    return OpusEncoder()


class HuddleSession:
    """One participant on one audio socket. Not thread-safe: call from the socket's task."""

    def __init__(
        self,
        sign_auth: Callable[[str], Mapping[str, Any]],
        *,
        parent_channel_id: str | None = None,
        protocol_version: int = CURRENT_PROTOCOL_VERSION,
        encoder_factory: Callable[[], Encoder] = _default_encoder,
        decoder_factory: Callable[[], Decoder] = default_decoder,
        tap: PacketTap | None = None,
    ) -> None:
        self.phase = Phase.AWAIT_CHALLENGE
        self.protocol_version = protocol_version
        self.receiver = Receiver(decoder_factory, protocol_version, tap)
        self._sign_auth = sign_auth
        self._parent = parent_channel_id
        self._encoder_factory = encoder_factory
        self._sender: FrameSender | None = None

    @property
    def roster(self) -> dict[int, str]:
        return self.receiver.roster.peers

    @property
    def peer_index(self) -> int | None:
        return self.receiver.roster.self_index

    def receive_text(self, text: str | bytes) -> list[str]:
        """Handle one text message; returns the text messages to send (the `auth`).

        Raises JoinFailed on `error` or a malformed message; the caller then closes the socket.
        """
        if self.phase is Phase.CLOSED:
            return []
        try:
            message = parse_server_message(text)
        except HuddleWireError as exc:
            self.phase = Phase.CLOSED
            raise JoinFailed(None, str(exc)) from None
        match message:
            case ErrorMessage():
                self.phase = Phase.CLOSED
                raise JoinFailed(message)
            case Challenge(challenge=challenge) if self.phase is Phase.AWAIT_CHALLENGE:
                self.phase = Phase.AWAIT_JOINED
                event = self._sign_auth(challenge)
                return [Auth(event, self.protocol_version, self._parent).to_text()]
            case Joined() if self.phase in (Phase.AWAIT_JOINED, Phase.JOINED):
                if self.phase is Phase.AWAIT_JOINED:
                    self.phase = Phase.JOINED
                    self._sender = FrameSender(self._encoder_factory())
                self.receiver.on_control(message)
            case Left() | Roster() if self.phase is Phase.JOINED:
                self.receiver.on_control(message)
            case _:
                pass  # unknown type, or out of order: ignored
        return []

    def receive_binary(self, message: bytes, now_ms: float) -> bool:
        """Handle one relay frame (§6.5); False when it was dropped."""
        return self.phase is Phase.JOINED and self.receiver.on_frame(message, now_ms)

    def capture(self, pcm_48k: np.ndarray) -> list[bytes]:
        """Encode one 20 ms capture frame (960 samples); the binary messages to send.

        Nothing is sent before `joined` or after leaving.
        """
        if self.phase is not Phase.JOINED or self._sender is None:
            return []
        return self._sender.frame(pcm_48k)

    def tick(self, now_ms: float) -> dict[int, np.ndarray]:
        """One 10 ms playout tick: 480 int16 samples per active remote peer."""
        return self.receiver.tick(now_ms) if self.phase is Phase.JOINED else {}

    def leave(self) -> str | None:
        """The `leave` text to send (then close); None when not joined."""
        if self.phase is not Phase.JOINED:
            self.phase = Phase.CLOSED
            return None
        self.phase = Phase.CLOSED
        return Leave().to_text()
