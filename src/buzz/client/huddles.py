"""Huddles seen from the workspace (huddle.md §8): start one, list a channel's huddles, and the
status of one. Joining the audio room is the voice client's business (`buzz.voice`).

- `start` follows the starter's order of §8.4: create the huddle channel (9007, private,
  stream, TTL 3600 s), post the voice-mode rules (48106, best effort), add each agent (9000,
  role `bot`, at most 20), announce it in the parent (48100 `{"ephemeral_channel_id"}`). When a
  later step fails the orphan channel is archived (9002 `archived=true`, best effort) and the
  error re-raised. A live huddle in the parent is returned instead of starting a second; after
  our 48100, the race rule (decision 81, `buzz.core.huddle_race`): when another live
  huddle of the parent wins (earliest 48100 `created_at`, then lowest id), ours is ended (48103,
  archive) and the winner is returned instead, so simultaneous starts converge on one huddle.
- `list` reads the parent's 48100 announcements and their ends (48103 from the huddle channel's
  creator or the relay key); participants come from 48101/48102, trusted only when signed by
  the relay's key (NIP-11 `pubkey`), applied oldest first.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence

import orjson

from buzz.client.errors import NotFound, UserError, WorkspaceError
from buzz.client.models import Huddle
from buzz.client.session import Session
from buzz.client.values import channel_arg, pubkey_arg
from buzz.core.channel_id import is_channel_id, new_channel_id
from buzz.core.event import Event
from buzz.core.huddle_race import announced_rooms, archived_rooms, winning_start

STARTED, JOINED, LEFT, ENDED, RULES = 48100, 48101, 48102, 48103, 48106
HUDDLE_TTL_S = 3600
MAX_AGENTS = 20
VOICE_RULES = "Voice mode: answer in one or two short spoken sentences, plain words, no markup or lists."
LIFECYCLE_FETCH = 500


def _huddle_of(event: Event) -> str | None:
    try:
        body = orjson.loads(event.content)
    except orjson.JSONDecodeError:
        return None
    value = body.get("ephemeral_channel_id") if isinstance(body, dict) else None
    return str(value) if is_channel_id(value) else None


class Huddles:
    def __init__(self, session: Session) -> None:
        self._s = session

    async def start(
        self, parent: str, agents: Sequence[str] = (), rules: str = VOICE_RULES, name: str = "huddle"
    ) -> Huddle:
        """Start a huddle from `parent` with these agents (hex or npub). Returns the new huddle
        (no participants yet), or the parent's live one (already there, or the winner of the race
        rule against ours, which was then ended): its `started_by`/`event_id` are not ours. Raises UserError (values, more than 20 agents) or the relay's
        refusal of any step."""
        s = self._s
        parent_id = channel_arg(parent)
        invited = list(dict.fromkeys(pubkey_arg(a, "agent") for a in agents))
        if len(invited) > MAX_AGENTS:
            raise UserError(f"at most {MAX_AGENTS} agents per huddle")
        live = await self._winner(parent_id)
        if live is not None:  # one live huddle per channel: this start joins it (decision 81)
            return Huddle(str(_huddle_of(live)), parent_id, live.pubkey, live.created_at, live.id, None, [])
        huddle_id = new_channel_id()
        create = s.sign(
            9007,
            "",
            [["h", huddle_id], ["name", name], ["visibility", "private"], ["channel_type", "stream"],
             ["ttl", str(HUDDLE_TTL_S)]],
        )  # fmt: skip
        await s.publish(create)
        try:
            with contextlib.suppress(WorkspaceError):  # §8.4 step 2 is best effort
                await s.publish(s.sign(RULES, rules, [["h", huddle_id]]))
            for agent in invited:
                await s.publish(s.sign(9000, "", [["h", huddle_id], ["p", agent], ["role", "bot"]]))
            started = s.sign(
                STARTED, orjson.dumps({"ephemeral_channel_id": huddle_id}).decode(), [["h", parent_id]]
            )
            await s.publish(started)
        except WorkspaceError:
            with contextlib.suppress(WorkspaceError):  # the TTL reclaims it anyway
                await s.publish(s.sign(9002, "", [["h", huddle_id], ["archived", "true"]]))
            raise
        winner = await self._winner(parent_id)
        if winner is not None and _huddle_of(winner) != huddle_id:
            with contextlib.suppress(WorkspaceError):  # readers apply the same rule anyway
                await s.publish(s.sign(ENDED, started.content, [["h", parent_id]]))
                await s.publish(s.sign(9002, "", [["h", huddle_id], ["archived", "true"]]))
            return Huddle(
                str(_huddle_of(winner)), parent_id, winner.pubkey, winner.created_at, winner.id, None, []
            )
        return Huddle(huddle_id, parent_id, s.pubkey, started.created_at, started.id, None, [])

    async def _winner(self, parent_id: str) -> Event | None:
        """The parent's live 48100 the race rule keeps; ended or archived huddles do not count."""
        s = self._s
        found = await s.query([{"kinds": [STARTED, ENDED], "#h": [parent_id], "limit": LIFECYCLE_FETCH}])
        rooms, dead = announced_rooms(found, _huddle_of)
        candidates = sorted(set(rooms.values()) - dead)
        if candidates:  # a channel archived at its TTL ends the huddle without a 48103
            dead |= archived_rooms(await s.query([{"kinds": [39000], "#d": candidates}]))
        return winning_start(found, rooms, dead)

    async def listing(self, channel: str) -> list[Huddle]:
        """The huddles announced in `channel`, newest first, with their end and participants."""
        s = self._s
        parent_id = channel_arg(channel)
        found = await s.query(
            [{"kinds": [STARTED, JOINED, LEFT, ENDED], "#h": [parent_id], "limit": LIFECYCLE_FETCH}]
        )
        relay = await s.relay_pubkey()
        starts = sorted((e for e in found if e.kind == STARTED), key=lambda e: (-e.created_at, e.id))
        huddles: list[Huddle] = []
        for start in starts:
            huddle_id = _huddle_of(start)
            if huddle_id is None or any(h.huddle_channel_id == huddle_id for h in huddles):
                continue
            mine = sorted(
                (e for e in found if _huddle_of(e) == huddle_id), key=lambda e: (e.created_at, e.id)
            )
            present: dict[str, None] = {}
            ended_at: int | None = None
            for e in mine:
                if e.kind in (JOINED, LEFT) and e.pubkey == relay:
                    for p in e.tag_values("p"):
                        if e.kind == JOINED:
                            present[p] = None
                        else:
                            present.pop(p, None)
                elif e.kind == ENDED and e.pubkey in (relay, start.pubkey) and ended_at is None:
                    ended_at = e.created_at
            participants = [] if ended_at is not None else list(present)
            huddles.append(
                Huddle(huddle_id, parent_id, start.pubkey, start.created_at, start.id, ended_at, participants)
            )
        return huddles

    async def status(self, channel: str, huddle: str | None = None) -> Huddle:
        """One huddle of `channel`: `huddle` (its channel id), else the newest. Raises NotFound."""
        wanted = channel_arg(huddle) if huddle is not None else None
        for h in await self.listing(channel):
            if wanted is None or h.huddle_channel_id == wanted:
                return h
        raise NotFound(
            f"no huddle {wanted} in channel {channel}" if wanted else f"no huddle in channel {channel}"
        )
