"""Starting, listing and inspecting huddles from signed events (huddle.md §8.4, §8.5; issue 13
item 3). The audio itself is `HuddleClient`'s; these are the channel-side steps around it.

`start_huddle` follows §8.4: create the huddle channel (9007: fresh UUID, private, stream, TTL
3600 s), post the voice guidelines (48106, p-tagged to the invited agents) before adding them,
add each agent with role `bot` (9000; deduplicated, at most 20), then post 48100 in the parent.
A failure archives the orphan channel (after a 48103 when 48100 was already posted). A live
huddle in the parent is returned instead of starting a second; after its own 48100 it applies
the race rule (decision 81, `buzz.core.huddle_race`): when another live huddle
in the parent wins (earliest 48100 `created_at`, then lowest id), its own is ended (48103,
archive) and the winner is returned, so two people starting at once end up in one huddle.

`huddles_in` reads liveness from 48100–48103 in parent channels (§8.5): a huddle is live from
its 48100 until its 48103; participants are the 48101s not followed by a 48102 (none once ended).

`client` is anything with the `RelayClient` methods `publish(event)` and `query(filters)`.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import orjson

from buzz.core.event import Event
from buzz.core.huddle_race import announced_rooms, archived_rooms, winning_start
from buzz.core.huddle_wire import HUDDLE_CHANNEL_TTL, MAX_HUDDLE_AGENTS
from buzz.core.keys import is_curve_pubkey, is_hex
from buzz.voice.agents import bots_in
from buzz.voice.guidelines import VOICE_GUIDELINES, VOICE_GUIDELINES_KIND
from buzz.voice.transcripts import Signer

CREATE_CHANNEL, PUT_USER, EDIT_METADATA = 9007, 9000, 9002
STARTED, JOINED, LEFT, ENDED = 48100, 48101, 48102, 48103
LIFECYCLE_KINDS = (STARTED, JOINED, LEFT, ENDED)
GROUP_METADATA = 39000  # relay-signed channel state: `archived` once the huddle ended
MEMBERS_KIND = 39002


class HuddleFlowError(RuntimeError):
    """A step the relay refused; the message names the step and carries the relay's answer."""


class Client(Protocol):
    async def publish(self, event: Event) -> Any: ...
    async def query(self, filters: Sequence[dict[str, Any]]) -> list[Event]: ...


@dataclass(frozen=True, slots=True)
class StartedHuddle:
    huddle_channel_id: str
    parent_channel_id: str
    # The huddle's agents: the ones this start added, or for a live huddle it returns, the
    # huddle channel's `bot` members (39002); None when that list is hidden from us (decision
    # 107: the channel is private, and we are let in only when we join its audio).
    agents: tuple[str, ...] | None
    started_event_id: str
    guidelines_event_id: str | None
    # The huddle this start created and ended because another one won the race (decision 81);
    # the fields above then describe the winner (its 48100; no rules of ours).
    superseded_huddle_channel_id: str | None = None
    started: bool = True  # False: a huddle was already live, nothing was created

    def to_json(self) -> dict[str, Any]:
        return {
            "huddle_channel_id": self.huddle_channel_id,
            "parent_channel_id": self.parent_channel_id,
            "agents": None if self.agents is None else list(self.agents),
            "started_event_id": self.started_event_id,
            "guidelines_event_id": self.guidelines_event_id,
            "superseded_huddle_channel_id": self.superseded_huddle_channel_id,
            "started": self.started,
        }


def agent_list(agents: Sequence[str]) -> tuple[str, ...]:
    """Deduplicated, 64 lowercase hex, at most 20 (§8.4 step 3), each a secp256k1 point
    (decision 107: nobody holds any other key, so it could never join). Raises ValueError."""
    unique = tuple(dict.fromkeys(a.lower() for a in agents))
    bad = [a for a in unique if not is_hex(a, 64)]
    if bad:
        raise ValueError(f"agent pubkeys must be 64 hex characters: {bad[0]}")
    off_curve = [a for a in unique if not is_curve_pubkey(a)]
    if off_curve:
        raise ValueError(f"agent pubkey {off_curve[0]} is not a secp256k1 public key")
    if len(unique) > MAX_HUDDLE_AGENTS:
        raise ValueError(f"at most {MAX_HUDDLE_AGENTS} agents per huddle, got {len(unique)}")
    return unique


async def _publish(client: Client, event: Event, step: str) -> Event:
    result = await client.publish(event)
    if not result.accepted:
        raise HuddleFlowError(f"{step} refused: {result.message}")
    return event


