#!/usr/bin/env python3
"""Speech-to-text benchmark (issue 13 item 2). Run by `make bench`, never by the tests.

A fixed corpus of 44 sentences a team would say to an agent (names, numbers, dates, commands)
is synthesised with eSpeak NG, cycling over four voices and three speeds, three times (eSpeak
seeds 1, 2, 3, the voice/speed cycle shifted each time: 132 utterances), and sent through the
client's real path: 48 kHz capture frames → `FrameSender` (Opus encode, v2 header) → relay
prefix → `Receiver` (jitter buffer, Opus decode, 10 ms playout) → `SpeechToText` (resample to
16 kHz, WebRTC VAD, utterance segmentation) → the engine. Audio time is simulated (no sleeping);
recognition time is measured on the wall clock.

Per engine it prints:
- WER: word error rate over the corpus (jiwer), after normalising both sides with Whisper's
  English text normaliser (package `whisper-normalizer`: case, punctuation, numbers, spellings),
  as Whisper's own evaluations do;
- RTF: recognition wall time / audio duration (lower is faster; < 1 is faster than real time);
- latency p50 / p95: from the end of the speech to the text, i.e. the VAD's silence flush
  (300 ms of audio) plus the recogniser's wall time.

Rows: `whisper`, the default engine as the huddle client runs it (tiny.en and base, the more
confident model's text wins; told the room's channel name and members' names: the bench models
a ten-person room, ROSTER and CHANNEL), `whisper-tiny` (tiny.en alone, same context),
`pocketsphinx`. Target: WER ≤ 0.15 for the default engine (whisper).
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import jiwer
import numpy as np
from whisper_normalizer.english import EnglishTextNormalizer

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from buzz.core.huddle_control import Joined, RosterEntry
from buzz.core.huddle_wire import FRAME_SAMPLES, relay_frame
from buzz.voice.engines import SttChoice, build_recognizer
from buzz.voice.espeak import EspeakNgEngine, set_random_seed
from buzz.voice.opus import OpusEncoder
from buzz.voice.pcm import SAMPLE_RATE
from buzz.voice.receiver import Receiver
from buzz.voice.sender import FrameSender
from buzz.voice.stt import Recognizer, SpeechToText
from buzz.voice.tts import TTS_SAMPLE_RATE
from buzz.voice.wav import iter_frames, resample

CORPUS = (
    "hey agent what is on the agenda for tomorrow",
    "please schedule the design review for monday morning",
    "remind me to call alice at three in the afternoon",
    "move the stand-up to nine thirty on wednesday",
    "what did bob say about the release yesterday",
    "create a ticket for the login bug and assign it to carol",
    "how many open issues do we have this week",
    "summarise the last ten messages in this channel",
    "book a meeting room for six people on friday",
    "send the quarterly report to the finance team",
    "what is the status of the database migration",
    "cancel my two o'clock meeting",
    "the deadline is the fifteenth of march",
    "add milk and coffee to the shopping list",
    "who is on call this weekend",
    "please translate this paragraph into french",
    "set a timer for twenty minutes",
    "the budget for next year is four hundred thousand",
    "invite david and emma to the planning session",
    "what time does the train to london leave",
    "mark the second task as done",
    "open a pull request for the new feature",
    "we need twelve more chairs for the workshop",
    "tell the team that the server is back online",
    "find the notes from our meeting last tuesday",
    "draft a reply to the customer about the refund",
    "the conference starts on the third of june",
    "how long will the build take",
    "post the agenda in the general channel",
    "what is the weather forecast for the weekend",
    "ask frank to review my changes before lunch",
    "the office will be closed on the first of january",
    "list all the tasks that are due today",
    "we shipped version two of the mobile app",
    "please check the logs for errors since midnight",
    "order pizza for the team at seven tonight",
    "who approved the expense report last month",
    "reschedule the interview with grace to thursday",
    "the new hire starts in two weeks",
    "stop the deployment right now",
    "how much did we spend on cloud servers in april",
    "write a short summary of the customer feedback",
    "start a huddle with the design team",
    "thank you that is all for today",
)
VOICES = ("en-us", "en-us+f3", "en-gb-x-rp", "en-us+m3")
SPEEDS_WPM = (150, 175, 200)
COMBO_SHIFT = 5  # per seed: the next voice and the next speed
SEEDS = (1, 2, 3)
LEAD_IN_S = 0.3
TAIL_S = 1.0  # long enough for the 300 ms silence flush
# Rows: the default engine as a huddle client runs it (tiny.en and base, told the room's names
# and channel), tiny.en alone (`--stt-engine whisper-tiny`), and the fallback engine. A
# `-no-context` suffix (e.g. `--engines whisper-tiny-no-context`) runs an engine without the room.
ENGINES = ("whisper", "whisper-tiny", "pocketsphinx")
# The room the bench models: what a huddle client reads from the relay at run time (the
# channel's members' display names, the channel's name; `buzz.voice.agents.room_vocabulary`).
# A ten-person team, three of whom the corpus never names; the channel name is not a corpus word.
ROSTER = ("Alice", "Bob", "Carol", "David", "Emma", "Frank", "Grace", "Henry", "Priya", "Omar")
CHANNEL = "product"
SPEAKER_INDEX = 1
SILENCE_FLUSH_MS = 300


@dataclass
class Utterance:
    sentence: str
    voice: str
    wpm: int
    pcm_48k: np.ndarray  # int16, lead-in + speech + tail
    speech_end_ms: float


@dataclass
class EngineResult:
    engine: str
    hypotheses: list[str] = field(default_factory=list)
    references: list[str] = field(default_factory=list)
    recognise_s: float = 0.0
    audio_s: float = 0.0
    latencies_ms: list[float] = field(default_factory=list)

    @property
    def wer(self) -> float:
        return float(jiwer.wer(self.references, self.hypotheses))

    @property
    def rtf(self) -> float:
        return self.recognise_s / self.audio_s if self.audio_s else 0.0

    def latency(self, q: float) -> float:
        return float(np.percentile(self.latencies_ms, q)) if self.latencies_ms else float("nan")


_normaliser = EnglishTextNormalizer()


def normalise(text: str) -> str:
    """Whisper's English normalisation: lowercase, no punctuation, numbers as digits, US spelling."""
    return str(_normaliser(text))


