"""What a huddle participant shows of the room (huddle.md §10.3): roster changes and who is
speaking as plain lines, or the whole room as a `RoomSnapshot` for a live panel, with members'
display names (kind 0) looked up once each. A part of `HuddleClient`, whose state it reads."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

import orjson

from buzz.core.event import Event
from buzz.core.huddle_wire import SPEAKER_TICK_MS

if TYPE_CHECKING:
    from buzz.client import RelayClient
    from buzz.voice.agents import AgentDirectory
    from buzz.voice.client import HuddleOptions
    from buzz.voice.session import HuddleSession

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class SeatView:
    """One roster entry as shown: peer index, pubkey, whether it is you, an agent, speaking."""

    peer_index: int
    pubkey: str
    you: bool
    agent: bool
    speaking: bool
    name: str = ""  # display name (kind 0) when known


@dataclass(frozen=True, slots=True)
class RoomSnapshot:
    """The room as this client sees it at one instant (for a live display)."""

    channel_id: str
    peer_index: int | None
    protocol_version: int
    seats: tuple[SeatView, ...]


def _who(pubkey: str, agents: frozenset[str], names: Mapping[str, str] | None = None) -> str:
    """A peer for the live lines: its display name (kind 0) when known, else a hex prefix."""
    name = (names or {}).get(pubkey) or f"{pubkey[:12]}…"
    return f"{name}{' (agent)' if pubkey in agents else ''}"


def profile_name(content: str) -> str:
    """`display_name`, else `name`, of a kind 0 content; "" when it has neither or is not JSON."""
    try:
        meta = orjson.loads(content)
    except orjson.JSONDecodeError:
        return ""
    if not isinstance(meta, dict):
        return ""
    name = meta.get("display_name") or meta.get("name") or ""
    return " ".join(name.split())[:64] if isinstance(name, str) else ""


class RoomView:
    """`HuddleClient`'s display of the room (state in `HuddleClient`)."""

    options: HuddleOptions
    session: HuddleSession
    agents: AgentDirectory
    nostr: RelayClient
    _names: dict[str, str]
    now_ms: Callable[[], float]

    async def _show_room(self, show: Callable[[str], None]) -> None:
        """Roster changes and who is speaking, as plain lines, checked every 500 ms (§10.3)."""
        roster: dict[int, str] = {}
        speaking: set[int] = set()
        names = self._names
        waited = 0
        while True:
            now_roster = dict(self.session.roster)
            joining = {now_roster[i] for i in now_roster.keys() - roster.keys()}
            for pubkey in joining:  # a peer without a profile when last seen may have one now
                if names.get(pubkey) == "":
                    del names[pubkey]
            if not await self._look_up_names(names, set(now_roster.values())) and joining and waited < 4:
                waited += 1  # the relay did not answer: hold the lines a few ticks for the names
                await asyncio.sleep(SPEAKER_TICK_MS / 1000)
                continue
            waited = 0
            agents = self.agents.agents
            for index in sorted(now_roster.keys() - roster.keys()):
                who = "you" if index == self.session.peer_index else _who(now_roster[index], agents, names)
                show(f"joined: {who} (peer {index})")
            for index in sorted(roster.keys() - now_roster.keys()):
                show(f"left: {_who(roster[index], agents, names)} (peer {index})")
            now_speaking = self.session.receiver.speaking(self.now_ms()) & now_roster.keys()
            if now_speaking != speaking:
                speakers = [_who(now_roster[i], agents, names) for i in sorted(now_speaking)]
                show(f"speaking: {', '.join(speakers) or '-'}")
            roster, speaking = now_roster, now_speaking
            await asyncio.sleep(SPEAKER_TICK_MS / 1000)

    def snapshot(self) -> RoomSnapshot:
        """The roster with who is speaking now (§10.3: non-DTX frames in the last 500 ms)."""
        roster = dict(self.session.roster)
        speaking = self.session.receiver.speaking(self.now_ms())
        agents = self.agents.agents
        return RoomSnapshot(
            self.options.channel_id,
            self.session.peer_index,
            self.session.protocol_version,
            tuple(
                SeatView(
                    i, p, i == self.session.peer_index, p in agents, i in speaking, self._names.get(p, "")
                )
                for i, p in sorted(roster.items())
            ),
        )

    async def _show_view(self, view: Callable[[RoomSnapshot], None]) -> None:
        while True:
            await self._look_up_names(self._names, set(self.session.roster.values()))
            view(self.snapshot())
            await asyncio.sleep(SPEAKER_TICK_MS / 1000)

    async def _look_up_names(self, names: dict[str, str], pubkeys: set[str]) -> bool:
        """Fill `names` with the display names (kind 0) of `pubkeys` not looked up yet; a
        pubkey without a profile maps to "" so it is asked for once (again when it rejoins).
        A failed query leaves them for the next tick and returns False."""
        wanted = sorted(pubkeys - names.keys())
        if not wanted:
            return True
        try:
            profiles = await asyncio.wait_for(self.nostr.query([{"kinds": [0], "authors": wanted}]), 5)
        except Exception as exc:  # the relay went away: hex prefixes meanwhile
            log.debug("profile lookup failed: %s", exc)
            return False
        newest: dict[str, Event] = {}
        for event in profiles:
            if event.pubkey in pubkeys and (
                event.pubkey not in newest or event.created_at > newest[event.pubkey].created_at
            ):
                newest[event.pubkey] = event
        for pubkey in wanted:
            names[pubkey] = profile_name(newest[pubkey].content) if pubkey in newest else ""
        return True
