"""THE HUDDLE SPEECH TEST, end to end on the real relay (huddle.md §10.2–§10.7, checklist 46).

Our eSpeak NG engine says a sentence into a WAV. Alice's client (`HuddleClient`, the code behind
`buzz huddle join --input`) streams it as Opus frames through the relay's audio socket, while her
own PocketSphinx pipeline transcribes her microphone and publishes kind 9, signed by her,
p-tagged to the agent member (a client transcribes only its own microphone, §10.4). Bob's client
listens and records Alice per peer; the voiced length of his recording shows the speech crossed
the relay. Then the agent replies in the channel and
Bob's client speaks the reply (into tts.wav).
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import numpy as np

from buzz.cli.huddle_cmd import KeySigner
from buzz.core.event import Event
from buzz.voice.client import HuddleClient, HuddleOptions, HuddleReport
from buzz.voice.espeak import EspeakNgEngine
from buzz.voice.sender import level_dbov
from buzz.voice.stt import PocketSphinxRecognizer
from buzz.voice.tts import TTS_SAMPLE_RATE, render_reply
from buzz.voice.wav import iter_frames, read_wav, read_wav_48k, write_wav
from tests.huddle.support import ChannelSpec, make_channel
from tests.support.relay import Identity, RunningRelay

# Chosen from trials: PocketSphinx hears it on a fresh decoder whether or not another decoder
# was created earlier in the process (that changes its results on synthetic speech).
SENTENCE = "good morning everyone"
REPLY = "i will book the room"


def words(text: str) -> set[str]:
    return set(text.split()) & set(SENTENCE.split()) - {"the"}


async def test_spoken_sentence_becomes_a_kind_9_for_the_agent(
    sqlite_relay: RunningRelay, alice: Identity, bob: Identity, carol: Identity, tmp_path: Path
) -> None:
    agent = carol
    cid = await make_channel(sqlite_relay, ChannelSpec(alice, members=[bob], bots=[agent]))
    espeak = EspeakNgEngine()
    write_wav(tmp_path / "say.wav", np.concatenate(list(render_reply(espeak, SENTENCE))), TTS_SAMPLE_RATE)
    sphinx = PocketSphinxRecognizer()

    async with sqlite_relay.client(bob) as bob_nostr:
        listener = HuddleClient(
            HuddleOptions(sqlite_relay.url, cid, record_dir=tmp_path / "bob"),
            KeySigner(bob.secret),
            bob_nostr,
            recognizer_factory=lambda: sphinx,
            tts_factory=lambda: espeak,
        )
        listening = asyncio.create_task(listener.run())
        try:
            heard = await _converse(sqlite_relay, cid, tmp_path, espeak, listener, listening, alice, agent)
            assert heard.frames_received > 50
        finally:
            listener.stop()
            await asyncio.wait([listening], timeout=10)

    assert heard.frames_received > 50 and heard.transcripts == []  # bob's silence published nothing
    spoken, rate = read_wav(tmp_path / "bob" / "tts.wav")
    assert rate == TTS_SAMPLE_RATE and len(spoken) > TTS_SAMPLE_RATE // 2 and np.abs(spoken).max() > 1000
    recorded = read_wav_48k(tmp_path / "bob" / "peer-1.wav")  # alice, as bob's client played her
    voiced = [level_dbov(w) > -40 for w in iter_frames(recorded)]
    assert sum(voiced) * 20 > 800, sum(voiced)  # most of her ~1.2 s sentence crossed the relay
    assert json.dumps(heard.recordings)  # the report is JSON-ready


async def _converse(
    running: RunningRelay,
    cid: str,
    tmp_path: Path,
    espeak: EspeakNgEngine,
    listener: HuddleClient,
    listening: asyncio.Task[HuddleReport],
    alice: Identity,
    agent: Identity,
) -> HuddleReport:
    """Alice speaks and leaves; the agent gets her transcript and replies; Bob's client speaks it."""
    async with running.client(alice) as alice_nostr, running.client(agent) as agent_nostr:
        inbox = await agent_nostr.subscribe([{"kinds": [9], "#h": [cid]}])
        await asyncio.wait_for(inbox.eose.wait(), 5)
        await asyncio.sleep(0.3)  # bob is seated first
        speaker = HuddleClient(
            HuddleOptions(running.url, cid, input_wav=tmp_path / "say.wav", leave_after_input=True),
            KeySigner(alice.secret),
            alice_nostr,
            recognizer_factory=PocketSphinxRecognizer,
            tts_factory=lambda: espeak,
        )
        said = await asyncio.wait_for(speaker.run(), 30)
        assert said.frames_sent > 50 and said.peer_index == 1

        message = await inbox.next(timeout=10)
        print(f"published transcript: {message.content!r}")
        assert (message.kind, message.pubkey) == (9, alice.pubkey)
        assert message.tag_values("h") == [cid] and message.tag_values("p") == [agent.pubkey]
        assert len(words(message.content)) >= 2, message.content
        assert said.transcripts and said.transcripts[0]["id"] == message.id

        reply = Event.create(agent.secret, 9, REPLY, [["h", cid]])
        assert (await agent_nostr.publish(reply)).accepted
        async with asyncio.timeout(15):
            while listener.speaker.spoken == 0:
                await asyncio.sleep(0.05)
        listener.stop()
        return await asyncio.wait_for(listening, 10)
