"""The small values the workspace client API returns (agents.md §2.2 output objects).

Each dataclass lists its fields in the order of the JSON object the CLI prints for it, so a face
can serialise it directly (`orjson` writes dataclasses field by field) or with `as_json`. Pubkeys
and ids are 64 lowercase hex, channel ids canonical UUIDs, times unix seconds.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any


def as_json(value: Any) -> Any:
    """Dataclasses (nested in lists and dicts too) → plain dicts, for faces that need JSON values."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    if isinstance(value, list | tuple):
        return [as_json(v) for v in value]
    if isinstance(value, dict):
        return {k: as_json(v) for k, v in value.items()}
    return value


# -- channels and members (relay.md §4.5, §4.6) ---------------------------------------------------
@dataclass(frozen=True, slots=True)
class ChannelMeta:
    """A channel's 39000 read back (missing tags give "" / defaults)."""

    id: str
    name: str
    type: str  # stream | forum | dm
    visibility: str  # open | private
    about: str
    topic: str
    purpose: str
    archived: bool
    ttl_seconds: int | None
    hidden: bool


@dataclass(frozen=True, slots=True)
class ChannelSummary:
    """One row of `channels list`."""

    id: str
    name: str
    type: str
    visibility: str
    about: str
    archived: bool
    member: bool


@dataclass(frozen=True, slots=True)
class Channel:
    """`channels get`: the metadata and my role (None when not a member)."""

    id: str
    name: str
    type: str
    visibility: str
    about: str
    topic: str
    purpose: str
    archived: bool
    ttl_seconds: int | None
    member: bool
    role: str | None


@dataclass(frozen=True, slots=True)
class ChannelEvent:
    """A channel write that only names the channel (create 9007, join 9021, leave 9022)."""

    channel_id: str
    event_id: str


@dataclass(frozen=True, slots=True)
class Member:
    pubkey: str
    role: str
    display_name: str | None
    is_agent: bool


@dataclass(frozen=True, slots=True)
class MemberAdded:
    """A 9000 (add or role change); `role` None keeps the relay's default / the current role."""

    channel_id: str
    event_id: str
    pubkey: str
    role: str | None


@dataclass(frozen=True, slots=True)
class MemberRemoved:
    channel_id: str
    event_id: str
    pubkey: str


# -- messages (agents.md §2.1 item 5, §3) ---------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Message:
    """NIP-01 fields plus the thread and edit view; an applied edit replaces `content` and
    leaves `sig` None (the original signature does not cover the edited text)."""

    id: str
    pubkey: str
    created_at: int
    kind: int
    tags: list[list[str]]
    content: str
    sig: str | None
    channel_id: str | None
    reply_to: str | None
    root: str | None
    mentions: list[str]
    edited_at: int | None


@dataclass(frozen=True, slots=True)
class SentMessage:
    event_id: str
    channel_id: str
    created_at: int
    reply_to: str | None
    root: str | None
    mention_pubkeys: list[str]


@dataclass(frozen=True, slots=True)
class SentWithFiles(SentMessage):
    """A sent message that attached files: `files` lists {url, sha256, size, type, name}."""

    files: list[dict[str, object]]


@dataclass(frozen=True, slots=True)
class Thread:
    """A root id and its messages, oldest first."""

    root: str
    messages: list[Message]


@dataclass(frozen=True, slots=True)
class Edited:
    event_id: str
    channel_id: str
    target_id: str


@dataclass(frozen=True, slots=True)
class Deleted:
    """A kind 5 (own or own agent's) or 9005 (moderation) deletion."""

    event_id: str
    kind: int
    target_id: str
    channel_id: str | None


@dataclass(frozen=True, slots=True)
class ReactionAdded:
    event_id: str
    target_id: str
    emoji: str


@dataclass(frozen=True, slots=True)
class ReactionRemoved:
    event_id: str
    reaction_id: str
    target_id: str


# -- DMs, users, presence ---------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Dm:
    channel_id: str
    participants: list[str]
    e2ee: bool = False  # a channel DM: the relay reads it (private DMs: PrivateConversation)


@dataclass(frozen=True, slots=True)
class Profile:
    """A kind 0 read back; `is_agent`/`owner` from one valid NIP-OA `auth` tag; null fields
    when the pubkey has no profile."""

    pubkey: str
    npub: str
    name: str | None
    display_name: str | None
    about: str | None
    picture: str | None
    is_agent: bool
    owner: str | None


@dataclass(frozen=True, slots=True)
class ProfileSet:
    event_id: str
    pubkey: str
    profile: dict[str, Any]


@dataclass(frozen=True, slots=True)
class PresenceSet:
    event_id: str
    status: str


# -- memory (engram.md §12) -------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class EngramWrite:
    """A published engram: its slug, event id and created_at."""

    slug: str
    event_id: str
    created_at: int


@dataclass(frozen=True, slots=True)
class Patched:
    """`patch`: the new value's SHA-256 and the write (None for a dry run)."""

    slug: str
    sha256: str
    write: EngramWrite | None


# -- huddles (huddle.md §8) -------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Huddle:
    """A huddle announced in a channel (48100), with its end (48103) when it ended."""

    huddle_channel_id: str
    parent_channel_id: str
    started_by: str
    started_at: int
    event_id: str
    ended_at: int | None
    participants: list[str]


# -- private DMs (NIP-17 gift wraps; docs/decisions.md 280) ----------------------------------------
@dataclass(frozen=True, slots=True)
class PrivateMessage:
    """One end-to-end encrypted DM, unwrapped: `id` is the rumor's (the message's own id, the
    same in every copy), `participants` the other people of its conversation (sorted), `wrap_id`
    the gift wrap it came in. `e2ee` is always true: the mark faces show beside ordinary DMs."""

    id: str
    pubkey: str
    created_at: int
    content: str
    participants: list[str]
    reply_to: str | None
    wrap_id: str
    e2ee: bool = True


@dataclass(frozen=True, slots=True)
class PrivateSent:
    """A private DM sent: the rumor id, its recipients, and the wraps published (one per
    recipient, then the copy to myself)."""

    event_id: str
    created_at: int
    recipients: list[str]
    reply_to: str | None
    wrap_ids: list[str]
    e2ee: bool = True


@dataclass(frozen=True, slots=True)
class PrivateConversation:
    """A `buzz dms list` row of private DMs: no channel (the relay holds only wraps), the other
    participants, the newest message's time and how many messages were read."""

    channel_id: None
    participants: list[str]
    e2ee: bool
    last_at: int
    messages: int
