"""Byte and JSON tables for buzz.core.huddle_wire and buzz.core.huddle_control (huddle.md §3, §4.2,
§5.5–§5.7, §6)."""

from __future__ import annotations

import orjson
import pytest

from buzz.core import huddle_control as hc
from buzz.core import huddle_wire as hw
from buzz.core.huddle_control import Auth, Challenge, Joined, Leave, Left, Retry, RosterEntry
from buzz.core.huddle_wire import FrameHeader, HuddleWireError, Ingress

A, B = "a" * 64, "b" * 64
UUID = "0b7d5c3e-8f1a-4c2b-9d3e-1a2b3c4d5e6f"

HEADERS = [
    # (header, wire hex) — the first row is the §6.1 example
    (FrameHeader(1, 960, -20, 0), "0001000003c0ec00"),
    (FrameHeader(0, 0, -127, 0), "0000000000008100"),
    (FrameHeader(65535, 0xFFFFFFFF, 0, 0x01), "ffffffffffff0001"),
    (FrameHeader(258, 0x01020304, -1, 0x00), "010201020304ff00"),
]


@pytest.mark.parametrize(("header", "wire"), HEADERS)
def test_header_pack_and_read(header: FrameHeader, wire: str) -> None:
    assert header.pack().hex() == wire
    assert FrameHeader.read(bytes.fromhex(wire) + b"\x99") == header


READS = [
    # (wire hex, seq, ts, level, flags, dtx): telemetry reading is lenient (§6.2 item 3)
    ("0001000003c0ec00", 1, 960, -20, 0x00, False),
    ("0001000003c00500", 1, 960, -127, 0x00, False),  # level +5 → -127
    ("0001000003c08000", 1, 960, -127, 0x00, False),  # level -128 → -127
    ("0001000003c0ecfe", 1, 960, -20, 0xFE, False),  # reserved bits kept, not DTX
    ("0001000003c0ecff", 1, 960, -20, 0xFF, True),
    ("0001000003c0ec01", 1, 960, -20, 0x01, True),
]


@pytest.mark.parametrize(("wire", "seq", "ts", "level", "flags", "dtx"), READS)
def test_header_read_is_lenient(wire: str, seq: int, ts: int, level: int, flags: int, dtx: bool) -> None:
    header = FrameHeader.read(bytes.fromhex(wire))
    assert header is not None
    assert (header.seq, header.ts_48k, header.level_dbov, header.flags, header.dtx) == (
        seq,
        ts,
        level,
        flags,
        dtx,
    )


@pytest.mark.parametrize("wire", ["", "00", "0001000003c0ec"])
def test_header_read_too_short(wire: str) -> None:
    assert FrameHeader.read(bytes.fromhex(wire)) is None


OUT_OF_RANGE = [
    FrameHeader(65536, 0),
    FrameHeader(-1, 0),
    FrameHeader(0, 2**32),
    FrameHeader(0, 0, 1),
    FrameHeader(0, 0, -128),
    FrameHeader(0, 0, 0, 256),
]


@pytest.mark.parametrize("header", OUT_OF_RANGE)
def test_header_pack_rejects_out_of_range(header: FrameHeader) -> None:
    with pytest.raises(ValueError):
        header.pack()


INGRESS = [
    # (length, version, verdict): size is the only drop reason (§6.2, checklist 4 and 27)
    (4097, 2, Ingress.TOO_LARGE),
    (4096, 2, Ingress.FORWARD),
    (9, 2, Ingress.FORWARD),
    (8, 2, Ingress.TOO_SHORT),
    (0, 2, Ingress.TOO_SHORT),
    (8, 3, Ingress.TOO_SHORT),
    (8, 1, Ingress.FORWARD),
    (1, 1, Ingress.FORWARD),
    (4097, 1, Ingress.TOO_LARGE),
]


@pytest.mark.parametrize(("length", "version", "verdict"), INGRESS)
def test_ingress_verdict(length: int, version: int, verdict: Ingress) -> None:
    assert hw.ingress_verdict(b"\x00" * length, version) is verdict


def test_relay_prefix_matches_spec_example() -> None:
    frame = hw.client_frame(FrameHeader(1, 960, -20, 0), b"\xaa\xbb")
    assert hw.relay_frame(3, frame).hex() == "03" + "0001000003c0ec00" + "aabb"
    with pytest.raises(ValueError):
        hw.relay_frame(255, frame)
    with pytest.raises(ValueError):
        hw.client_frame(FrameHeader(1, 960), b"")


