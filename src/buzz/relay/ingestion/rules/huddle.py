"""Huddle lifecycle kinds at ingest (relay.md §9 item 10, huddle.md §8.2).

- 48100 (huddle started, in the parent channel): content is JSON whose `ephemeral_channel_id`
  is a canonical UUID naming an existing, non-archived, private, `stream` channel with a TTL,
  created by the event's author.
- 48103 (huddle ended): only the creator of the channel named by `ephemeral_channel_id`, or the
  relay key, may send it.

48101/48102 are relay-only kinds, refused earlier by the precheck (`restricted: relay-only kind`).
Every refusal here is `invalid: <reason>`.
"""

from __future__ import annotations

import orjson

from buzz.core.channel_id import is_channel_id
from buzz.core.errors import Invalid, Refusal
from buzz.relay.auth.session import Session
from buzz.relay.ingestion.rules.base import KindRules, Plan, Validator
from buzz.store.base import Channel

HUDDLE_STARTED = 48100
HUDDLE_ENDED = 48103
NOT_THE_AUTHORS = Refusal(Invalid, "huddle channel was not created by the author")
NOT_THE_CREATOR = Refusal(Invalid, "only the huddle channel's creator or the relay may end a huddle")


def _ephemeral_channel_id(content: str, kind: int) -> str:
    try:
        body = orjson.loads(content)
    except orjson.JSONDecodeError:
        body = None
    if not isinstance(body, dict):
        raise Invalid(f"kind {kind} content must be a JSON object with ephemeral_channel_id")
    value = body.get("ephemeral_channel_id")
    if not is_channel_id(value):
        raise Invalid("ephemeral_channel_id must be a canonical UUID")
    return str(value)


async def _own_huddle_channel(rules: KindRules, channel_id: str, author: str, refusal: Refusal) -> Channel:
    """The named channel when `author` created it; a missing channel and another's get the same
    `refusal`, so the answer never tells whether someone else's (private) channel exists."""
    channel = await rules.store.get_channel(channel_id)
    if channel is None or channel.created_by != author:
        raise refusal()
    return channel


async def huddle_started(rules: KindRules, plan: Plan, session: Session) -> None:
    """48100: the named channel is the author's own private TTL stream channel, not archived."""
    event = plan.stored.event
    channel_id = _ephemeral_channel_id(event.content, event.kind)
    channel = await _own_huddle_channel(rules, channel_id, event.pubkey, NOT_THE_AUTHORS)
    if channel.archived_at is not None:
        raise Invalid("huddle channel is archived")
    if channel.visibility != "private":
        raise Invalid("huddle channel must be private")
    if channel.channel_type != "stream":
        raise Invalid("huddle channel must be a stream channel")
    if channel.ttl_seconds is None:
        raise Invalid("huddle channel must have a ttl")


async def huddle_ended(rules: KindRules, plan: Plan, session: Session) -> None:
    """48103: from the huddle channel's creator or the relay."""
    event = plan.stored.event
    channel_id = _ephemeral_channel_id(event.content, event.kind)
    if event.pubkey == rules.relay_pubkey:
        return
    await _own_huddle_channel(rules, channel_id, event.pubkey, NOT_THE_CREATOR)


VALIDATORS: dict[int, Validator] = {HUDDLE_STARTED: huddle_started, HUDDLE_ENDED: huddle_ended}
