"""Browser huddle (issue 12, item 5): Chromium's fake microphone plays an eSpeak sentence; the
Python voice client in the same room records the browser (speech recognition finds the words)
and speaks back (the page decodes its frames)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import numpy as np
import pytest

from buzz.cli.huddle_cmd import KeySigner
from buzz.core.event import Event
from buzz.voice.client import HuddleClient, HuddleOptions
from buzz.voice.espeak import EspeakNgEngine
from buzz.voice.sender import level_dbov
from buzz.voice.stt import PocketSphinxRecognizer
from buzz.voice.tts import TTS_SAMPLE_RATE, render_reply
from buzz.voice.wav import iter_frames, read_wav_48k, resample, write_wav
from tests.agent.support import add_member, create_channel, set_profile
from tests.support.relay import Identity, RunningRelay
from tests.web.browser import assert_all_passed, require_browser, run_scenario

SENTENCE = "good morning everyone"
BOB_SAYS = "i will book the room"


def _say(engine: EspeakNgEngine, text: str, path: Path, repeats: int) -> None:
    """A 48 kHz 16-bit WAV: `repeats` × (half a second of silence, the sentence)."""
    speech = np.concatenate(list(render_reply(engine, text)))
    gap = np.zeros(TTS_SAMPLE_RATE // 2, dtype=speech.dtype)
    pcm = np.concatenate([gap, speech] * repeats)
    write_wav(path, resample(pcm, TTS_SAMPLE_RATE, 48000), 48000)


@pytest.mark.timeout(240)
async def test_browser_and_python_client_hear_each_other(
    sqlite_relay: RunningRelay, alice: Identity, bob: Identity, tmp_path: Path
) -> None:
    require_browser()
    engine = EspeakNgEngine()
    _say(engine, SENTENCE, tmp_path / "browser.wav", repeats=40)  # longer than the whole call
    _say(engine, BOB_SAYS, tmp_path / "bob.wav", repeats=10)
    async with sqlite_relay.client(alice) as owner:
        await set_profile(owner, alice, "Alice")
        channel = await create_channel(owner, alice, "standup", "private")
        await add_member(owner, alice, channel, bob.pubkey)
        for text in ("Standup in the huddle in five minutes.", "Agenda: the web client, then huddles."):
            assert (await owner.publish(Event.create(alice.secret, 9, text, [["h", channel]]))).accepted

    async with sqlite_relay.client(bob) as bob_nostr:
        await set_profile(bob_nostr, bob, "Bob")
        seats = await bob_nostr.subscribe([{"kinds": [48101], "#h": [channel]}])
        browser = asyncio.create_task(
            run_scenario(
                "huddle",
                {
                    "url": sqlite_relay.http_url + "/",
                    "secret": alice.secret,
                    "wav": str(tmp_path / "browser.wav"),
                },
                timeout=200,
            )
        )
        async with asyncio.timeout(90):  # the browser is seated: 48101 names alice
            while (await seats.next(timeout=90)).tag_values("p") != [alice.pubkey]:
                pass
        listener = HuddleClient(
            HuddleOptions(
                sqlite_relay.url,
                channel,
                input_wav=tmp_path / "bob.wav",
                record_dir=tmp_path / "bob",
                transcribe=False,
                speak_replies=False,
                leave_after_input=True,
            ),
            KeySigner(bob.secret),
            bob_nostr,
        )
        heard = await asyncio.wait_for(listener.run(), 90)
        report = await browser

    assert_all_passed(
        report,
        [
            "join: the roster and the channel header show me, then the Python client",
            "the Python client’s speech is decoded here with a speaking indicator",
            "mute and leave",
        ],
    )
    [recording] = sorted((tmp_path / "bob").glob("peer-*.wav"))  # the browser, as bob heard it
    pcm = read_wav_48k(recording)
    voiced = sum(level_dbov(w) > -40 for w in iter_frames(pcm))
    assert heard.frames_sent > 200 and report["numbers"]["framesSent"] > 200
    assert voiced * 20 > 800, voiced  # most of a ~1.2 s sentence's voice crossed the relay
    text = PocketSphinxRecognizer().transcribe(resample(pcm, 48000, 16000))
    print(
        f"bob heard the browser say: {text!r}; voiced {voiced * 20} ms; bob received {heard.frames_received}"
    )
    assert voiced * 20 > 800, voiced  # most of a ~1.2 s sentence's voice crossed the relay
    assert set(text.split()) & set(SENTENCE.split()), text