RELAY_FRAMES = [
    # (message hex, version, expected (index, seq, payload hex) or None) — §6.5
    ("03" + "0001000003c0ec00", 2, None),  # 9 bytes: no payload
    ("03" + "0001000003c0ec00" + "aa", 2, (3, 1, "aa")),
    ("fe" + "0001000003c00501" + "aabb", 2, (254, 1, "aabb")),
    ("03", 1, None),
    ("03aa", 1, (3, None, "aa")),
]


@pytest.mark.parametrize(("wire", "version", "expected"), RELAY_FRAMES)
def test_parse_relay_frame(wire: str, version: int, expected: tuple[int, int | None, str] | None) -> None:
    frame = hw.parse_relay_frame(bytes.fromhex(wire), version)
    if expected is None:
        assert frame is None
        return
    assert frame is not None
    seq = frame.header.seq if frame.header else None
    assert (frame.peer_index, seq, frame.opus_packet.hex()) == expected


ERRORS = [
    # (message, exact JSON from the §4.2 table)
    (hc.AUTH_FAILED, '{"type":"error","message":"auth failed"}'),
    (hc.NOT_RELAY_MEMBER, '{"type":"error","message":"restricted: not a relay member"}'),
    (hc.NOT_A_MEMBER, '{"type":"error","message":"not a member"}'),
    (hc.HUDDLE_HAS_ENDED, '{"type":"error","message":"huddle has ended"}'),
    (
        hc.RELAY_DRAINING,
        '{"type":"error","code":"huddle_relay_draining","message":"relay is draining; reconnect"}',
    ),
    (hc.join_rejected(), '{"type":"error","code":"join_rejected","message":"huddle join rejected"}'),
    (
        hc.join_rejected("stale_generation"),
        '{"type":"error","code":"join_rejected","message":"huddle join rejected","fence_reason":"stale_generation"}',
    ),
    (
        hc.AUDIO_UNAVAILABLE,
        '{"type":"error","code":"huddle_audio_unavailable","message":"huddle audio unavailable in this deployment"}',
    ),
    (
        hc.unsupported_version(4),
        '{"type":"error","code":"unsupported_version",'
        '"message":"huddle audio protocol v4 not supported; relay max is v3","current_version":3}',
    ),
    (
        hc.OWNER_UNREACHABLE,
        '{"type":"error","code":"huddle_owner_unreachable","message":"could not reach the huddle owner"}',
    ),
    (hc.ROOM_FULL, '{"type":"error","code":"room_full","message":"room participant capacity reached"}'),
    (hc.ROOM_ENDED, '{"type":"error","code":"room_ended","message":"huddle has ended"}'),
    (
        hc.upgrade_required(2, 1),
        '{"type":"error","code":"upgrade_required",'
        '"message":"this huddle is using audio protocol v2; your client requested v1",'
        '"pinned_version":2,"requested_version":1}',
    ),
]


@pytest.mark.parametrize(("message", "expected"), ERRORS)
def test_error_messages_are_exact(message: hc.ErrorMessage, expected: str) -> None:
    assert orjson.loads(message.to_text()) == orjson.loads(expected)
    assert hc.parse_server_message(message.to_text()) == message


def test_fresh_challenges_are_64_hex_and_differ() -> None:
    first, second = Challenge.fresh(), Challenge.fresh()
    assert len(first.challenge) == 64
    assert first.challenge != second.challenge
    assert set(first.challenge) <= set("0123456789abcdef")


def test_control_messages_round_trip() -> None:
    roster = (RosterEntry(0, A), RosterEntry(3, B))
    joined = Joined(7, B, 3, roster)
    assert orjson.loads(joined.to_text()) == {
        "type": "joined",
        "revision": 7,
        "pubkey": B,
        "peer_index": 3,
        "peers": [{"pubkey": A, "peer_index": 0}, {"pubkey": B, "peer_index": 3}],
    }
    left = Left(8, B, 3)
    assert orjson.loads(left.to_text()) == {"type": "left", "revision": 8, "pubkey": B, "peer_index": 3}
    challenge = Challenge("ab" * 32)
    for message in (joined, left, challenge):
        assert hc.parse_server_message(message.to_text()) == message
    assert orjson.loads(Leave().to_text()) == {"type": "leave"}


