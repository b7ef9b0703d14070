"""`buzz huddle start | list | status | leave` on the real relay (issue 13 item 3, huddle.md §8.4–§8.5)."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Sequence

import orjson

from buzz.cli.huddle_cmd import KeySigner
from buzz.core.event import Event
from buzz.voice.client import HuddleClient, HuddleOptions
from buzz.voice.seat import state_dir
from tests.cli.helpers import buzz
from tests.huddle.support import ChannelSpec, join, make_channel, start_huddle, until_seated
from tests.support.deadline import scaled
from tests.support.relay import Identity, RunningRelay


async def until_joined_event(
    running: RunningRelay, reader: Identity, parent: str, who: Identity, kind: int = 48101
) -> None:
    """Wait (a hang bound: 30 s on an idle box, scaled) until the relay's 48101 (or `kind`) for `who` is stored in `parent`."""
    async with running.client(reader) as client:
        async with asyncio.timeout(scaled(30)):
            while not await client.query([{"kinds": [kind], "#h": [parent], "#p": [who.pubkey]}]):
                await asyncio.sleep(0.05)


class Silent:
    """A recogniser that hears nothing (this test is about seats, not speech), and keeps what
    the client told it of the room (`set_context`)."""

    def __init__(self) -> None:
        self.contexts: list[tuple[tuple[str, ...], str | None]] = []

    def transcribe(self, pcm_16k: object) -> str:
        return ""

    def set_context(self, names: Sequence[str] = (), channel: str | None = None) -> None:
        self.contexts.append((tuple(names), channel))


async def test_status_shows_the_peer_index_of_my_running_join(
    sqlite_relay: RunningRelay, alice: Identity, bob: Identity
) -> None:
    parent = await make_channel(sqlite_relay, ChannelSpec(alice, members=[bob]))
    huddle = await start_huddle(sqlite_relay, alice, parent)
    async with sqlite_relay.client(alice) as client:
        profile = Event.create(alice.secret, 0, '{"name":"alice","display_name":"Alice Liddell"}', [])
        assert (await client.publish(profile)).accepted
    alice_seat = await join(sqlite_relay, alice, huddle, parent=parent)  # peer 0: a raw socket
    assert alice_seat.joined is not None
    recognizer = Silent()
    async with sqlite_relay.client(bob) as bob_nostr:
        client = HuddleClient(
            HuddleOptions(sqlite_relay.url, huddle, parent_channel_id=parent, speak_replies=False),
            KeySigner(bob.secret),
            bob_nostr,
            recognizer_factory=lambda: recognizer,
        )
        running = asyncio.create_task(client.run())
        try:
            await until_seated(client, running)
            await until_joined_event(sqlite_relay, alice, parent, bob)
            status = await buzz(  # channel ids in any case, as every other command takes them
                sqlite_relay.url, bob, "huddle", "status", "--channel", huddle.upper(), "--parent", parent
            )
            assert status.code == 0, status.stderr
            body = json.loads(status.stdout)
            mine = client.report.peer_index
            assert mine == 1 and body["you"]["in_room"] is True
            assert body["you"]["peer_index"] == mine and body["you"]["protocol_version"] == 3
            assert body["codec"] == "opus/48000/1"
            indices = {p["pubkey"]: p["peer_index"] for p in body["participants"]}
            assert indices == {alice.pubkey: 0, bob.pubkey: 1}
            # alice has no `huddle join` running: her status knows no seat of hers
            other = json.loads(
                (
                    await buzz(
                        sqlite_relay.url, alice, "huddle", "status", "--channel", huddle, "--parent", parent
                    )
                ).stdout
            )
            assert other["you"]["in_room"] is False and other["you"]["peer_index"] is None
            # the recogniser was told the room's names and channel name (whisper's prompt)
            async with asyncio.timeout(scaled(30)):
                while not recognizer.contexts:
                    await asyncio.sleep(0.05)
            names, channel_name = recognizer.contexts[-1]
            assert "Alice Liddell" in names and channel_name
        finally:
            client.stop()
            await asyncio.wait_for(running, scaled(30))
    after = json.loads(
        (
            await buzz(sqlite_relay.url, bob, "huddle", "status", "--channel", huddle, "--parent", parent)
        ).stdout
    )
    assert after["you"]["in_room"] is False  # leaving removed the seat file
    assert not list(state_dir().glob("*.json"))
    await alice_seat.close()


