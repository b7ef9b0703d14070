"""Channel admin refusals do not reveal that a private channel exists (relay.md §4.3 item 2: "also
for a nonexistent channel, so private channels are not revealed"). A stranger who names a
private channel they cannot read gets, byte for byte, the OK a channel that does not exist gets
(the event id aside), whatever the tags say: 9000, 9001, 9002 (every tag set, archived or not),
9008, 9022, and the huddle kinds 48100/48103 naming another's channel. 9021 is the exception
the spec fixes (`invalid: channel not found` / `restricted: channel is private`, §4.5).
Real relay, raw socket frames."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable

import aiohttp
import orjson

from buzz.core.event import Event
from buzz.core.nip42 import build_auth_event
from tests.support.relay import Identity, RunningRelay
from tests.workspace.helpers import accepted, create_channel

Build = Callable[[str], tuple[int, str, list[list[str]]]]  # channel id → (kind, content, tags)


def _admin_cases(mallory: Identity, parent: str) -> dict[str, Build]:
    """`parent`: an open channel of mallory's, where the huddle kinds are posted."""

    def huddle(kind: int) -> Build:
        return lambda cid: (kind, json.dumps({"ephemeral_channel_id": cid}), [["h", parent]])

    def tagged(kind: int, *tags: list[str]) -> Build:
        return lambda cid: (kind, "", [["h", cid], *tags])

    return {
        "9000 put self": tagged(9000, ["p", mallory.pubkey]),
        "9000 put as admin": tagged(9000, ["p", mallory.pubkey], ["role", "admin"]),
        "9001 remove self": tagged(9001, ["p", mallory.pubkey]),
        "9002 name": tagged(9002, ["name", "mine now"]),
        "9002 topic": tagged(9002, ["topic", "hello"]),
        "9002 unarchive": tagged(9002, ["archived", "false"]),
        "9002 bad archived value": tagged(9002, ["archived", "maybe"]),
        "9002 bad visibility": tagged(9002, ["visibility", "secret"]),
        "9002 empty name": tagged(9002, ["name", "  "]),
        "9002 no metadata tag": tagged(9002),
        "9008 delete": tagged(9008),
        "9022 leave": tagged(9022),
        "48100 names it": huddle(48100),
        "48103 names it": huddle(48103),
    }


async def _ok_text(ws: aiohttp.ClientWebSocketResponse, event: Event) -> str:
    """The raw OK frame for `event`, its id replaced by a placeholder."""
    await ws.send_str(orjson.dumps(["EVENT", event.to_dict()]).decode())
    while True:
        msg = await ws.receive(10)
        assert msg.type == aiohttp.WSMsgType.TEXT, msg
        if orjson.loads(msg.data)[0] == "OK":
            assert event.id in msg.data
            return str(msg.data).replace(event.id, "<id>")


async def test_a_private_channel_is_refused_like_a_missing_one(
    sqlite_relay: RunningRelay, alice: Identity
) -> None:
    mallory = Identity.new()
    async with sqlite_relay.client(alice) as owner:
        private = await create_channel(owner, alice, "private", name="secret")
        archived = await create_channel(owner, alice, "private", ["ttl", "3600"], name="gone")
        await accepted(owner, Event.create(alice.secret, 9002, "", [["h", archived], ["archived", "true"]]))
    async with aiohttp.ClientSession() as session, session.ws_connect(sqlite_relay.url) as ws:
        challenge = orjson.loads((await ws.receive(10)).data)[1]
        auth = build_auth_event(mallory.secret, challenge, sqlite_relay.url)
        await ws.send_str(orjson.dumps(["AUTH", auth.to_dict()]).decode())
        assert orjson.loads((await ws.receive(10)).data)[2] is True
        parent = str(uuid.uuid4())
        made = Event.create(mallory.secret, 9007, "", [["h", parent], ["name", "mallory's"]])
        assert orjson.loads(await _ok_text(ws, made))[2] is True
        for name, build in _admin_cases(mallory, parent).items():
            answers = []
            for cid in (str(uuid.uuid4()), private, archived):
                kind, content, tags = build(cid)
                answers.append(await _ok_text(ws, Event.create(mallory.secret, kind, content, tags)))
            assert answers[0] == answers[1] == answers[2], (name, answers)
            assert orjson.loads(answers[0])[2] is False, (name, answers)

        join_missing = Event.create(mallory.secret, 9021, "", [["h", str(uuid.uuid4())]])
        join_private = Event.create(mallory.secret, 9021, "", [["h", private]])
        assert orjson.loads(await _ok_text(ws, join_missing))[3] == "invalid: channel not found"
        assert orjson.loads(await _ok_text(ws, join_private))[3] == "restricted: channel is private"
