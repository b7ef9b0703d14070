"""Telling the agents in a huddle that they are in a voice room (kind 48106, huddle.md §8.1,
§8.4 step 2; issue 13 item 4).

The 48106 event goes in the huddle channel (`["h", <channel>]`) with one `["p", <agent>]` per
agent it is meant for, so that agents whose harness only wakes on mentions receive it. It is
posted once with the agents present when the client joins, and again, tagged to the newcomers
only, whenever the agent list (the channel's `bot` members) gains someone. An agent added while
the huddle runs therefore gets the guidelines before it can be asked anything.

One client per room does this: the human seat with the lowest `peer_index` (every client sees
the same roster, so they agree without talking). A guideline post that fails is retried at the
next check.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Collection

from buzz.core.event import Event
from buzz.voice.agents import AgentDirectory
from buzz.voice.transcripts import Signer

log = logging.getLogger(__name__)

VOICE_GUIDELINES_KIND = 48106
VOICE_GUIDELINES = (
    "You are in a live voice huddle: your replies in this channel are read aloud to the people in "
    "the room, and what they say reaches you as transcripts, which may contain recognition errors. "
    "Answer briefly, in one to three plain spoken sentences. No markdown, no lists, no tables, no "
    "code blocks, no URLs and no emoji; say numbers, dates and names the way a person would say "
    "them. If something needs code or a link, say that you will post it in the channel."
)

Publish = Callable[[Event], Awaitable[tuple[bool, str]]]


class GuidelinesNotifier:
    """Posts 48106 to the agents of one huddle channel that have not been told yet."""

    def __init__(
        self,
        channel_id: str,
        signer: Signer,
        agents: AgentDirectory,
        publish: Publish,
        text: str = VOICE_GUIDELINES,
    ) -> None:
        self.channel_id = channel_id
        self.signer = signer
        self.agents = agents
        self.publish = publish
        self.text = text
        self.told: set[str] = set()
        self.posted: list[Event] = []
        self._posted_once = False

    async def check(self, agents: Collection[str] | None = None) -> Event | None:
        """Post 48106 p-tagged to the agents not told yet (or, the first time, untagged when no
        agent is present, for agents that read the channel later). Returns the posted event."""
        present = set(await self.agents.current() if agents is None else agents)
        new = sorted(present - self.told)
        if not new and self._posted_once:
            return None
        tags = [["h", self.channel_id], *(["p", agent] for agent in new)]
        event = self.signer.sign(VOICE_GUIDELINES_KIND, self.text, tags)
        accepted, message = await self.publish(event)
        if not accepted:
            log.warning("voice guidelines refused by the relay: %s", message)
            return None
        self._posted_once = True
        self.told.update(new)
        self.posted.append(event)
        return event


def i_post_guidelines(roster: dict[int, str], my_index: int | None, agents: Collection[str]) -> bool:
    """Whether this client is the room's guideline poster: the lowest index held by a human."""
    humans = [index for index, pubkey in roster.items() if pubkey not in agents]
    return my_index is not None and bool(humans) and min(humans) == my_index