async def test_start_list_status_and_end(
    sqlite_relay: RunningRelay, alice: Identity, bob: Identity, carol: Identity
) -> None:
    agent = carol
    parent = await make_channel(sqlite_relay, ChannelSpec(alice, members=[bob], bots=[agent]))
    started = await buzz(
        sqlite_relay.url, alice, "huddle", "start", "--channel", parent, "--agent", agent.pubkey
    )
    assert started.code == 0, started.stderr
    info = json.loads(started.stdout)
    huddle = info["huddle_channel_id"]
    assert info["parent_channel_id"] == parent and info["agents"] == [agent.pubkey]
    assert info["guidelines_event_id"] and info["started_event_id"]

    async with sqlite_relay.client(alice) as client:
        (guidelines,) = await client.query([{"kinds": [48106], "#h": [huddle]}])
        assert guidelines.tag_values("p") == [agent.pubkey]  # the invited agent is told (item 4)
        (members,) = await client.query([{"kinds": [39002], "#d": [huddle]}])
        assert ["p", agent.pubkey, "", "bot"] in [list(t[:4]) for t in members.tags]

    seat = await join(sqlite_relay, bob, huddle, parent=parent)  # a parent member is admitted (§3.6)
    assert seat.joined is not None and seat.joined["type"] == "joined"
    await until_joined_event(sqlite_relay, alice, parent, bob)  # 48101 is emitted after `joined`
    listed = json.loads((await buzz(sqlite_relay.url, bob, "huddle", "list")).stdout)["huddles"]
    assert [h["huddle_channel_id"] for h in listed] == [huddle]
    assert listed[0]["live"] and listed[0]["participants"] == [bob.pubkey]
    status = await buzz(sqlite_relay.url, bob, "huddle", "status", "--channel", huddle, "--parent", parent)
    assert status.code == 0, status.stderr
    body = json.loads(status.stdout)
    assert body["started_by"] == alice.pubkey and body["participants"] == [
        {"pubkey": bob.pubkey, "name": None, "peer_index": None}
    ]  # bob's seat is a raw socket here, not a `huddle join`: no seat file, no index
    assert body["you"] == {
        "pubkey": bob.pubkey,
        "in_room": False,
        "peer_index": None,
        "protocol_version": None,
        "joined_at": None,
    }

    refused = await buzz(sqlite_relay.url, alice, "huddle", "leave", "--channel", huddle, "--end")
    assert refused.code == 1 and "--parent" in json.loads(refused.stderr.splitlines()[-1])["message"]
    ended = await buzz(
        sqlite_relay.url, alice, "huddle", "leave", "--channel", huddle, "--parent", parent, "--end"
    )
    assert ended.code == 0, ended.stderr
    assert json.loads(ended.stdout)["already_ended"] is False
    again = await buzz(
        sqlite_relay.url, alice, "huddle", "leave", "--channel", huddle, "--parent", parent, "--end"
    )  # ending an ended huddle (the relay ends it when the room empties) is a no-op, not an error
    assert again.code == 0 and json.loads(again.stdout)["already_ended"] is True, again.stderr
    await seat.close()
    await until_joined_event(sqlite_relay, alice, parent, bob, kind=48102)  # bob's leave is stored
    assert json.loads((await buzz(sqlite_relay.url, bob, "huddle", "list")).stdout)["huddles"] == []
    everything = json.loads((await buzz(sqlite_relay.url, bob, "huddle", "list", "--all")).stdout)["huddles"]
    assert [h["live"] for h in everything] == [False]
    async with sqlite_relay.client(alice) as client:
        ends = await client.query([{"kinds": [48103], "#h": [parent]}])
    assert len(ends) == 1  # the starter's end; the last leaver's cleanup announces nothing again