async def start_huddle(
    client: Client,
    signer: Signer,
    parent_channel_id: str,
    agents: Sequence[str] = (),
    name: str | None = None,
) -> StartedHuddle:
    """§8.4 steps 1–4, then the race rule (decision 81): a live huddle already there is returned
    with nothing created (`started` false); one that won the race against ours is returned after
    ours was ended (`superseded_huddle_channel_id`). The caller joins the audio of the returned
    `huddle_channel_id` with `parent_channel_id` (step 5). Raises HuddleFlowError (a refused
    step; the orphan channel is archived) or ValueError (agent keys)."""
    invited = agent_list(agents)
    live = await winning_huddle(client, parent_channel_id)
    if live is not None:  # one live huddle per channel: this start joins it (decision 81)
        agents = await huddle_agents(client, live[0])
        return StartedHuddle(live[0], parent_channel_id, agents, live[1].id, None, None, started=False)
    huddle = str(uuid.uuid4())
    label = name or f"huddle-{parent_channel_id[:8]}"
    channel_tags = [
        ["h", huddle],
        ["name", label],
        ["visibility", "private"],
        ["channel_type", "stream"],
        ["ttl", str(HUDDLE_CHANNEL_TTL)],
    ]
    await _publish(client, signer.sign(CREATE_CHANNEL, "", channel_tags), "creating the huddle channel")
    started: Event | None = None
    try:
        guidelines = signer.sign(
            VOICE_GUIDELINES_KIND, VOICE_GUIDELINES, [["h", huddle], *(["p", a] for a in invited)]
        )
        guidelines_ok = (await client.publish(guidelines)).accepted  # best effort (§8.4 step 2)
        for agent in invited:
            put = signer.sign(PUT_USER, "", [["h", huddle], ["p", agent], ["role", "bot"]])
            await _publish(client, put, f"adding agent {agent[:12]}")
        content = orjson.dumps({"ephemeral_channel_id": huddle}).decode()
        started = await _publish(
            client, signer.sign(STARTED, content, [["h", parent_channel_id]]), "posting 48100"
        )
    except Exception:
        await _abandon(client, signer, huddle, parent_channel_id, started is not None)
        raise
    winner = await winning_huddle(client, parent_channel_id)
    if winner is not None and winner[0] != huddle:
        # Another start won: end ours (nobody is in it yet) and hand back the winner to join.
        # Best effort: readers apply the same rule, so a 48103 that fails still leaves one.
        with contextlib.suppress(HuddleFlowError):
            await end_huddle(client, signer, huddle, parent_channel_id)
        agents = await huddle_agents(client, winner[0])
        return StartedHuddle(winner[0], parent_channel_id, agents, winner[1].id, None, huddle, started=False)
    return StartedHuddle(
        huddle, parent_channel_id, invited, started.id, guidelines.id if guidelines_ok else None
    )


async def huddle_agents(client: Client, huddle_channel_id: str) -> tuple[str, ...] | None:
    """The `bot` members of a huddle channel (its relay-signed 39002, as `AgentDirectory` reads
    them), sorted; None when the relay serves us no member list: the huddle channel is private
    and we are not (yet) a member of it."""
    lists = await client.query([{"kinds": [MEMBERS_KIND], "#d": [huddle_channel_id], "limit": 1}])
    return tuple(sorted(bots_in(lists[0]))) if lists else None


async def settle_join(client: Client, signer: Signer, huddle_channel_id: str, parent_channel_id: str) -> str:
    """The last look before step 5 (decision 81): a one-shot `start` cannot see a rival whose
    48100 was stored after its look yet wins the race rule. When `huddle_channel_id` is one
    `signer` announced in the parent, nobody sits in it yet, and another live huddle there wins,
    ours is ended and the winner's channel id returned; otherwise `huddle_channel_id`."""
    win = await winning_huddle(client, parent_channel_id)
    if win is None or win[0] == huddle_channel_id:
        return huddle_channel_id
    state = (await huddles_in(client, [parent_channel_id])).get(huddle_channel_id)
    if state is None or state.started_by != signer.pubkey or state.participants:
        return huddle_channel_id  # not ours to end, or someone sits in it: join what was asked
    with contextlib.suppress(HuddleFlowError):
        await end_huddle(client, signer, huddle_channel_id, parent_channel_id)
    return win[0]


async def winning_huddle(client: Client, parent_channel_id: str) -> tuple[str, Event] | None:
    """The parent's live huddle that the race rule keeps (decision 81): (huddle channel id, its
    48100), or None. Ended (48103) and archived huddle channels do not count."""
    events = await client.query([{"kinds": [STARTED, ENDED], "#h": [parent_channel_id], "limit": 500}])
    rooms, dead = announced_rooms(events, _ephemeral_id)
    candidates = sorted(set(rooms.values()) - dead)
    if candidates:  # a channel archived at its TTL ends the huddle without a 48103
        dead |= archived_rooms(await client.query([{"kinds": [GROUP_METADATA], "#d": candidates}]))
    win = winning_start(events, rooms, dead)
    return None if win is None else (rooms[win.id], win)


