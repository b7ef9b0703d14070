"""Channel administration kinds 9007, 9000, 9001, 9002, 9008, 9021, 9022 (relay.md §4.5).

Each validator checks the event against the current channel and member rows, then adds the
state change as effects (committed in the insert transaction) and one after-commit follow-up
that publishes the relay-signed state and notices and revokes lost access (§4.6, §4.7).
Failures are `invalid:` with the reasons of §4.5 unless shown otherwise.
"""

from __future__ import annotations

import re

from buzz.core.errors import Duplicate, Invalid, Refusal, Restricted
from buzz.core.event import Event
from buzz.core.keys import is_hex
from buzz.core.limits import text_too_long
from buzz.relay.auth.session import Session
from buzz.relay.ingestion.emit import ChannelChange
from buzz.relay.ingestion.rules import workflows
from buzz.relay.ingestion.rules.base import KindRules, Plan, Validator
from buzz.relay.ingestion.rules.membership import (
    ROLE_NAMES,
    active_member,
    announce,
    clean_name,
    is_elevated,
    is_only_owner,
)
from buzz.store.base import (
    Channel,
    CreateChannel,
    DeleteChannel,
    PutMember,
    RemoveMember,
    UpdateChannel,
)

VISIBILITIES = frozenset({"open", "private"})
CREATABLE_TYPES = frozenset({"stream", "forum", "workflow"})  # `dm` only through 41010
METADATA_TAGS = ("name", "about", "archived", "topic", "purpose", "visibility", "ttl")
ELEVATED_EDITS = ("name", "about", "archived", "visibility", "ttl")
MEMBER_EDITS = ("topic", "purpose")
_TTL = re.compile(r"[1-9][0-9]{0,15}")

NAME_REQUIRED = Refusal(Invalid, "channel name is required")
NOT_ACTIVE = Refusal(Invalid, "actor is not an active member")
LAST_OWNER = Refusal(Invalid, "cannot remove the last owner")


def _channel_id(plan: Plan) -> str:
    channel_id = plan.stored.channel_id
    assert channel_id is not None  # needs-h kinds: derivation refused a missing h (§4.2 item 6)
    return channel_id


def _target(event: Event) -> str:
    """The `p` target (64 hex) of 9000 / 9001."""
    target = event.first_tag("p")
    if target is None or not is_hex(target, 64):
        raise Invalid("missing p tag")
    return target


CAPPED_TAGS = ("name", "about", "topic", "purpose")  # each capped by TEXT_CAPS["channel <tag>"]


def _capped(tag: str, value: str) -> str:
    """`value` of a 9007/9002 text tag, refused `invalid:` over its cap (core.limits.TEXT_CAPS)."""
    reason = text_too_long(f"channel {tag}", value)
    if reason is not None:
        raise Invalid(reason)
    return value


def _tag_or(event: Event, name: str, default: str) -> str:
    value = event.first_tag(name)
    return default if value is None else value


def _visibility(value: str) -> str:
    if value not in VISIBILITIES:
        raise Invalid(f"invalid visibility: {value}")
    return value


def _ttl(value: str, clearable: bool) -> int | None:
    """A positive integer of seconds; `""` clears it where allowed (9002)."""
    if value == "" and clearable:
        return None
    if not _TTL.fullmatch(value):
        raise Invalid(f"invalid ttl value: {value}")
    return int(value)


async def _channel(rules: KindRules, channel_id: str) -> Channel:
    channel = await rules.store.get_channel(channel_id)
    if channel is None:  # the write gate or the existence check ran before (§4.3 item 2)
        raise Restricted("not a channel member")
    return channel