async def test_a_second_start_reports_the_live_huddles_agents(
    sqlite_relay: RunningRelay, alice: Identity, bob: Identity, carol: Identity
) -> None:
    """Decision 107: `start` beside a live huddle names that huddle's agents (the huddle
    channel's bot members), never `[]`; to someone not yet let into the private huddle channel
    they are unknown (null), and once the audio join made them a member, the list."""
    url, agent = sqlite_relay.url, carol
    parent = await make_channel(sqlite_relay, ChannelSpec(alice, members=[bob], bots=[agent]))
    first = (await buzz(url, alice, "huddle", "start", "--channel", parent, "--agent", agent.pubkey)).json
    huddle = first["huddle_channel_id"]
    assert (first["started"], first["agents"]) == (True, [agent.pubkey])

    again = (await buzz(url, alice, "huddle", "start", "--channel", parent)).json
    assert (again["huddle_channel_id"], again["started"], again["agents"]) == (huddle, False, [agent.pubkey])
    outside = (await buzz(url, bob, "huddle", "start", "--channel", parent)).json
    assert (outside["huddle_channel_id"], outside["started"], outside["agents"]) == (huddle, False, None)

    seat = await join(sqlite_relay, bob, huddle, parent=parent)  # a parent member is added (§3.6)
    assert seat.joined is not None and seat.joined["type"] == "joined", seat.joined
    async with sqlite_relay.client(bob) as client, asyncio.timeout(scaled(30)):
        while not await client.query([{"kinds": [39002], "#d": [huddle], "#p": [bob.pubkey]}]):
            await asyncio.sleep(0.05)  # the member list is re-signed after the join commits
    inside = (await buzz(url, bob, "huddle", "start", "--channel", parent)).json
    assert (inside["huddle_channel_id"], inside["agents"]) == (huddle, [agent.pubkey])
    await seat.close()


async def test_start_refuses_bad_agent_keys_with_one_json_line(
    sqlite_relay: RunningRelay, alice: Identity
) -> None:
    parent = await make_channel(sqlite_relay, ChannelSpec(alice))
    bad = await buzz(sqlite_relay.url, alice, "huddle", "start", "--channel", parent, "--agent", "xyz")
    assert bad.code == 1 and "64 hex" in json.loads(bad.stderr.strip())["message"]
    nobody = "f" * 64  # 64 hex, but no point of the curve has this x: nobody holds the key
    bad = await buzz(sqlite_relay.url, alice, "huddle", "start", "--channel", parent, "--agent", nobody)
    assert bad.code == 1 and "not a secp256k1 public key" in json.loads(bad.stderr.strip())["message"]
    async with sqlite_relay.client(alice) as c:  # refused before anything was published
        assert await c.query([{"kinds": [48100], "#h": [parent]}]) == []


async def test_join_of_a_channel_that_does_not_exist_is_not_found_and_a_private_one_is_access(
    sqlite_relay: RunningRelay, alice: Identity, bob: Identity
) -> None:
    """The relay refuses both as "not a member"; only the missing channel is `not_found` (exit
    1), as every other command names it (newcomer finding)."""
    missing = str(uuid.uuid4())
    args = ["huddle", "join", "--channel", missing, "--duration", "1", "--quiet"]
    gone = await buzz(sqlite_relay.url, bob, *args)
    error = json.loads(gone.stderr.strip().splitlines()[-1])
    assert (gone.code, error["error"], error["message"]) == (1, "not_found", f"channel not found: {missing}")
    private = await make_channel(sqlite_relay, ChannelSpec(alice))  # bob is not a member
    args = ["huddle", "join", "--channel", private, "--duration", "1", "--quiet"]
    refused = await buzz(sqlite_relay.url, bob, *args)
    assert (refused.code, json.loads(refused.stderr.strip().splitlines()[-1])["error"]) == (3, "auth_error")


