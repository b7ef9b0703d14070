"""HuddleSession clients against an in-memory relay made only of buzz.core huddle pieces.

This is the seam the aiohttp handler will fill: parse `auth`, check the version, admit into the
Room, broadcast `joined`/`left`, apply the ingress size rule and fan out `[index] + frame`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import pytest

from buzz.core import huddle_admission as ha
from buzz.core import huddle_control as hc
from buzz.core import huddle_wire as hw
from buzz.core.huddle_admission import Admitted, Room
from buzz.core.huddle_control import Auth, Challenge
from buzz.voice.session import HuddleSession, JoinFailed, Phase


@dataclass
class Socket:
    """The relay's end of one client socket: what it would write, in order."""

    texts: list[str] = field(default_factory=list)
    frames: list[bytes] = field(default_factory=list)
    peer: ha.Peer[Socket] | None = None
    version: int = 1


class MiniRelay:
    def __init__(self) -> None:
        self.room: Room[Socket] = Room()

    def connect(self) -> Socket:
        sock = Socket()
        sock.texts.append(Challenge.fresh().to_text())
        return sock

    def on_text(self, sock: Socket, text: str) -> None:
        message = hc.parse_client_message(text)
        if isinstance(message, hc.Leave) and sock.peer is not None:
            removed = self.room.remove(sock.peer.peer_id)
            assert removed is not None
            for peer in removed.recipients:
                peer.sink.texts.append(removed.left.to_text())
            return
        if not isinstance(message, Auth) or sock.peer is not None:
            return
        pubkey = message.event["pubkey"]
        if (error := hc.check_version(message.protocol_version)) is not None:
            sock.texts.append(error.to_text())
            return
        outcome = self.room.admit(pubkey, message.protocol_version, sock)
        if not isinstance(outcome, Admitted):
            sock.texts.append(outcome.error().to_text())
            return
        sock.peer, sock.version = outcome.peer, message.protocol_version
        for peer in outcome.recipients:
            peer.sink.texts.append(outcome.joined.to_text())

    def on_binary(self, sock: Socket, frame: bytes) -> None:
        if sock.peer is None or hw.ingress_verdict(frame, sock.version) is not hw.Ingress.FORWARD:
            return
        for peer in self.room.receivers(sock.peer.peer_id):
            peer.sink.frames.append(hw.relay_frame(sock.peer.peer_index, frame))


def signer(pubkey: str) -> Callable[[str], dict[str, object]]:
    return lambda challenge: {"kind": 22242, "pubkey": pubkey, "tags": [["challenge", challenge]]}


def pump(relay: MiniRelay, sock: Socket, client: HuddleSession) -> None:
    """Deliver the relay's pending texts to the client and the client's answers to the relay."""
    while sock.texts:
        for answer in client.receive_text(sock.texts.pop(0)):
            relay.on_text(sock, answer)


def join(relay: MiniRelay, pubkey: str, version: int = 2) -> tuple[Socket, HuddleSession]:
    sock, client = relay.connect(), HuddleSession(signer(pubkey), protocol_version=version)
    pump(relay, sock, client)
    return sock, client


def test_two_clients_hear_each_other_and_not_themselves() -> None:
    relay = MiniRelay()
    sock_a, alice = join(relay, "a" * 64)
    sock_b, bob = join(relay, "b" * 64)
    pump(relay, sock_a, alice)  # alice learns about bob
    assert alice.phase is bob.phase is Phase.JOINED
    assert (alice.peer_index, bob.peer_index) == (0, 1)
    assert alice.roster == bob.roster == {0: "a" * 64, 1: "b" * 64}

    t = np.arange(960 * 25) / 48000
    speech = (0.3 * np.sin(2 * np.pi * 440 * t)).astype(np.float32)
    for i in range(25):
        for message in bob.capture(speech[i * 960 : (i + 1) * 960]):
            relay.on_binary(sock_b, message)
    assert sock_b.frames == [] and len(sock_a.frames) == 25  # no echo
    heard = []
    for i, frame in enumerate(sock_a.frames):
        assert alice.receive_binary(frame, 20.0 * i)
        heard += [alice.tick(20.0 * i).get(1), alice.tick(20.0 * i + 10).get(1)]
    pcm = np.concatenate([h for h in heard if h is not None])
    assert float(np.sqrt(np.mean(pcm[-4800:].astype(np.float64) ** 2))) > 3000
    assert alice.receiver.speaking(500.0) == {1}

    relay.on_text(sock_b, bob.leave() or "")
    pump(relay, sock_a, alice)
    assert alice.roster == {0: "a" * 64}
    assert bob.capture(speech[:960]) == []


def test_version_mismatch_ends_the_join_with_retry_advice() -> None:
    relay = MiniRelay()
    join(relay, "a" * 64, version=2)
    sock = relay.connect()
    client = HuddleSession(signer("c" * 64), protocol_version=1)
    with pytest.raises(JoinFailed) as failed:
        pump(relay, sock, client)
    assert failed.value.error is not None and failed.value.error.pinned_version == 2
    assert failed.value.retry is hc.Retry.WITH_VERSION
    assert client.phase is Phase.CLOSED and client.capture(np.zeros(960, np.float32)) == []


def test_malformed_server_message_fails_the_join() -> None:
    client = HuddleSession(signer("a" * 64))
    with pytest.raises(JoinFailed) as failed:
        client.receive_text('{"type":"challenge","challenge":""}')
    assert failed.value.error is None and failed.value.retry is hc.Retry.NEVER


def test_frames_before_joined_are_ignored() -> None:
    client = HuddleSession(signer("a" * 64))
    assert (
        client.receive_text('{"type":"left","revision":1,"pubkey":"' + "b" * 64 + '","peer_index":1}') == []
    )
    assert not client.receive_binary(b"\x01" + b"\x00" * 9, 0.0)
    assert client.leave() is None
