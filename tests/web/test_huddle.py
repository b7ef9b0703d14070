"""Browser huddles (issue 12, item 5) with the Python voice client in the same room.

The page starts the huddle the way `buzz huddle start` does (huddle.md §8.4: its own private
TTL channel, 48106, the agent added as `bot`, 48100 in the parent; compared event for event
with the CLI's below). Chromium's fake microphone plays an eSpeak sentence; Bob's Python client
joins through the parent link, records the page (speech recognition finds the words) and
speaks; the page decodes Bob with a speaking indicator, shows Bob's transcript and the agent's
reply as captions and speaks the reply with speechSynthesis. Then a huddle Bob starts with the
CLI is joined from the page.

Nothing here waits on a fixed duration: each side waits for the other's steps (LiveScenario),
and Bob stays until the page has seen everything and his recording of the page holds its words.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import numpy as np
import orjson
import pytest

from buzz.cli.huddle_cmd import KeySigner
from buzz.core.event import Event
from buzz.voice.client import HuddleClient, HuddleOptions
from buzz.voice.espeak import EspeakNgEngine
from buzz.voice.sender import level_dbov
from buzz.voice.stt import PocketSphinxRecognizer
from buzz.voice.tts import TTS_SAMPLE_RATE, render_reply
from buzz.voice.wav import iter_frames, resample, write_wav
from tests.agent.support import add_member, create_channel, set_profile
from tests.cli.helpers import buzz
from tests.support.deadline import scaled
from tests.support.relay import Identity, RunningRelay
from tests.web.browser import LiveScenario, assert_all_passed, require_browser

SENTENCE = "good morning everyone"
BOB_SAYS = "i will book the room"
AGENT_REPLY = "Booked: the small room is yours at ten."
SETUP_KINDS = (9007, 48106, 9000, 48100)


def _say(engine: EspeakNgEngine, text: str, path: Path, repeats: int) -> None:
    """A 48 kHz 16-bit WAV: `repeats` × (half a second of silence, the sentence)."""
    speech = np.concatenate(list(render_reply(engine, text)))
    gap = np.zeros(TTS_SAMPLE_RATE // 2, dtype=speech.dtype)
    pcm = np.concatenate([gap, speech] * repeats)
    write_wav(path, resample(pcm, TTS_SAMPLE_RATE, 48000), 48000)


def _recorded(directory: Path) -> np.ndarray:
    """What Bob has recorded of the page so far (the WAV grows while he is in the room)."""
    files = sorted(directory.glob("peer-*.wav"))
    if not files:
        return np.zeros(0, np.int16)
    data = files[0].read_bytes()[44:]
    return np.frombuffer(data[: len(data) - len(data) % 2], "<i2").copy()


def _words(pcm: np.ndarray, recognizer: PocketSphinxRecognizer) -> set[str]:
    return set(recognizer.transcribe(resample(pcm, 48000, 16000)).split())


async def _hears_the_sentence(directory: Path, recognizer: PocketSphinxRecognizer) -> str:
    """Wait until Bob's recording of the page, recognised, holds a word of SENTENCE; as more
    audio arrives, try again (one more sentence's worth of voiced audio each time)."""
    tried_at = 0
    while True:
        pcm = _recorded(directory)
        voiced = sum(level_dbov(w) > -40 for w in iter_frames(pcm)) if len(pcm) else 0
        if voiced > tried_at:
            tried_at = voiced + 50  # the next try once another second of voice came in
            text = await asyncio.to_thread(lambda p=pcm: " ".join(sorted(_words(p, recognizer))))
            if set(text.split()) & set(SENTENCE.split()):
                return text
        await asyncio.sleep(0.5)  # a poll, not a deadline: audio keeps coming until Bob leaves


def _setup_events(found: list[Event], room: str, parent: str) -> list[tuple[int, list[list[str]], str]]:
    """The §8.4 events of one huddle start, ids replaced by placeholders, in step order."""

    def plain(text: str) -> str:
        return text.replace(room, "<room>").replace(parent, "<parent>")

    ours = [e for e in found if e.first_tag("h") == room or room in e.content]
    (create,) = [e for e in ours if e.kind == 9007]
    # The starter's own events: the relay's 9000s seating parent members (§3.6 item 3c) are not.
    mine = [e for e in ours if e.kind in SETUP_KINDS and e.pubkey == create.pubkey]
    mine.sort(key=lambda e: SETUP_KINDS.index(e.kind))
    return [(e.kind, [[plain(v) for v in t] for t in e.tags], plain(e.content)) for e in mine]


@pytest.mark.timeout(420)
async def test_browser_huddles_with_the_python_client(
    sqlite_relay: RunningRelay, alice: Identity, bob: Identity, tmp_path: Path
) -> None:
    require_browser()
    agent = Identity.new()
    engine = EspeakNgEngine()
    _say(engine, SENTENCE, tmp_path / "browser.wav", repeats=60)  # Chromium loops it anyway
    _say(engine, BOB_SAYS, tmp_path / "bob.wav", repeats=3)
    async with sqlite_relay.client(alice) as owner:
        await set_profile(owner, alice, "Alice")
        channel = await create_channel(owner, alice, "standup", "private")
        await add_member(owner, alice, channel, bob.pubkey)
        await add_member(owner, alice, channel, agent.pubkey, role="bot")
        for text in ("Standup in the huddle in five minutes.", "Agenda: the web client, then huddles."):
            assert (await owner.publish(Event.create(alice.secret, 9, text, [["h", channel]]))).accepted
    async with sqlite_relay.client(agent) as c:
        await set_profile(c, agent, "Scribe")

    recognizer = PocketSphinxRecognizer()
    async with sqlite_relay.client(bob) as bob_nostr, sqlite_relay.client(agent) as agent_nostr:
        await set_profile(bob_nostr, bob, "Bob")
        starts = await bob_nostr.subscribe([{"kinds": [48100], "#h": [channel]}])
        page = await LiveScenario.start(
            "huddle",
            {
                "url": sqlite_relay.http_url + "/",
                "secret": alice.secret,
                "wav": str(tmp_path / "browser.wav"),
            },
        )
        try:
            room = (await page.reached("started", timeout=180))["room"]
            started = await starts.next(timeout=30)
            assert started.pubkey == alice.pubkey
            assert orjson.loads(started.content) == {"ephemeral_channel_id": room}

            # The agent answers Bob's first transcript in its thread, as an agent harness does.
            transcripts = await agent_nostr.subscribe([{"kinds": [9], "#h": [room], "authors": [bob.pubkey]}])
            bob_client = HuddleClient(
                HuddleOptions(
                    sqlite_relay.url,
                    room,
                    parent_channel_id=channel,
                    input_wav=tmp_path / "bob.wav",
                    record_dir=tmp_path / "bob",
                    transcribe=True,
                    speak_replies=False,
                    voice_guidelines=False,  # the start's 48106 is what is compared below
                ),
                KeySigner(bob.secret),
                bob_nostr,
            )
            bob_in_room = asyncio.create_task(bob_client.run())
            first = await transcripts.next(timeout=180)
            reply = Event.create(agent.secret, 9, AGENT_REPLY, [["h", room], ["e", first.id, "", "reply"]])
            assert (await agent_nostr.publish(reply)).accepted
            page.go("replied", transcript=first.content, reply=AGENT_REPLY)

            # Bob leaves once the page has heard him and his recording of the page has its words.
            heard_text = await asyncio.wait_for(
                _hears_the_sentence(tmp_path / "bob", recognizer), scaled(240)
            )
            await page.reached("heard", timeout=240)
            bob_client.stop()
            heard = await asyncio.wait_for(bob_in_room, scaled(60))
            await page.reached("left", timeout=180)

            # Part 2: Bob starts one with the CLI and sits in it; the page joins it.
            cli = await buzz(
                sqlite_relay.url, bob, "huddle", "start", "--channel", channel, "--agent", agent.pubkey
            )
            assert cli.code == 0, cli.stderr
            cli_room = json.loads(cli.stdout)["huddle_channel_id"]
            bob_again = HuddleClient(
                HuddleOptions(
                    sqlite_relay.url,
                    cli_room,
                    parent_channel_id=channel,
                    transcribe=False,
                    speak_replies=False,
                    voice_guidelines=False,
                ),
                KeySigner(bob.secret),
                bob_nostr,
            )
            bob_seated = asyncio.create_task(bob_again.run())
            page.go("cli-started", room=cli_room)
            await page.reached("joined-cli", timeout=180)
            bob_again.stop()
            await asyncio.wait_for(bob_seated, scaled(60))
            report = await page.report(timeout=180)
        finally:
            await page.abort()

    assert_all_passed(
        report,
        [
            "start: its own channel with the agent invited, and I am seated",
            "the Python client joins: the roster and the channel header show both",
            "the Python client’s speech is decoded here with a speaking indicator",
            "the Python client’s speech plays: the level after the AudioWorklet is not silent",
            "captions: Bob’s transcript and the agent’s reply",
            "the agent’s reply is spoken with speechSynthesis, Bob’s words are not",
            "mute and leave; the huddle ends with its last person",
            'a huddle started with the CLI is joined with "Join huddle"',
            "leave the CLI’s huddle",
        ],
    )
    print(f"bob heard the browser say: {heard_text!r}; bob received {heard.frames_received} frames")
    print(f"the page's playback peak while Bob spoke: {report['numbers']['playbackPeakDbov']} dBov")
    assert heard.frames_sent > 0 and report["numbers"]["framesSent"] > 0
    assert report["numbers"]["decodedFromBob"] > 0
    # Bob's espeak voice reached the speakers: louder than the speaking threshold (-45 dBov)
    # after the worklet, where digital silence is -127.
    assert report["numbers"]["playbackPeakDbov"] > -45
    assert f"Bob: {first.content}" in report["captions"] and f"Scribe: {AGENT_REPLY}" in report["captions"]
    assert report["spoken"] == [AGENT_REPLY]

    async with sqlite_relay.client(alice) as reader:
        found = await reader.query([{"kinds": list(SETUP_KINDS), "#h": [room, cli_room, channel]}])
        ends = await reader.query([{"kinds": [48103], "#h": [channel]}])
    # The page's huddle start is the CLI's, event for event (same kinds, tags, contents, order).
    from_page = _setup_events(found, room, channel)
    from_cli = _setup_events(found, cli_room, channel)
    assert [k for k, _, _ in from_page] == list(SETUP_KINDS), from_page
    assert from_page == from_cli
    # The relay ended the page's huddle when its last participant (the page) left.
    assert [orjson.loads(e.content)["ephemeral_channel_id"] for e in ends if room in e.content] == [room]
