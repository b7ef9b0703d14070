"""Pure conversions from relay events to the client API's values (`buzz.client.models`;
agents.md §2.1 item 5, §2.2), and the thread links of the message model (agents.md §3.3).

- channel metadata 39000 → `channel_view` (relay.md §4.6 item 1 tags);
- member list 39002 → `member_roles` (`["p", <pk>, "", <role>]`);
- profile kind 0 → `profile_view` (`is_agent`/`owner` from one valid NIP-OA `auth` tag);
- message events → `message_view` with `channel_id`, `reply_to`, `root`, `mentions`,
  `edited_at` (the newest 40003 replaces `content`).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import orjson

from buzz.client.models import ChannelMeta, Message, Profile
from buzz.core import nip19
from buzz.core.channel_id import is_channel_id
from buzz.core.event import Event
from buzz.core.keys import is_hex
from buzz.core.nip_oa import owner_of

EDIT_KIND = 40003


# -- channels --------------------------------------------------------------------------------
def channel_view(meta: Event) -> ChannelMeta:
    """A 39000 event → its ChannelMeta (missing tags give "" / defaults)."""
    names = {t[0] for t in meta.tags if t}
    ttl = meta.first_tag("ttl")
    return ChannelMeta(
        id=meta.d_tag,
        name=meta.first_tag("name") or "",
        type=meta.first_tag("t") or "stream",
        visibility="private" if "private" in names else "open",
        about=meta.first_tag("about") or "",
        topic=meta.first_tag("topic") or "",
        purpose=meta.first_tag("purpose") or "",
        archived=meta.first_tag("archived") == "true",
        ttl_seconds=int(ttl) if ttl is not None and ttl.isdigit() else None,
        hidden="hidden" in names,
    )


def member_roles(members_event: Event) -> dict[str, str]:
    """A 39002 event → {pubkey: role} in tag order (role "member" when the tag has none)."""
    roles: dict[str, str] = {}
    for t in members_event.tags:
        if len(t) >= 2 and t[0] == "p" and is_hex(t[1], 64):
            roles[t[1]] = t[3] if len(t) >= 4 and t[3] else "member"
    return roles


def dm_participants(meta: Event) -> list[str]:
    """The `p` members listed on a DM's 39000 (relay.md §4.6 item 1)."""
    return [p for p in meta.tag_values("p") if is_hex(p, 64)]


def newest_per_channel(events: Iterable[Event]) -> dict[str, Event]:
    """Keep the newest addressable version per `d` (the relay serves only one; belt and braces)."""
    out: dict[str, Event] = {}
    for e in events:
        d = e.d_tag
        if is_channel_id(d) and (d not in out or (e.created_at, out[d].id) > (out[d].created_at, e.id)):
            out[d] = e
    return out


# -- users -----------------------------------------------------------------------------------
def profile_fields(profile: Event | None) -> dict[str, Any]:
    """The kind 0 content as a dict ({} when absent or not a JSON object)."""
    if profile is None:
        return {}
    try:
        obj = orjson.loads(profile.content)
    except orjson.JSONDecodeError:
        return {}
    return obj if isinstance(obj, dict) else {}


def display_name(profile: Event | None) -> str | None:
    """kind 0 `display_name`, else `name` (agents.md §2.3 item 2), else None."""
    fields = profile_fields(profile)
    for key in ("display_name", "name"):
        value = fields.get(key)
        if isinstance(value, str) and value.strip():
            return value.strip()
    return None


def profile_view(pubkey: str, profile: Event | None) -> Profile:
    """The Profile of `pubkey` from its kind 0 (null fields without one)."""
    fields = profile_fields(profile)
    owner = owner_of(profile) if profile is not None else None

    def text(key: str) -> str | None:
        value = fields.get(key)
        return value if isinstance(value, str) else None

    return Profile(
        pubkey=pubkey,
        npub=nip19.npub(pubkey),
        name=text("name"),
        display_name=text("display_name"),
        about=text("about"),
        picture=text("picture"),
        is_agent=owner is not None,
        owner=owner,
    )


# -- messages --------------------------------------------------------------------------------
def _marked(event: Event, marker: str) -> str | None:
    for t in event.tags:
        if len(t) >= 4 and t[0] == "e" and t[3] == marker and is_hex(t[1], 64):
            return t[1]
    return None


def thread_links(event: Event) -> tuple[str | None, str | None]:
    """(reply_to, root) of a message (agents.md §3.3 item 1): the `reply`-marked parent, and the
    `root`-marked root or — for a direct reply to a top-level event — the parent itself.
    Unmarked `e` tags are never thread links. A top-level event gives (None, None)."""
    parent = _marked(event, "reply")
    if parent is None:
        return None, None
    return parent, _marked(event, "root") or parent


def newest_edits(edits: Iterable[Event]) -> dict[str, Event]:
    """{target id: newest 40003} — newest by created_at, ties to the lower id (relay.md §6.4)."""
    out: dict[str, Event] = {}
    for edit in edits:
        target = edit.first_tag("e")
        if edit.kind != EDIT_KIND or target is None:
            continue
        best = out.get(target)
        if best is None or (edit.created_at, best.id) > (best.created_at, edit.id):
            out[target] = edit
    return out


def message_view(event: Event, edit: Event | None = None) -> Message:
    """NIP-01 fields plus `channel_id`, `reply_to`, `root`, `mentions`, `edited_at`
    (agents.md §2.1 item 5). An applied edit replaces `content` and drops `sig` (null): the
    original signature covers the original text only, so it is never shown with another."""
    reply_to, root = thread_links(event)
    return Message(
        id=event.id,
        pubkey=event.pubkey,
        created_at=event.created_at,
        kind=event.kind,
        tags=[list(t) for t in event.tags],
        content=edit.content if edit is not None else event.content,
        sig=event.sig if edit is None else None,
        channel_id=next((h for h in event.tag_values("h") if is_channel_id(h)), None),
        reply_to=reply_to,
        root=root,
        mentions=list(dict.fromkeys(p for p in event.tag_values("p") if is_hex(p, 64))),
        edited_at=edit.created_at if edit is not None else None,
    )