EVENT = {"kind": 22242, "content": "", "tags": [["relay", "wss://r"], ["challenge", "ab"]]}
CLIENT_TEXTS = [
    # (text, expected) — None means "ignored" (§3.3, §5.7)
    (orjson.dumps({"type": "auth", "event": EVENT, "protocol_version": 2}), Auth(EVENT, 2)),
    (orjson.dumps({"type": "auth", "event": EVENT}), Auth(EVENT, 1)),  # absent → v1 (checklist 9)
    (orjson.dumps({"type": "auth", "event": EVENT, "protocol_version": 0}), Auth(EVENT, 0)),
    (
        orjson.dumps({"type": "auth", "event": EVENT, "protocol_version": 9, "parent_channel_id": UUID}),
        Auth(EVENT, 9, UUID),
    ),
    (orjson.dumps({"type": "auth", "event": EVENT, "parent_channel_id": None}), Auth(EVENT, 1)),
    (orjson.dumps({"type": "auth", "event": EVENT, "protocol_version": 256}), None),
    (orjson.dumps({"type": "auth", "event": EVENT, "protocol_version": True}), None),
    (orjson.dumps({"type": "auth", "event": EVENT, "protocol_version": "2"}), None),
    (orjson.dumps({"type": "auth", "event": EVENT, "parent_channel_id": "not-a-uuid"}), None),
    (orjson.dumps({"type": "auth", "event": "x"}), None),
    (orjson.dumps({"type": "auth"}), None),
    (orjson.dumps({"type": "hello"}), None),
    (orjson.dumps(["auth"]), None),
    (b"{not json", None),
    (orjson.dumps({"type": "leave"}), Leave()),
    (orjson.dumps({"type": "auth", "event": {"content": "x" * 8200}}), None),  # over 8192 bytes
]


@pytest.mark.parametrize(("text", "expected"), CLIENT_TEXTS)
def test_parse_client_message(text: bytes, expected: hc.ClientMessage | None) -> None:
    assert hc.parse_client_message(text) == expected
    assert hc.parse_client_message(text.decode()) == expected


@pytest.mark.parametrize(("text", "expected"), CLIENT_TEXTS)
def test_read_client_message_says_why_a_text_is_ignored(
    text: bytes, expected: hc.ClientMessage | None
) -> None:
    read = hc.read_client_message(text)
    if expected is not None:
        assert read == expected
        return
    assert isinstance(read, hc.Ignored) and read.reason.isascii() and read.reason, read
    assert hc.read_client_message(text.decode()) == read


def test_ignored_reasons_and_the_auth_timeout_close() -> None:
    reasons = {text: hc.read_client_message(text) for text in (b"{not json", b"[1]", b'{"type":"hello"}')}
    assert [r.reason for r in reasons.values()] == [  # type: ignore[union-attr]
        "text is not JSON",
        "text is not a JSON object",
        "type is neither auth nor leave",
    ]
    assert hc.read_client_message('{"type":"leave","x":"\ud800"}') == hc.Ignored("text is not valid Unicode")
    assert hc.read_client_message(b"x" * 8193) == hc.Ignored("text over 8192 bytes")
    assert hc.auth_timeout_close(5.0, 0, None) == (1008, "auth-required: no valid auth within 5 s")
    longest = hc.read_client_message(orjson.dumps({"type": "auth", "event": EVENT, "protocol_version": 300}))
    assert longest == hc.Ignored("auth: protocol_version is not an integer 0-255")
    code, reason = hc.auth_timeout_close(5.0, 999_999, longest.reason)  # fits whole
    assert reason == (
        "auth-required: no valid auth within 5 s; ignored 999999 messages, last: "
        "auth: protocol_version is not an integer 0-255"
    )
    code, reason = hc.auth_timeout_close(4.75, 10**40, longest.reason)  # cut to a close frame's room
    assert code == 1008 and len(reason.encode()) == 123


def test_parsers_never_choke_on_lone_surrogates() -> None:
    assert hc.parse_client_message('{"type":"leave","x":"\ud800"}') is None
    with pytest.raises(HuddleWireError):
        hc.parse_server_message('{"type":"challenge","challenge":"\ud800"}')


def test_auth_to_text_parses_back() -> None:
    auth = Auth(EVENT, 2, UUID)
    assert hc.parse_client_message(auth.to_text()) == auth


def _joined_obj(peers: list[dict[str, object]]) -> dict[str, object]:
    return {"type": "joined", "revision": 1, "pubkey": A, "peer_index": 0, "peers": peers}


