"""What of an agent's reply is read aloud (issue 13 items 4 and 6): no markers, URLs or code;
a reply cut by barge-in is marked in the client's transcript."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from buzz.voice.echo import EchoGate
from buzz.voice.replies import ReplySpeaker
from buzz.voice.speakable import CODE_NOTE, speakable


@pytest.mark.parametrize(
    ("reply", "spoken"),
    [
        ("pong [session=rules-1a2b turn=3 events=1]", "pong"),
        ("See https://github.com/buzz/buzz/pull/42 for details.", "See a link to github.com for details."),
        (
            "Docs: [the guide](https://docs.example.org/x?y=1).",
            "Docs: the guide (a link to docs.example.org).",
        ),
        ("Run this:\n```python\nprint('hi')\n```\nthen tell me.", f"Run this: {CODE_NOTE}. then tell me."),
        ("Set `BUZZ_RELAY_URL` first", "Set BUZZ_RELAY_URL first"),
        ("Use `buzz messages send --channel x` now", f"Use {CODE_NOTE} now"),
        ("## Plan\n- **one** thing\n- _two_ things", "Plan one thing two things"),
        ("from npub1qqqqqqqqqqqqqqqqqqqqqqqqqqqq and " + "ab" * 32, "from and"),
        ("[session=x turn=1]", ""),
    ],
)
def test_speakable(reply: str, spoken: str) -> None:
    assert speakable(reply) == spoken


class ToneEngine:
    """Two seconds of tone per sentence: long enough to be cut."""

    def synthesize(self, text: str) -> np.ndarray:
        return np.full(48000, 0.1, np.float32)


async def test_a_cut_reply_is_marked_and_a_finished_one_is_not() -> None:
    clock = {"ms": 0.0}
    played: list[int] = []
    speaker = ReplySpeaker(
        ToneEngine, lambda block: played.append(len(block)), EchoGate(), lambda: clock["ms"]
    )
    task = asyncio.create_task(speaker.run())
    try:
        speaker.offer("a long answer [session=s turn=1]", "e1")
        while not played:
            await asyncio.sleep(0.01)
        speaker.cancel()  # barge-in
        while speaker.cancelled == 0:
            await asyncio.sleep(0.01)
        speaker.offer("ok", "e2")
        while speaker.spoken == 0:
            await asyncio.sleep(0.05)
    finally:
        task.cancel()
    log = [r.to_json() for r in speaker.log]
    assert [(r["id"], r["cut"]) for r in log] == [("e1", True), ("e2", False)]
    assert log[0]["spoken"] == "a long answer" and log[0]["content"].endswith("turn=1]")
