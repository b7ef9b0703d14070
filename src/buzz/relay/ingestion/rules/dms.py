"""Direct messages, kinds 41010 (open), 41011 (add member), 41012 (hide) (relay.md §4.8).

A DM is a private channel of type `dm` whose active members are its participants. Its member
set never changes: 41010 and 41011 open (or reuse) the DM of exactly one participant set and
answer `OK true "response:{"channel_id":"<C>","created":<bool>}"`. 41010 is stored in that DM,
41011 and 41012 in the DM named by their `h` tag.
"""

from __future__ import annotations

import orjson

from buzz.core.channel_id import new_channel_id
from buzz.core.errors import Invalid, Refusal, Restricted
from buzz.core.event import Event
from buzz.core.keys import is_hex
from buzz.relay.auth.session import Session
from buzz.relay.ingestion.emit import ChannelChange
from buzz.relay.ingestion.rules.base import KindRules, Plan, Validator
from buzz.relay.ingestion.rules.membership import active_member, announce
from buzz.store.base import Channel, CreateChannel, PutMember, RegisterDm, SetDmHidden

DM_MAX_OTHERS = 8  # relay.md §17
DM_MAX_PARTICIPANTS = 9

NOT_A_DM_MEMBER = Refusal(Restricted, "not a member of this DM")
NO_PARTICIPANT = Refusal(Invalid, "pubkeys must contain at least 1 other participant")


def _p_values(event: Event) -> list[str]:
    values = event.tag_values("p")
    for value in values:
        if not is_hex(value, 64):
            raise Invalid(f"bad pubkey hex: {value}")
    return values


def response(channel_id: str, **fields: object) -> str:
    """The `response:` OK message: compact JSON after the prefix (relay.md §4.8 item 2, §7.8)."""
    return "response:" + orjson.dumps({"channel_id": channel_id, **fields}).decode()


async def open_dm(rules: KindRules, plan: Plan, participants: frozenset[str], actor: str) -> tuple[str, bool]:
    """Reuse the DM of exactly `participants` or create it (all `member`); returns (C, created).

    A reused DM gets back any participant that is no longer active. Effects and follow-ups are
    added to `plan`; they commit with the command event.
    """
    existing = await rules.store.find_dm(participants)
    if existing is not None:
        returning = tuple(
            sorted([pk for pk in participants if await active_member(rules, existing, pk) is None])
        )
        plan.effects += [PutMember(existing, pk, "member", invited_by=actor) for pk in returning]
        if returning:
            plan.after_commit.append(announce(rules, ChannelChange(existing, actor, added=returning)))
        return existing, False
    channel_id = new_channel_id()
    channel = Channel(
        id=channel_id,
        name="",
        visibility="private",
        created_by=actor,
        created_at=plan.stored.received_at,
        channel_type="dm",
    )
    members = tuple(sorted(participants))
    plan.effects.append(CreateChannel(channel))
    plan.effects += [
        PutMember(channel_id, pk, "member", invited_by=None if pk == actor else actor) for pk in members
    ]
    plan.effects.append(RegisterDm(channel_id, participants))
    system = {"type": "dm_created", "actor": actor, "participants": list(members)}
    change = ChannelChange(channel_id, actor, added=members, system=system, created=True)
    plan.after_commit.append(announce(rules, change))
    return channel_id, True


async def dm_open(rules: KindRules, plan: Plan, session: Session) -> None:
    """41010: 1–8 `p`, no `h`; the set is the author plus the distinct `p` values."""
    event = plan.stored.event
    others = _p_values(event)
    if not others or set(others) == {event.pubkey}:  # "other": the author alone is no DM
        raise NO_PARTICIPANT()
    if len(others) > DM_MAX_OTHERS:
        raise Invalid("pubkeys may contain at most 8 other participants (9 total)")
    channel_id, created = await open_dm(rules, plan, frozenset([event.pubkey, *others]), event.pubkey)
    plan.stored = plan.stored.with_channel(channel_id)
    plan.effects.append(SetDmHidden(channel_id, event.pubkey, hidden=False))  # §4.8 item 4
    plan.response = response(channel_id, created=created)


async def _own_dm(rules: KindRules, plan: Plan) -> str:
    """The DM named by `h`: the author must be an active member and it must be a DM."""
    event, channel_id = plan.stored.event, plan.stored.channel_id
    if channel_id is None:
        raise Invalid("channel-scoped events must include an h tag")
    if await active_member(rules, channel_id, event.pubkey) is None:
        raise NOT_A_DM_MEMBER()
    channel = await rules.store.get_channel(channel_id)
    if channel is None or channel.channel_type != "dm":
        raise Invalid("channel is not a DM")
    return channel_id


async def dm_add_member(rules: KindRules, plan: Plan, session: Session) -> None:
    """41011: open (or reuse) the DM of the current participants plus the `p` values."""
    event = plan.stored.event
    channel_id = await _own_dm(rules, plan)
    added = _p_values(event)
    if not added:
        raise NO_PARTICIPANT()
    current = {m.pubkey for m in await rules.store.active_members(channel_id)}
    merged = frozenset(current | {event.pubkey} | set(added))
    if len(merged) > DM_MAX_PARTICIPANTS:
        raise Invalid("DM supports at most 9 participants")
    target, created = await open_dm(rules, plan, merged, event.pubkey)
    plan.response = response(target, created=created)


async def dm_hide(rules: KindRules, plan: Plan, session: Session) -> None:
    """41012: hide the DM for its author until the author opens the same set again."""
    channel_id = await _own_dm(rules, plan)
    plan.effects.append(SetDmHidden(channel_id, plan.stored.event.pubkey, hidden=True))
    plan.response = response(channel_id, hidden=True)


VALIDATORS: dict[int, Validator] = {41010: dm_open, 41011: dm_add_member, 41012: dm_hide}