def synthesise(corpus: Sequence[str], seeds: Sequence[int] = (1,)) -> list[Utterance]:
    """Each sentence once per seed, with voice and speed cycling over VOICES × SPEEDS_WPM; each
    seed starts the cycle COMBO_SHIFT further on, so a sentence is heard in another voice and at
    another speed. eSpeak NG's random generator is seeded first: the same seeds give the same
    samples (unseeded, eSpeak varies its output from run to run and the WER moves by ±0.02)."""
    combos = list(itertools.product(VOICES, SPEEDS_WPM))
    utterances = []
    for round_, seed in enumerate(seeds):
        set_random_seed(seed)
        for i, sentence in enumerate(corpus):
            voice, wpm = combos[(i + COMBO_SHIFT * round_) % len(combos)]
            utterances.append(_synthesise_one(sentence, voice, wpm))
    return utterances


def _synthesise_one(sentence: str, voice: str, wpm: int) -> Utterance:
    speech = EspeakNgEngine(voice, wpm).synthesize(sentence)
    speech_48k = resample((np.clip(speech, -1, 1) * 32767).astype(np.int16), TTS_SAMPLE_RATE, SAMPLE_RATE)
    lead = np.zeros(int(LEAD_IN_S * SAMPLE_RATE), np.int16)
    tail = np.zeros(int(TAIL_S * SAMPLE_RATE), np.int16)
    pcm = np.concatenate([lead, speech_48k, tail])
    voiced = np.flatnonzero(np.abs(speech_48k) > 300)  # eSpeak ends on a little silence of its own
    last = int(voiced[-1]) + 1 if voiced.size else len(speech_48k)
    end_ms = (len(lead) + last) * 1000 / SAMPLE_RATE
    return Utterance(sentence, voice, wpm, pcm, end_ms)


def through_the_wire(pcm_48k: np.ndarray) -> list[tuple[float, np.ndarray]]:
    """Capture → Opus frames → relay prefix → receiver playout: (audio ms, 10 ms of PCM) pairs."""
    sender = FrameSender(OpusEncoder())
    receiver = Receiver(protocol_version=2)
    pubkey = "ab" * 32
    receiver.on_control(Joined(1, pubkey, SPEAKER_INDEX, (RosterEntry(SPEAKER_INDEX, pubkey),)))
    played: list[tuple[float, np.ndarray]] = []
    for i, frame in enumerate(iter_frames(pcm_48k, FRAME_SAMPLES)):
        now = 20.0 * i
        for message in sender.frame(frame):
            receiver.on_frame(relay_frame(SPEAKER_INDEX, message), now)
        for half in (0.0, 10.0):
            pcm = receiver.tick(now + half).get(SPEAKER_INDEX)  # an idle peer is not pulled (§10.3):
            played.append((now + half, pcm if pcm is not None else np.zeros(480, np.int16)))  # room tone
    return played


