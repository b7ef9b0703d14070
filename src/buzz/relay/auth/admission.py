"""Relay admission after a verified NIP-42 AUTH (relay.md §4.4, §7.3 item 3; agents.md §1.5).

A closed workspace (`BUZZ_REQUIRE_RELAY_MEMBERSHIP`) admits its enrolled members. With
`BUZZ_ALLOW_NIP_OA_AUTH` it also admits an agent through NIP-AA: the AUTH event's one NIP-OA
`auth` tag names an owner, and the owner chain (each non-member owner's latest kind 0 carrying
one valid unconditional `auth` tag) reaches an enrolled member within `BUZZ_NIP_AA_MAX_DEPTH`
hops. Nothing is written: the grant is this connection's only and re-derived at every AUTH.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from buzz.core import nip_oa
from buzz.core.errors import Refusal, Restricted
from buzz.core.event import Event
from buzz.core.filters import Filter
from buzz.store.base import SYSTEM, EventStore

NOT_A_RELAY_MEMBER = Refusal(Restricted, "not a relay member")
NIP_AA_WINDOW_S = 120  # relay.md §17

IsMember = Callable[[str], Awaitable[bool]]


@dataclass(frozen=True, slots=True)
class Admission:
    """Who an AUTH admitted. `owners` are the keys whose ban refuses that AUTH besides the
    pubkey's own: its NIP-OA owner and, when NIP-AA admitted it, every owner up the chain. A
    session keeps them, so that banning any of them ends it (relay.md §7.3 item 2.3)."""

    pubkey: str
    owners: frozenset[str] = frozenset()


async def nip_aa_owners(
    auth_event: Event,
    store: EventStore,
    is_member: IsMember,
    max_depth: int,
    is_banned: IsMember | None = None,
) -> frozenset[str] | None:
    """relay.md §7.3 item 3 for a verified AUTH event whose pubkey is not a member.

    The owners the chain passed through, up to and including the member it reached, when it
    reaches one: a ban of any of them ends the session (`relay/auth/banwatch.py`), as it would
    refuse this AUTH. None for every failure (stale event, not exactly one `auth` tag, a tag
    that does not verify, a conditional tag further up, a loop, a banned owner (`is_banned`),
    depth beyond `max_depth`, a lookup error): admission fails closed.
    """
    if max_depth <= 0 or abs(int(time.time()) - auth_event.created_at) > NIP_AA_WINDOW_S:
        return None
    tags = nip_oa.auth_tags(auth_event)
    if len(tags) != 1:
        return None
    try:
        owner = nip_oa.verify_auth_tag_at(tags[0], auth_event.pubkey, auth_event.created_at)
    except nip_oa.InvalidAuthTag:
        return None
    visited = {auth_event.pubkey}
    chain: list[str] = []
    depth = 1
    while True:
        if depth > max_depth or owner in visited:
            return None
        if is_banned is not None and await is_banned(owner):
            return None
        visited.add(owner)
        chain.append(owner)
        if await is_member(owner):
            return frozenset(chain)
        owner_of_owner = await _unconditional_owner(store, owner)
        if owner_of_owner is None:
            return None
        owner, depth = owner_of_owner, depth + 1


async def _unconditional_owner(store: EventStore, pubkey: str) -> str | None:
    """The owner named by the one valid, unconditional `auth` tag of `pubkey`'s latest kind 0."""
    profiles = await store.query([Filter(kinds=frozenset({0}), authors=frozenset({pubkey}), limit=1)], SYSTEM)
    if not profiles:
        return None
    profile = profiles[0].event
    tags = nip_oa.auth_tags(profile)
    if len(tags) != 1:
        return None
    try:
        parsed = nip_oa.parse_auth_tag(tags[0])
        if parsed.conditions:
            return None
        return nip_oa.verify_event_auth(profile, event_verified=True)
    except nip_oa.InvalidAuthTag:
        return None
