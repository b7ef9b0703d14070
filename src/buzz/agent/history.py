"""History for a turn prompt (agents.md §4.12 step 2): thread replies and DMs only.

- thread: the root plus the replies of that thread (`{"ids":[root]}`, `{"kinds":[9],"#h":[C],
  "#e":[root]}`);
- DM: the most recent DM messages (`{"kinds":[9],"#h":[C]}`), counted with COUNT for the header.

At most `limit` messages (0 disables), oldest first, excluding the batch's own events; edits
(40003, newest per target) are applied; deleted events are not served by the relay. A failed
lookup gives no history (logged): history is context, never a reason to fail a turn.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence

from buzz.agent.directory import Profiles
from buzz.agent.event_view import thread_refs
from buzz.agent.prompts import PRIVATE_DM_TYPE, ChannelInfo, HistoryLine, Person, history_section
from buzz.agent.relay_link import RelayLink
from buzz.core.event import Event

log = logging.getLogger(__name__)


def apply_edits(messages: Iterable[Event], edits: Iterable[Event]) -> list[HistoryLine]:
    """History lines with the newest 40003 content applied per target (same author only)."""
    newest: dict[str, Event] = {}
    for edit in edits:
        target = edit.first_tag("e")
        cur = newest.get(target or "")
        if target and (cur is None or edit.created_at > cur.created_at):
            newest[target] = edit
    out = []
    for msg in messages:
        edit = newest.get(msg.id)
        content = edit.content if edit is not None and edit.pubkey == msg.pubkey else msg.content
        out.append(HistoryLine(msg.created_at, msg.pubkey, content))
    return out


async def build_history(
    link: RelayLink,
    profiles: Profiles,
    channel: ChannelInfo,
    trigger: Event,
    batch_ids: Sequence[str],
    limit: int,
) -> str | None:
    """The history section for this turn, or None (top-level channel message, limit 0, or a
    failed lookup)."""
    if limit <= 0 or channel.type == PRIVATE_DM_TYPE:
        return None  # a private DM's history is in its wraps; its session holds the conversation
    refs = thread_refs(trigger)
    exclude = set(batch_ids)
    try:
        if channel.type == "dm":
            found = await link.query([{"kinds": [9], "#h": [channel.id], "limit": limit + len(exclude)}])
            total = max(await link.count([{"kinds": [9], "#h": [channel.id]}]) - len(exclude), 0)
            what = "recent direct messages"
        elif refs.root is not None:
            found = await link.query(
                [{"ids": [refs.root]}, {"kinds": [9], "#h": [channel.id], "#e": [refs.root]}]
            )
            total = len({e.id for e in found} - exclude)
            what = "this thread"
        else:
            return None
        messages = sorted(
            {e.id: e for e in found if e.id not in exclude and e.kind == 9}.values(),
            key=lambda e: (e.created_at, e.id != refs.root, e.id),  # the root before same-second replies
        )[-limit:]
        if not messages:
            return None
        edits = await link.query([{"kinds": [40003], "#h": [channel.id], "#e": [m.id for m in messages]}])
        lines = apply_edits(messages, edits)
        people: Mapping[str, Person] = {
            pk: p.person for pk, p in (await profiles.get_many(m.author for m in lines)).items()
        }
        return history_section(lines, max(total, len(lines)), people, what)
    except Exception as exc:
        log.warning("no history for this turn: %s", exc)
        return None
