"""THE HUDDLE SPEECH TEST, end to end on the real relay (huddle.md §10, issue 13 "Done when").

1. eSpeak NG says a sentence into a WAV.
2. Alice (the agent's owner) runs the real CLI, `buzz huddle join --input say.wav
   --leave-after-input`: it streams the WAV as Opus frames into the room, and her own
   faster-whisper pipeline transcribes her microphone and publishes kind 9, signed by her,
   p-tagged to the agent (a `bot` member).
3. The real harness (`buzz agent run` in-process) with the example rules agent as its ACP
   subprocess answers the transcript in the channel ("heard: …" plus its
   `[session=… turn=…]` marker).
4. Bob's client, in the room all along, records Alice as he heard her and speaks the agent's
   reply (into tts.wav). Speech recognition of both recordings gives back the words: Alice's
   sentence, and the reply without its harness marker.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
from pathlib import Path

import numpy as np
import pytest
import soxr

from buzz.cli.huddle_cmd import KeySigner
from buzz.voice.client import HuddleClient, HuddleOptions
from buzz.voice.espeak import EspeakNgEngine, set_random_seed
from buzz.voice.tts import TTS_SAMPLE_RATE, render_reply
from buzz.voice.wav import read_wav, read_wav_48k, write_wav
from buzz.voice.whisper import WhisperRecognizer
from tests.agent.support import add_member, workspace
from tests.cli.helpers import buzz
from tests.huddle.support import until_seated
from tests.support.deadline import scaled
from tests.support.relay import Identity, RunningRelay

SENTENCE = "please book the design review for monday morning"


def words(text: str) -> list[str]:
    return re.sub(r"[^a-z ]+", " ", text.lower()).split()


def recognise(whisper: WhisperRecognizer, pcm: np.ndarray, rate: int) -> str:
    pcm16k = soxr.resample(pcm.astype(np.float32) / 32768.0, rate, 16000).astype(np.float32)
    return whisper.transcribe(pcm16k)


def overlap(heard: str, said: str) -> float:
    """Share of the said words that were heard."""
    said_words = words(said)
    return sum(w in set(words(heard)) for w in said_words) / len(said_words)


async def test_spoken_sentence_reaches_the_agent_and_its_reply_is_heard(
    sqlite_relay: RunningRelay,
    alice: Identity,
    bob: Identity,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    espeak: EspeakNgEngine,
    whisper: WhisperRecognizer,
) -> None:
    agent = Identity.new()
    set_random_seed(1)  # the same samples every run (eSpeak NG seeds itself from the clock)
    write_wav(tmp_path / "say.wav", np.concatenate(list(render_reply(espeak, SENTENCE))), TTS_SAMPLE_RATE)
    async with workspace(sqlite_relay, alice, agent, tmp_path, monkeypatch) as ws:
        await add_member(ws.owner_client, alice, ws.channel, bob.pubkey)
        async with ws.harness(), sqlite_relay.client(bob) as bob_nostr:
            listener = HuddleClient(
                HuddleOptions(
                    sqlite_relay.url, ws.channel, record_dir=tmp_path / "bob", voice_guidelines=False
                ),
                KeySigner(bob.secret),
                bob_nostr,
                recognizer_factory=WhisperRecognizer,
                tts_factory=lambda: espeak,
            )
            listening = asyncio.create_task(listener.run())
            try:
                # bob is seated before alice speaks: wait for his `joined`, not for a guessed time
                await until_seated(listener, listening)
                said = await buzz(
                    sqlite_relay.url,
                    alice,
                    "huddle",
                    "join",
                    "--channel",
                    ws.channel,
                    "--input",
                    str(tmp_path / "say.wav"),
                    "--leave-after-input",
                    "--no-speak",
                )
                assert said.code == 0, said.stderr
                report = json.loads(said.stdout)
                transcript = await ws.watcher.wait_for(
                    lambda e: e.kind == 9 and e.pubkey == alice.pubkey, what="alice's transcript"
                )
                print(f"published transcript: {transcript.content!r}")
                assert transcript.tag_values("h") == [ws.channel]
                assert transcript.tag_values("p") == [agent.pubkey]
                assert report["transcripts"][0]["id"] == transcript.id
                assert overlap(transcript.content, SENTENCE) >= 0.8, transcript.content

                reply = await ws.watcher.wait_for(
                    lambda e: bool(ws.watcher.replies_to(transcript, agent.pubkey)), what="the agent's reply"
                )
                reply = ws.watcher.replies_to(transcript, agent.pubkey)[0]
                assert "[session=" in reply.content  # the channel keeps the full text
                async with asyncio.timeout(scaled(30)):
                    while listener.speaker.spoken == 0:
                        await asyncio.sleep(0.05)
            finally:
                listener.stop()
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(listening, scaled(15))
    heard = listener.report
    assert heard.transcripts == []  # bob's silence published nothing
    assert heard.replies and heard.replies[0]["id"] == reply.id and not heard.replies[0]["cut"]
    assert "session" not in str(heard.replies[0]["spoken"])  # harness marker never read out

    spoken, rate = read_wav(tmp_path / "bob" / "tts.wav")
    recognised_reply = recognise(whisper, spoken, rate)
    print(f"bob heard the agent say: {recognised_reply!r}")
    reply_words = reply.content.split("[session=")[0]
    assert overlap(recognised_reply, reply_words) >= 0.7, (recognised_reply, reply_words)

    (alice_wav,) = sorted((tmp_path / "bob").glob("peer-*.wav"))  # one remote peer: alice
    recorded = read_wav_48k(alice_wav)
    recognised_alice = recognise(whisper, recorded, 48000)
    print(f"bob heard alice say: {recognised_alice!r}")
    assert overlap(recognised_alice, SENTENCE) >= 0.8, (recognised_alice, heard.frames_dropped)
