"""Ingest steps 12–14 of relay.md §8: channel derivation, channel checks, then the per-kind
validator from the `VALIDATORS` table (built in `buzz.relay.rules`).

The result is a `Plan`: the envelope with its derived channel, the effects the store applies
in the same transaction as the insert, the follow-ups to run after commit, and the OK
message. Per-kind rules are a table (`VALIDATORS`), not branches in the pipeline.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from buzz.core import kinds, limits
from buzz.core.channel_id import is_channel_id
from buzz.core.errors import Invalid, Refusal, Restricted
from buzz.core.event import Event
from buzz.core.filters import Filter
from buzz.core.keys import is_hex
from buzz.core.stored import StoredEvent
from buzz.relay.access import ChannelAccess
from buzz.relay.session import Session
from buzz.store.base import SYSTEM, Channel, Effect, EventStore

if TYPE_CHECKING:
    from buzz.media.service import MediaService
    from buzz.relay.emit import Emitter
    from buzz.relay.presence import Presence
    from buzz.workflows.engine import Engine

NOT_A_MEMBER = Refusal(Restricted, "not a channel member")

AfterCommit = Callable[[], Awaitable[None]]


Address = tuple[int, str, str]  # (kind, pubkey, d) of an `a` tag


@dataclass
class Plan:
    stored: StoredEvent
    effects: list[Effect] = field(default_factory=list)
    after_commit: list[AfterCommit] = field(default_factory=list)
    response: str = ""
    # A kind 5's targets, read once while its channel is derived: the events its `e` tags
    # name (deleted ones included) and the addresses of its `a` tags, each once, in tag order.
    targets: tuple[StoredEvent, ...] = ()
    addresses: tuple[Address, ...] = ()


Validator = Callable[["KindRules", Plan, Session], Awaitable[None]]


class KindRules:
    """Holds what the rules need to look things up (store, channel access)."""

    def __init__(
        self,
        store: EventStore,
        access: ChannelAccess,
        relay_pubkey: str,
        table: kinds.KindTable = kinds.BUILTIN,
    ) -> None:
        self.store = store
        self.access = access
        self.relay_pubkey = relay_pubkey
        self.table = table  # the relay's kinds (places of the operator's opened kinds too)
        # Set by the composition root (buzz.relay.relay): relay-emitted follow-ups (§4.6, §4.7)
        # and the presence register (§12.2 item 2). None in a bare KindRules: no follow-ups.
        self.emitter: Emitter | None = None
        self.presence: Presence | None = None
        self.media: MediaService | None = None  # imeta checks and references (media.md §9.2)
        self.workflows: Engine | None = None  # the workflow engine (workflows.md), when enabled
        self._validators: dict[int, Validator] | None = None  # `buzz.relay.rules.VALIDATORS`

    # -- ephemeral (relay.md §12.2) ----------------------------------------------------------
    async def ephemeral(self, stored: StoredEvent, session: Session) -> StoredEvent:
        channel_id = next((h for h in stored.event.tag_values("h") if is_channel_id(h)), None)
        if channel_id is not None:
            await self.write_gate(channel_id, stored.event.pubkey)
            stored = stored.with_channel(channel_id)
        await self.remember_presence(stored)
        return stored

    async def remember_presence(self, stored: StoredEvent) -> None:
        """relay.md §12.2 item 2: keep the newest 20001 per pubkey (after its channel check)."""
        if self.presence is not None and stored.event.kind == PRESENCE_KIND:
            await self.presence.record(stored)  # in Redis across replicas (§12.4)

    # -- stored kinds ----------------------------------------------------------------------
    async def plan(self, stored: StoredEvent, session: Session) -> Plan:
        if stored.event.kind == kinds.DELETION_KIND:
            targets, addresses, channel_id = await self.deletion_targets(stored.event)
            plan = Plan(stored.with_channel(channel_id), targets=targets, addresses=addresses)
        else:
            plan = Plan(stored.with_channel(await self.derive_channel(stored)))
        await self.channel_checks(plan.stored)
        what = TARGET_H_KINDS.get(stored.event.kind)
        if what is not None:  # after the write gate: a refusal naming C is for who may write there
            check_target_h(stored.event, plan.stored.channel_id, what)
        self._check_d_tag(plan.stored)
        validators = self._validators
        if validators is None:  # the table imports this module: read it once, at first use
            from buzz.relay.rules import VALIDATORS

            validators = self._validators = VALIDATORS
        validator = validators.get(stored.event.kind)
        if validator is not None:
            await validator(self, plan, session)
        media = self.media
        if media is not None and media.may_reference(stored.event):  # §8 item 14: local imeta tags
            refs = await media.refs_effect(plan.stored, effective_author(plan.stored, self.relay_pubkey))
            if refs is not None:
                plan.effects.append(refs)
        return plan

    async def channel_checks(self, stored: StoredEvent) -> None:
        """relay.md §8 item 13 for a channel event: the write gate (§4.3 item 2) unless the kind
        applies its own rules (9002 and 9008 get it anyway, `HIDE_PRIVATE_RULES`), existence
        for the kinds that still require it, then the archived
        check (§4.3 item 3). Raises Restricted / Invalid; a store failure propagates (fail closed)."""
        channel_id, event = stored.channel_id, stored.event
        if channel_id is None:
            return
        # One read of the row serves the write gate and the checks after it.
        channel = await self.store.get_channel(channel_id)
        if event.kind not in OWN_CHANNEL_RULES or event.kind in HIDE_PRIVATE_RULES:
            await self.write_gate(channel_id, event.pubkey, channel)
        if channel is None:
            if event.kind in EXISTING_CHANNEL_RULES:
                raise NOT_A_MEMBER()
            return
        if channel.archived_at is not None and not _unarchives(event):
            raise CHANNEL_ARCHIVED()

    async def derive_channel(self, stored: StoredEvent) -> str | None:
        """relay.md §4.2, in order (kind 5: `deletion_targets`)."""
        event = stored.event
        if event.kind == DM_OPEN_KIND:
            return None  # §4.8 item 2: the DM validator opens or reuses the DM and sets it
        info = self.table.lookup(event.kind)
        place = info.place if info else kinds.Place.NONE
        if event.kind == 7:
            target_id = next((v for v in reversed(event.tag_values("e")) if is_hex(v, 64)), None)
            if target_id is None:
                raise Invalid("reaction must reference a target event via e tag")
            target = await self.store.get(target_id)
            if target is None:
                raise Invalid("reaction target event not found")
            return target.channel_id
        if place is kinds.Place.G:
            return None
        channel_id = next((h for h in event.tag_values("h") if is_channel_id(h)), None)
        if channel_id is None and place is kinds.Place.H:
            raise Invalid("channel-scoped events must include an h tag")
        return channel_id

    async def deletion_targets(
        self, event: Event
    ) -> tuple[tuple[StoredEvent, ...], tuple[Address, ...], str | None]:
        """A kind 5's targets (NIP-09: one or a list of `e` and `a` tags; repeats count once)
        and the one channel they are in (None: all global). Raises Invalid for no target, more
        than MAX_DELETION_TARGETS, an `e` target the store does not hold, a malformed `a`, and
        targets in different channels (one deletion is one channel's event, decision 175)."""
        e_ids = list(dict.fromkeys(event.tag_values("e")))
        a_values = list(dict.fromkeys(event.tag_values("a")))
        n = len(e_ids) + len(a_values)
        if n == 0:
            raise Invalid("deletion events must reference a target via e or a tag")
        if n > limits.MAX_DELETION_TARGETS:
            raise Invalid(f"too many deletion targets ({n}, max {limits.MAX_DELETION_TARGETS})")
        targets: list[StoredEvent] = []
        channels: set[str | None] = set()
        for event_id in e_ids:
            target = await self.store.get(event_id, include_deleted=True) if is_hex(event_id, 64) else None
            if target is None:
                raise Invalid("target event not found" + (f": {event_id}" if n > 1 else ""))
            targets.append(target)
            channels.add(target.channel_id)
        addresses: list[Address] = []
        for value in a_values:
            address = parse_address(value)
            if address is None:
                raise Invalid("malformed a tag (expected <kind>:<pubkey>:<d>)")
            addresses.append(address)
            channels.add(await self._address_channel(address))
        if len(channels) > 1:
            raise Invalid("deletion targets must all be in one channel (or all outside channels)")
        return tuple(targets), tuple(addresses), channels.pop()

    async def _address_channel(self, address: Address) -> str | None:
        """The channel of the newest live version at `address` (None: global, or none stored)."""
        kind, pubkey, d = address
        flt = Filter(
            kinds=frozenset({kind}), authors=frozenset({pubkey}), tags={"d": frozenset({d})}, limit=1
        )
        heads = await self.store.query([flt], SYSTEM)
        return heads[0].channel_id if heads else None

    async def write_gate(self, channel_id: str, pubkey: str, *channel: Channel | None) -> None:
        """relay.md §4.3 item 2: exists and (active member or open), else restricted. An
        optional `channel` is the row the caller has just read (else it is read here)."""
        if not await self.access.writable(channel_id, pubkey, *channel):  # type: ignore[attr-defined]
            raise NOT_A_MEMBER()

    @staticmethod
    def _check_d_tag(stored: StoredEvent) -> None:
        if kinds.is_addressable(stored.event.kind):
            n = len(stored.event.d_tag.encode("utf-8"))
            if n > limits.D_TAG_MAX_BYTES:
                raise Invalid(f"d tag too long ({n} bytes, max {limits.D_TAG_MAX_BYTES})")

    async def registered_owner(self, agent: str) -> str | None:
        """The agent → owner mapping recorded at AUTH (relay.md §7.3 item 4), or None."""
        getter = getattr(self.store, "get_agent_owner", None)
        return await getter(agent) if getter else None

    async def effective_author_or_owner(self, target: StoredEvent, actor: str) -> bool:
        """relay.md §10.3 effective author, or that author's registered owner, is `actor`."""
        author = effective_author(target, self.relay_pubkey)
        return actor == author or (await self.registered_owner(author)) == actor


def effective_author(stored: StoredEvent, relay_pubkey: str) -> str:
    """relay.md §10.3."""
    event = stored.event
    if event.pubkey != relay_pubkey:
        return event.pubkey
    for name in ("actor", "p"):
        value = event.first_tag(name)
        if value is not None and is_hex(value, 64):
            return value
    return relay_pubkey


# Place T kinds (relay.md §4.2) → what their refusals call them.
TARGET_H_KINDS: dict[int, str] = {7: "reactions", kinds.DELETION_KIND: "deletions"}


def check_target_h(event: Event, channel_id: str | None, what: str) -> None:
    """Reactions and deletions take their target's channel (relay.md §4.2), and carry it as
    their `h` tag (NIP-29): then a `#h` filter matches them by NIP-01's own tag rule, the only
    one every client re-checks (issue 25 item 5, docs/decisions.md 174). A global target takes
    no `h`."""
    values = set(event.tag_values("h"))
    if channel_id is None:
        if values:
            raise Invalid(f"{what} of events outside channels carry no h tag: remove it")
        return
    if not values:
        raise Invalid(f'{what} of a channel event must carry its channel: add ["h","{channel_id}"]')
    if values != {channel_id}:
        raise Invalid(f"h tag must name the target's channel {channel_id}")


def parse_address(value: str) -> Address | None:
    """`<kind>:<pubkey>:<d>` split on the first two colons, or None when malformed."""
    parts = value.split(":", 2)
    if len(parts) != 3 or not parts[0].isdigit() or not is_hex(parts[1], 64):
        return None
    return int(parts[0]), parts[1], parts[2]


# Kinds that skip the generic write gate and apply their own channel rules (relay.md §4.3 item 2).
OWN_CHANNEL_RULES = frozenset({9007, 9021, 9002, 9005, 9008, 40003, 41010, 41011, 41012})
# Of those, the kinds that still require the channel to exist (`restricted: not a channel member`).
EXISTING_CHANNEL_RULES = frozenset({9002, 9005, 9008, 40003})
# Of those, the admin kinds that no non-member of a private channel can ever pass (9002 needs an
# active or elevated member, 9008 an active owner): for them the write gate runs first, so a
# private channel the author cannot read is refused exactly like a missing one (`restricted: not
# a channel member`, §4.3 item 2's "so private channels are not revealed"), before any tag check
# or the archived check could tell the two apart (docs/decisions.md). 9021 keeps §4.5's
# distinct `channel not found` / `channel is private`, which the spec fixes.
HIDE_PRIVATE_RULES = frozenset({9002, 9008})
CHANNEL_ARCHIVED = Refusal(Invalid, "channel is archived")
DM_OPEN_KIND = 41010
PRESENCE_KIND = 20001


def _unarchives(event: Event) -> bool:
    """Kind 9002 carrying `["archived","false"]`: the one event an archived channel accepts."""
    return event.kind == 9002 and any(
        len(t) >= 2 and t[0] == "archived" and t[1] == "false" for t in event.tags
    )