# -- 9007 create ----------------------------------------------------------------------------------
async def create_group(rules: KindRules, plan: Plan, session: Session) -> None:
    """9007: a new channel with the client-chosen UUID; the author becomes its owner."""
    event, channel_id = plan.stored.event, _channel_id(plan)
    existing = await rules.store.get_channel(channel_id, include_deleted=True)
    if existing is not None:
        if existing.created_by == event.pubkey and rules.emitter is not None:
            # The creator's retry after a crash: the relay-signed state may be missing.
            await rules.emitter.repair(channel_id)
        raise Duplicate("channel already exists")
    name = _capped("name", clean_name(event.first_tag("name")))
    if not name:
        raise NAME_REQUIRED()
    for tag in CAPPED_TAGS[1:]:
        _capped(tag, event.first_tag(tag) or "")
    visibility = _visibility(_tag_or(event, "visibility", "open"))
    channel_type = _tag_or(event, "channel_type", "stream")
    if channel_type not in CREATABLE_TYPES:
        raise Invalid(f"invalid channel_type: {channel_type}")
    ttl = event.first_tag("ttl")
    channel = Channel(
        id=channel_id,
        name=name,
        visibility=visibility,  # type: ignore[arg-type]
        created_by=event.pubkey,
        created_at=plan.stored.received_at,
        channel_type=channel_type,  # type: ignore[arg-type]
        about=event.first_tag("about") or "",
        topic=event.first_tag("topic") or "",
        purpose=event.first_tag("purpose") or "",
        ttl_seconds=None if ttl is None else _ttl(ttl, clearable=False),
    )
    plan.effects += [CreateChannel(channel), PutMember(channel_id, event.pubkey, "owner")]
    change = ChannelChange(channel_id, event.pubkey, added=(event.pubkey,), created=True)
    plan.after_commit.append(announce(rules, change))


# -- 9000 put user --------------------------------------------------------------------------------
async def put_user(rules: KindRules, plan: Plan, session: Session) -> None:
    """9000: add a member, reactivate one, or change a role."""
    event, channel_id = plan.stored.event, _channel_id(plan)
    actor, target = event.pubkey, _target(event)
    role = event.first_tag("role")
    if role is not None and role not in ROLE_NAMES:
        raise Invalid(f"invalid role: {role}")
    channel = await _channel(rules, channel_id)
    elevated = is_elevated(await active_member(rules, channel_id, actor))
    current = await active_member(rules, channel_id, target)
    if channel.visibility == "private" and target != actor and not elevated:
        raise Invalid("only owners/admins may add private-channel members")
    if role in ("owner", "admin") and not elevated:
        raise Invalid("only owners/admins may grant owner or admin")
    if current is not None and role is not None and role != current.role:
        if not elevated:
            raise Invalid("only owners/admins may change an active member's role")
        if current.role == "owner" and await is_only_owner(rules, channel_id, target):
            raise Invalid("cannot demote the last owner")
    # Absent role: a new (or returning) member gets `member`, an active one keeps its role.
    new_role = role if role is not None else (None if current is not None else "member")
    plan.effects.append(PutMember(channel_id, target, new_role, invited_by=actor))  # type: ignore[arg-type]
    added = () if current is not None else (target,)
    plan.after_commit.append(announce(rules, ChannelChange(channel_id, actor, added=added)))


# -- 9001 remove user -----------------------------------------------------------------------------
async def remove_user(rules: KindRules, plan: Plan, session: Session) -> None:
    """9001: self-removal, or removal by an elevated member or the target's registered owner."""
    event, channel_id = plan.stored.event, _channel_id(plan)
    actor, target = event.pubkey, _target(event)
    actor_row = await active_member(rules, channel_id, actor)
    if target == actor:
        if actor_row is None:
            raise NOT_ACTIVE()
    elif not (
        is_elevated(actor_row) or (actor_row is not None and await rules.registered_owner(target) == actor)
    ):
        raise Invalid("actor not authorized")
    current = await active_member(rules, channel_id, target)
    if current is None:
        return  # removing a non-member is accepted and changes nothing
    if current.role == "owner" and await is_only_owner(rules, channel_id, target):
        raise LAST_OWNER()
    plan.effects.append(RemoveMember(channel_id, target, removed_by=actor))
    plan.after_commit.append(announce(rules, ChannelChange(channel_id, actor, removed=(target,))))