async def end_huddle(client: Client, signer: Signer, huddle_channel_id: str, parent_channel_id: str) -> bool:
    """Explicit end by the huddle channel's creator: 48103 in the parent, then archive.
    False (nothing posted) when the huddle already ended: the relay ends a TTL huddle itself
    when its last participant leaves (huddle.md §5.8), so ending it again is a no-op."""
    metadata = await client.query([{"kinds": [GROUP_METADATA], "#d": [huddle_channel_id], "limit": 1}])
    if archived_rooms(metadata):
        return False
    content = orjson.dumps({"ephemeral_channel_id": huddle_channel_id}).decode()
    await _publish(client, signer.sign(ENDED, content, [["h", parent_channel_id]]), "posting 48103")
    archive = signer.sign(EDIT_METADATA, "", [["h", huddle_channel_id], ["archived", "true"]])
    await _publish(client, archive, "archiving the huddle channel")
    return True


async def _abandon(client: Client, signer: Signer, huddle: str, parent: str, started: bool) -> None:
    """Archive the orphan channel, after a 48103 when 48100 was posted (§8.4 last paragraph)."""
    try:
        if started:
            content = orjson.dumps({"ephemeral_channel_id": huddle}).decode()
            await client.publish(signer.sign(ENDED, content, [["h", parent]]))
        await client.publish(signer.sign(EDIT_METADATA, "", [["h", huddle], ["archived", "true"]]))
    except Exception:  # best effort: the TTL ends the channel anyway
        return


@dataclass
class HuddleState:
    """One huddle as its lifecycle events tell it."""

    huddle_channel_id: str
    parent_channel_id: str
    started_at: int | None = None
    started_by: str | None = None
    ended_at: int | None = None
    participants: dict[str, int] = field(default_factory=dict)  # pubkey → seats

    @property
    def live(self) -> bool:
        return self.ended_at is None and (self.started_at is not None or bool(self.participants))

    def to_json(self, now: int) -> dict[str, Any]:
        since = self.started_at
        return {
            "huddle_channel_id": self.huddle_channel_id,
            "parent_channel_id": self.parent_channel_id,
            "live": self.live,
            "started_by": self.started_by,
            "started_at": since,
            "ended_at": self.ended_at,
            "duration_s": ((self.ended_at or now) - since) if since is not None else None,
            "participants": sorted(self.participants),
        }


def _ephemeral_id(event: Event) -> str | None:
    try:
        body = orjson.loads(event.content)
    except orjson.JSONDecodeError:
        return None
    value = body.get("ephemeral_channel_id") if isinstance(body, dict) else None
    return value if isinstance(value, str) else None


def fold_lifecycle(events: Sequence[Event]) -> dict[str, HuddleState]:
    """Apply 48100–48103 in causal order (kind, then time); events after a 48103 are ignored."""
    states: dict[str, HuddleState] = {}
    for event in sorted(events, key=lambda e: (e.created_at, e.kind, e.id)):
        huddle, parent = _ephemeral_id(event), event.first_tag("h")
        if huddle is None or parent is None:
            continue
        state = states.setdefault(huddle, HuddleState(huddle, parent))
        if state.ended_at is not None:
            continue
        who = event.tag_values("p")
        if event.kind == STARTED:
            state.started_at, state.started_by = event.created_at, event.pubkey
        elif event.kind == JOINED and who:
            state.participants[who[0]] = state.participants.get(who[0], 0) + 1
        elif event.kind == LEFT and who and who[0] in state.participants:
            state.participants[who[0]] -= 1
            if state.participants[who[0]] <= 0:
                del state.participants[who[0]]
        elif event.kind == ENDED:
            state.ended_at = event.created_at
            state.participants.clear()  # the relay closes every seat of an ended huddle (decision 98)
    return states


async def huddles_in(client: Client, channels: Sequence[str], limit: int = 500) -> dict[str, HuddleState]:
    """The huddles whose lifecycle events are in `channels` (parents), by huddle channel id."""
    if not channels:
        return {}
    events = await client.query([{"kinds": list(LIFECYCLE_KINDS), "#h": list(channels), "limit": limit}])
    return fold_lifecycle(events)


async def my_channels(client: Client, pubkey: str) -> list[str]:
    """Channels whose member list (39002) names `pubkey`."""
    lists = await client.query([{"kinds": [MEMBERS_KIND], "#p": [pubkey]}])
    return sorted({d for e in lists if (d := e.first_tag("d"))})