async def test_join_moves_a_start_that_lost_the_race_to_the_winner(
    sqlite_relay: RunningRelay, alice: Identity, bob: Identity
) -> None:
    """Decision 81: Alice's `huddle start` looked before Bob's 48100 was stored, and Bob's is
    the earlier (his clock ran a second behind), so Bob's wins; her `huddle join` ends hers
    (48103, archive) and sits her in Bob's."""
    parent = await make_channel(sqlite_relay, ChannelSpec(alice, members=[bob]))
    hers = (await buzz(sqlite_relay.url, alice, "huddle", "start", "--channel", parent)).json
    assert hers["started"] is True
    async with sqlite_relay.client(bob) as client:
        (her_start,) = await client.query([{"ids": [hers["started_event_id"]]}])
        his = str(uuid.uuid4())
        create = [["h", his], ["name", "bob's"], ["visibility", "private"], ["channel_type", "stream"],
                  ["ttl", "3600"]]  # fmt: skip
        assert (await client.publish(Event.create(bob.secret, 9007, "", create))).accepted
        content = orjson.dumps({"ephemeral_channel_id": his}).decode()
        early = Event.create(bob.secret, 48100, content, [["h", parent]], created_at=her_start.created_at - 1)
        assert (await client.publish(early)).accepted
        seats = await client.subscribe([{"kinds": [48101], "#h": [parent], "#p": [alice.pubkey]}])
        room = hers["huddle_channel_id"]
        args = ["huddle", "join", "--channel", room, "--parent", parent, "--duration", "1", "--quiet"]
        joined = asyncio.create_task(buzz(sqlite_relay.url, alice, *args))
        seat = await seats.next(timeout=scaled(60))
        assert orjson.loads(seat.content)["ephemeral_channel_id"] == his
        done = await joined
        assert done.code == 0, done.stderr
        ends = await client.query([{"kinds": [48103], "#h": [parent], "authors": [alice.pubkey]}])
    assert [orjson.loads(e.content)["ephemeral_channel_id"] for e in ends] == [hers["huddle_channel_id"]]


async def test_end_closes_the_seats_of_everyone_still_in_the_huddle(
    sqlite_relay: RunningRelay, alice: Identity, bob: Identity
) -> None:
    """`huddle leave --end` ends the huddle for everyone in it (README; decision 98): the relay
    closes Bob's seat with `room_ended`, and his running `huddle join` leaves long before its
    --duration with the report the README promises, `"ended": true`, exit 0 (issue 24 item 8,
    decision 126); `huddle status` no longer lists him."""
    parent = await make_channel(sqlite_relay, ChannelSpec(alice, members=[bob]))
    huddle = await start_huddle(sqlite_relay, alice, parent)
    stay = f"{scaled(55):.0f}"  # far longer than the end takes to reach the seat: it must end it
    args = ["huddle", "join", "--channel", huddle, "--parent", parent, "--duration", stay, "--quiet"]
    async with sqlite_relay.client(alice) as watcher:
        seats = await watcher.subscribe([{"kinds": [48101], "#h": [parent], "#p": [bob.pubkey]}])
        joined = asyncio.create_task(buzz(sqlite_relay.url, bob, *args, "--stt-engine", "whisper-tiny"))
        seated = asyncio.create_task(seats.next(timeout=float(stay)))
        await asyncio.wait({joined, seated}, return_when=asyncio.FIRST_COMPLETED)
        assert seated.done() and not joined.done(), joined.result().stderr if joined.done() else ""
    ended = await buzz(
        sqlite_relay.url, alice, "huddle", "leave", "--channel", huddle, "--parent", parent, "--end"
    )
    assert ended.code == 0 and json.loads(ended.stdout)["already_ended"] is False, ended.stderr
    done = await joined
    assert done.code == 0, done.stderr  # before decision 98: in the room until --duration
    report = json.loads(done.stdout)
    assert report["ended"] is True and report["peer_index"] is not None, report
    assert done.stderr == ""  # --quiet: no live lines, and no error
    await until_joined_event(sqlite_relay, alice, parent, bob, kind=48102)  # the seat's cleanup ran
    status = await buzz(sqlite_relay.url, bob, "huddle", "status", "--channel", huddle, "--parent", parent)
    assert status.code == 0, status.stderr
    body = json.loads(status.stdout)
    assert body["live"] is False and body["participants"] == []
    assert body["you"]["in_room"] is False