# -- 9002 edit metadata ---------------------------------------------------------------------------
async def edit_metadata(rules: KindRules, plan: Plan, session: Session) -> None:
    """9002: change name, about, topic, purpose, visibility or ttl; archive or unarchive."""
    event, channel_id = plan.stored.event, _channel_id(plan)
    given = {name: value for name in METADATA_TAGS if (value := event.first_tag(name)) is not None}
    if not given:
        raise Invalid(
            "kind:9002 must include at least one metadata tag "
            "(name, about, archived, topic, purpose, visibility, ttl)"
        )
    changes: list[tuple[str, object]] = []
    if "archived" in given and given["archived"] not in ("true", "false"):
        raise Invalid(f"invalid archived value: {given['archived']}")
    for tag in CAPPED_TAGS[1:]:
        if tag in given:
            _capped(tag, given[tag])
    if "name" in given:
        name = _capped("name", clean_name(given["name"]))
        if not name:
            raise NAME_REQUIRED()
        changes.append(("name", name))
    if "visibility" in given:
        changes.append(("visibility", _visibility(given["visibility"])))
    if "ttl" in given:
        changes.append(("ttl_seconds", _ttl(given["ttl"], clearable=True)))
    changes += [(name, given[name]) for name in ("about", "topic", "purpose") if name in given]
    actor = await active_member(rules, channel_id, event.pubkey)
    if any(name in given for name in ELEVATED_EDITS) and not is_elevated(actor):
        raise Invalid("actor not authorized for name/about/archived/visibility/ttl changes")
    if any(name in given for name in MEMBER_EDITS) and actor is None:
        raise Invalid("not a member")
    channel = await _channel(rules, channel_id)
    if given.get("archived") == "true" and channel.archived_at is None:
        changes.append(("archived_at", plan.stored.received_at))
    elif given.get("archived") == "false":
        changes.append(("archived_at", None))
    plan.effects.append(UpdateChannel(channel_id, tuple(changes)))
    renamed = "name" in given and clean_name(given["name"]) != channel.name
    system = (
        {"type": "channel_renamed", "actor": event.pubkey, "name": clean_name(given["name"])}
        if renamed
        else None
    )
    plan.after_commit.append(announce(rules, ChannelChange(channel_id, event.pubkey, system=system)))


# -- 9008 delete ----------------------------------------------------------------------------------
async def delete_group(rules: KindRules, plan: Plan, session: Session) -> None:
    """9008: only an active owner; the channel and its events stop being served."""
    event, channel_id = plan.stored.event, _channel_id(plan)
    actor = await active_member(rules, channel_id, event.pubkey)
    if actor is None or actor.role != "owner":
        raise Invalid("only owner can delete group")
    plan.effects.append(DeleteChannel(channel_id))
    await workflows.channel_deleted(rules, plan, channel_id)
    plan.after_commit.append(announce(rules, ChannelChange(channel_id, event.pubkey, state=False)))


# -- 9021 join / 9022 leave -----------------------------------------------------------------------
async def join_request(rules: KindRules, plan: Plan, session: Session) -> None:
    """9021: join an open channel as `member` (no change when already active)."""
    event, channel_id = plan.stored.event, _channel_id(plan)
    channel = await rules.store.get_channel(channel_id)
    if channel is None:
        raise Invalid("channel not found")
    if channel.visibility == "private":
        raise Restricted("channel is private")
    if await active_member(rules, channel_id, event.pubkey) is not None:
        return
    plan.effects.append(PutMember(channel_id, event.pubkey, "member"))
    system = {"type": "member_joined", "actor": event.pubkey}
    change = ChannelChange(channel_id, event.pubkey, added=(event.pubkey,), system=system)
    plan.after_commit.append(announce(rules, change))


async def leave_request(rules: KindRules, plan: Plan, session: Session) -> None:
    """9022: an active member leaves; the only owner may not."""
    event, channel_id = plan.stored.event, _channel_id(plan)
    actor = await active_member(rules, channel_id, event.pubkey)
    if actor is None:
        raise NOT_ACTIVE()
    if actor.role == "owner" and await is_only_owner(rules, channel_id, event.pubkey):
        raise LAST_OWNER()
    plan.effects.append(RemoveMember(channel_id, event.pubkey, removed_by=event.pubkey))
    system = {"type": "member_left", "actor": event.pubkey}
    change = ChannelChange(channel_id, event.pubkey, removed=(event.pubkey,), system=system)
    plan.after_commit.append(announce(rules, change))


VALIDATORS: dict[int, Validator] = {
    9007: create_group,
    9000: put_user,
    9001: remove_user,
    9002: edit_metadata,
    9008: delete_group,
    9021: join_request,
    9022: leave_request,
}
