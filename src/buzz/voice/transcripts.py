"""Publishing the speaker's own transcripts as kind 9 messages (huddle.md §10.5).

For each transcript: drop it when its session has ended or been replaced; read the agents
present now; build kind 9 with `["h", <huddle channel>]` and one `["p", <agent>]` per agent; refuse
content carrying `nsec1` / `ncryptsec1` (case-insensitive, logged without the content); sign
with the speaker's key (the host's signer) and publish through normal ingest; back off after a
`rate-limited:` answer.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from buzz.core.event import Event
from buzz.voice.agents import AgentDirectory
from buzz.voice.stt import publishable_transcript

log = logging.getLogger(__name__)

STREAM_MESSAGE_KIND = 9
RATE_LIMIT_BACKOFF_S = 2.0


class Signer(Protocol):
    """The host's signer: the voice modules never hold a private key (§10.1)."""

    @property
    def pubkey(self) -> str: ...

    def sign(self, kind: int, content: str, tags: Sequence[Sequence[str]]) -> Event: ...


@dataclass(frozen=True, slots=True)
class PublishOutcome:
    """`accepted` and the relay's message (or why nothing was sent)."""

    accepted: bool
    message: str
    event: Event | None = None


Publish = Callable[[Event], Awaitable[tuple[bool, str]]]


@dataclass
class TranscriptPublisher:
    """Publishes transcripts of one session. `transcribe`: True always, False never, None auto
    (only while agents are present, §10.5 last paragraph)."""

    channel_id: str
    signer: Signer
    agents: AgentDirectory
    publish: Publish
    transcribe: bool | None = None
    session_id: int = 0
    outcomes: list[PublishOutcome] = field(default_factory=list)
    _not_before: float = 0.0

    async def submit(self, text: str, session_id: int) -> PublishOutcome:
        outcome = await self._submit(text, session_id)
        self.outcomes.append(outcome)
        return outcome

    async def _submit(self, text: str, session_id: int) -> PublishOutcome:
        if session_id != self.session_id:
            return PublishOutcome(False, "session ended or replaced")
        content = publishable_transcript(text)
        if content is None:
            return PublishOutcome(False, "refused by the egress guard or empty")
        agents = await self.agents.current()  # build time, not utterance start
        if self.transcribe is False or (self.transcribe is None and not agents):
            return PublishOutcome(False, "transcription is off")
        tags = [["h", self.channel_id], *(["p", agent] for agent in sorted(agents))]
        event = self.signer.sign(STREAM_MESSAGE_KIND, content, tags)
        wait = self._not_before - time.monotonic()
        if wait > 0:
            await asyncio.sleep(wait)
        accepted, message = await self.publish(event)
        if message.startswith("rate-limited:"):
            self._not_before = time.monotonic() + RATE_LIMIT_BACKOFF_S
        if not accepted:
            log.warning("transcript refused by the relay: %s", message)
        return PublishOutcome(accepted, message, event)