def run_engine(engine: str, recognizer: Recognizer, utterances: Sequence[Utterance]) -> EngineResult:
    result = EngineResult(engine)
    for utt in utterances:
        stt = SpeechToText()
        texts: list[str] = []
        flushed_ms = None
        for now, pcm in through_the_wire(utt.pcm_48k):
            for segment in stt.feed(pcm, now).utterances:
                started = time.perf_counter()
                texts.append(recognizer.transcribe(segment))
                elapsed = time.perf_counter() - started
                result.recognise_s += elapsed
                flushed_ms = max(0.0, now - utt.speech_end_ms) + elapsed * 1000
        for segment in stt.finish(len(utt.pcm_48k) * 1000 / SAMPLE_RATE).utterances:
            started = time.perf_counter()
            texts.append(recognizer.transcribe(segment))
            elapsed = time.perf_counter() - started
            result.recognise_s += elapsed
            flushed_ms = TAIL_S * 1000 + elapsed * 1000
        result.audio_s += (utt.speech_end_ms / 1000) - LEAD_IN_S
        if flushed_ms is not None:
            result.latencies_ms.append(flushed_ms)
        result.references.append(normalise(utt.sentence))
        result.hypotheses.append(normalise(" ".join(texts)))
    return result


def print_breakdown(result: EngineResult, utterances: Sequence[Utterance]) -> None:
    """WER of one engine per eSpeak voice and per speed."""
    groups: dict[str, list[int]] = {}
    for i, utt in enumerate(utterances):
        groups.setdefault(utt.voice, []).append(i)
        groups.setdefault(f"{utt.wpm} wpm", []).append(i)
    cells = []
    for name, idx in groups.items():
        wer = jiwer.wer([result.references[i] for i in idx], [result.hypotheses[i] for i in idx])
        cells.append(f"{name} {wer:.3f}")
    print(f"  {result.engine} by voice / speed: " + ", ".join(cells))


def print_table(results: Sequence[EngineResult], default: str) -> None:
    print(f"{'engine':<14}{'WER':>7}{'RTF':>7}{'latency p50':>14}{'latency p95':>14}{'utterances':>12}")
    for r in results:
        print(
            f"{r.engine:<14}{r.wer:>7.3f}{r.rtf:>7.3f}{r.latency(50):>11.0f} ms{r.latency(95):>11.0f} ms"
            f"{len(r.references):>12}"
        )
    best = next(r for r in results if r.engine == default)
    verdict = "met" if best.wer <= 0.15 else "NOT met"
    print(f"target WER ≤ 0.15 for the default engine ({default}): {verdict}")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--engines", default=",".join(ENGINES), help="comma list of engines to compare")
    parser.add_argument("--whisper-model", type=Path, default=None, help="faster-whisper model directory")
    parser.add_argument("--limit", type=int, default=len(CORPUS), help="use the first N sentences")
    parser.add_argument(
        "--seeds",
        default=",".join(map(str, SEEDS)),
        help="eSpeak NG seeds, comma list: one rendition of the corpus per seed (voices shifted)",
    )
    parser.add_argument("--show", action="store_true", help="print every reference and hypothesis")
    parser.add_argument("--json", type=Path, default=None, help="also write the results here")
    args = parser.parse_args(argv)
    seeds = tuple(int(x) for x in args.seeds.split(","))
    utterances = synthesise(CORPUS[: args.limit], seeds)
    print(
        f"stt bench: {args.limit} sentences × {len(seeds)} renditions (eSpeak seeds {args.seeds}) ="
        f" {len(utterances)} utterances, voices {', '.join(VOICES)}, {SPEEDS_WPM} wpm, Opus 32 kbit/s"
    )
    results = []
    for engine in args.engines.split(","):
        kind = engine.removesuffix("-no-context")
        whisper = kind.startswith("whisper")
        model = args.whisper_model if whisper else None
        recognizer = build_recognizer(SttChoice(kind, model, "en" if whisper else None))
        if engine == kind and hasattr(recognizer, "set_context"):
            recognizer.set_context(ROSTER, CHANNEL)
        warm: Callable[[np.ndarray], str] = recognizer.transcribe
        warm(np.zeros(16000, np.float32))  # first call pays one-time setup
        result = run_engine(engine, recognizer, utterances)
        results.append(result)
        if args.show:
            for ref, hyp in zip(result.references, result.hypotheses, strict=True):
                print(f"  [{engine}] {'ok ' if ref == hyp else 'ERR'} {ref!r} → {hyp!r}")
    print_table(results, ENGINES[0])
    for result in results:
        print_breakdown(result, utterances)
    if args.json:
        args.json.write_text(
            json.dumps(
                [
                    {
                        "engine": r.engine,
                        "wer": r.wer,
                        "rtf": r.rtf,
                        "p50_ms": r.latency(50),
                        "p95_ms": r.latency(95),
                    }
                    for r in results
                ],
                indent=2,
            )
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
