"""One live huddle per channel when starters race (decision 81; huddle.md §8.4 leaves it open).

Two people who start a huddle in the same channel at the same moment each post a 48100. Every
starter, after posting its own, reads the parent's live huddles and applies one rule: the
winner is the live huddle whose 48100 has the earliest `created_at`, then the lowest event id
(lowercase hex compared as text). The winner is kept; a starter whose own huddle lost ends it
(48103, then archives its huddle channel) and joins the winner instead. The browser applies the
same rule (web/src/workspace.ts `winningHuddle`) and keeps applying it while it sits in a huddle
it started, so a rival announced after its own look still converges.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from buzz.core.event import Event

HUDDLE_STARTED, HUDDLE_ENDED = 48100, 48103


def start_order(event: Event) -> tuple[int, str]:
    """The rule's sort key of a 48100: (created_at in s, event id)."""
    return (event.created_at, event.id)


def winning_start(
    starts: Iterable[Event], ephemeral_id: dict[str, str], dead: Iterable[str] = ()
) -> Event | None:
    """The winning 48100 among `starts`, or None when none is live.

    `ephemeral_id` maps a 48100's event id to the huddle channel it announces (events missing
    from it are not huddle starts and are skipped); `dead` holds huddle channel ids that ended
    (48103) or whose channel is archived."""
    gone = set(dead)
    live = [
        e
        for e in starts
        if e.kind == HUDDLE_STARTED and e.id in ephemeral_id and ephemeral_id[e.id] not in gone
    ]
    return min(live, key=start_order, default=None)


def announced_rooms(
    events: Iterable[Event], room_of: Callable[[Event], str | None]
) -> tuple[dict[str, str], set[str]]:
    """From a parent's 48100/48103: ({48100 event id: huddle channel id}, {ended huddle channel
    ids}), the inputs of `winning_start`. `room_of` reads an event's `ephemeral_channel_id`
    (None: not a huddle event, skipped). Channels archived without a 48103 (TTL) come from
    `archived_rooms` over the 39000s of the rooms still open here."""
    rooms: dict[str, str] = {}
    ended: set[str] = set()
    for e in events:
        if e.kind in (HUDDLE_STARTED, HUDDLE_ENDED) and (room := room_of(e)) is not None:
            if e.kind == HUDDLE_STARTED:
                rooms[e.id] = room
            else:
                ended.add(room)
    return rooms, ended


def archived_rooms(metadata: Iterable[Event]) -> set[str]:
    """The channel ids (`d`) of the 39000s among `metadata` that carry `archived=true`."""
    return {
        d
        for e in metadata
        if (d := e.first_tag("d")) and any(tuple(t[:2]) == ("archived", "true") for t in e.tags)
    }