BAD_SERVER_TEXTS = [
    b"[1]",
    b"{",
    orjson.dumps({"type": "challenge", "challenge": ""}),
    orjson.dumps({"type": "challenge", "challenge": "a" * 4097}),
    orjson.dumps({"type": "challenge"}),
    orjson.dumps(_joined_obj([{"pubkey": A, "peer_index": 0}, {"pubkey": B, "peer_index": 0}])),
    orjson.dumps(_joined_obj([{"pubkey": "A" * 64, "peer_index": 0}])),
    orjson.dumps(_joined_obj([{"pubkey": A, "peer_index": 255}])),
    orjson.dumps(_joined_obj([{"pubkey": A, "peer_index": i % 255} for i in range(257)])),
    orjson.dumps({"type": "left", "revision": -1, "pubkey": A, "peer_index": 0}),
    orjson.dumps({"type": "left", "revision": 1, "pubkey": A, "peer_index": True}),
    orjson.dumps({"type": "error", "message": "x" * 70000}),
]


@pytest.mark.parametrize("text", BAD_SERVER_TEXTS)
def test_parse_server_message_refuses(text: bytes) -> None:
    with pytest.raises(HuddleWireError):
        hc.parse_server_message(text)


def test_parse_server_message_edges() -> None:
    assert hc.parse_server_message(orjson.dumps({"type": "rosters", "peers": []})) is None
    roster = hc.parse_server_message(orjson.dumps({"type": "roster", "revision": 4, "peers": []}))
    assert roster == hc.Roster(4, ())
    assert hc.parse_server_message(orjson.dumps({"type": "challenge", "challenge": "a" * 4096})) is not None
    unsorted = hc.parse_server_message(
        orjson.dumps(_joined_obj([{"pubkey": B, "peer_index": 9}, {"pubkey": A, "peer_index": 0}]))
    )
    assert isinstance(unsorted, Joined)
    assert [e.peer_index for e in unsorted.peers] == [0, 9]
    long = hc.parse_server_message(orjson.dumps({"type": "error", "message": "y" * 1000}))
    assert isinstance(long, hc.ErrorMessage)
    assert long.display == "y" * 240


RETRIES = [
    (hc.RELAY_DRAINING, Retry.BACKOFF),
    (hc.OWNER_UNREACHABLE, Retry.BACKOFF),
    (hc.join_rejected("owner_mismatch"), Retry.BACKOFF),
    (hc.upgrade_required(1, 2), Retry.WITH_VERSION),
    (hc.unsupported_version(9), Retry.WITH_VERSION),
    (hc.ROOM_FULL, Retry.NEVER),
    (hc.ROOM_ENDED, Retry.NEVER),
    (hc.AUDIO_UNAVAILABLE, Retry.NEVER),
    (hc.AUTH_FAILED, Retry.NEVER),
    (hc.ErrorMessage("relay is draining; reconnect"), Retry.NEVER),  # message is never read
]


@pytest.mark.parametrize(("error", "advice"), RETRIES)
def test_retry_advice_branches_on_code(error: hc.ErrorMessage, advice: Retry) -> None:
    assert hc.retry_advice(error) is advice


@pytest.mark.parametrize(
    ("requested", "ok"), [(0, False), (1, True), (2, True), (3, True), (4, False), (255, False)]
)
def test_check_version(requested: int, ok: bool) -> None:
    error = hc.check_version(requested)
    assert (error is None) == ok
    if error is not None:
        assert error.code == "unsupported_version"
        assert error.current_version == 3


@pytest.mark.parametrize(
    ("new", "old", "newer"),
    [
        (8, 7, True),
        (7, 7, False),
        (6, 7, False),
        (0, 2**64 - 1, True),
        (2**64 - 1, 0, False),
        (2**63 + 7, 7, False),
    ],
)
def test_revision_is_newer(new: int, old: int, newer: bool) -> None:
    assert hc.revision_is_newer(new, old) is newer


def test_constants_match_the_spec_table() -> None:
    assert (hw.MAX_WEBSOCKET_MESSAGE_BYTES, hw.MAX_TEXT_FRAME_BYTES, hw.MAX_AUDIO_FRAME_BYTES) == (
        8192,
        8192,
        4096,
    )
    assert (hw.AUDIO_QUEUE_CAPACITY, hw.CONTROL_QUEUE_CAPACITY, hw.WS_CONTROL_QUEUE, hw.WS_AUDIO_QUEUE) == (
        8,
        32,
        8,
        16,
    )
    assert (hw.AUTH_TIMEOUT, hw.HEARTBEAT_INTERVAL, hw.MAX_MISSED_PONGS) == (5.0, 30.0, 3)
    assert (hw.MAX_PEERS_PER_ROOM, hw.MAX_PEER_INDEX, hw.CURRENT_PROTOCOL_VERSION) == (25, 254, 3)
    assert hw.HUDDLE_AUDIO_PATH.format(channel_id=UUID) == f"/huddle/{UUID}/audio"
