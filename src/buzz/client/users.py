"""Profiles and presence (agents.md §2.2, §3.8 item 3).

Profiles are kind 0 (content a JSON object; `is_agent`/`owner` from one valid NIP-OA `auth`
tag). Presence is kind 20001, ephemeral: set over WebSocket after NIP-42 AUTH (the bridge
refuses ephemeral kinds), read back through `POST /query` `{"kinds":[20001],"authors":[…]}`,
which the relay answers from its presence memory (relay.md §12.2 item 2).
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import Any

import orjson

from buzz.client.errors import Refused, UserError
from buzz.client.lookups import PROFILE_KIND, profiles
from buzz.client.models import PresenceSet, Profile, ProfileSet
from buzz.client.session import Session, websocket_failure
from buzz.client.values import pubkey_arg
from buzz.client.views import profile_fields, profile_view
from buzz.core.nip_oa import TAG_NAME as AUTH_TAG_NAME

PRESENCE_KIND = 20001
PRESENCE_STATES = ("online", "away", "offline")
NAME_SEARCH_LIMIT = 100
PROFILE_SCAN_LIMIT = 1000  # the relay's one clamp (relay.md §6.5): the newest 1000 profiles


def presence_state(content: str | None) -> str:
    """A 20001 content → online / away / offline (agents.md §3.8 item 3, relay.md §12.2 item 2).

    None (no live presence) and `offline` are offline; the `status` of JSON content or the bare
    text is used when it is `away` or `offline`; any other set status counts as online.
    """
    if content is None:
        return "offline"
    status: Any = content
    try:
        obj = orjson.loads(content)
    except orjson.JSONDecodeError:
        obj = None
    if isinstance(obj, dict):
        status = obj.get("status")
    status = status.strip().lower() if isinstance(status, str) else ""
    return status if status in ("away", "offline") else "online"


class Users:
    def __init__(self, session: Session) -> None:
        self._s = session

    async def get(self, pubkeys: Iterable[str]) -> list[Profile]:
        """The profiles of these pubkeys (hex or npub), in order, de-duplicated; a pubkey
        without a profile has null fields. A read: any 64 hex is looked up, a curve point or not."""
        keys = list(dict.fromkeys(pubkey_arg(p, on_curve=False) for p in pubkeys))
        found = await profiles(self._s, keys)
        return [profile_view(pk, found.get(pk)) for pk in keys]

    async def find(self, name: str) -> list[Profile]:
        """Profiles whose name or display name contains `name` (case-insensitive substring).

        Full-text search (relay.md §11) matches whole words only, so it finds profiles of any
        age named by a word of `name`; a scan of the newest PROFILE_SCAN_LIMIT profiles finds
        the substrings. Search hits come first (best first), then the scan's, each pubkey once.
        """
        needle = name.strip().lower()
        if not needle:
            raise UserError("--name is empty")
        hits = await self._s.query([{"kinds": [PROFILE_KIND], "search": name, "limit": NAME_SEARCH_LIMIT}])
        scanned = await self._s.query([{"kinds": [PROFILE_KIND], "limit": PROFILE_SCAN_LIMIT}])
        rows: dict[str, Profile] = {}
        for event in hits + scanned:
            view = profile_view(event.pubkey, event)
            names = [n.lower() for n in (view.name, view.display_name) if n]
            if event.pubkey not in rows and any(needle in n for n in names):
                rows[event.pubkey] = view
        return list(rows.values())

    async def set_profile(
        self,
        name: str | None = None,
        picture: str | None = None,
        about: str | None = None,
        nip05: str | None = None,
    ) -> ProfileSet:
        """Publish my kind 0, keeping the fields and tags I do not change; with an auth tag the
        profile carries it (marks an agent). Raises UserError when nothing is given."""
        s = self._s
        changes = {"name": name, "picture": picture, "about": about, "nip05": nip05}
        changes = {k: v for k, v in changes.items() if v is not None}
        if not changes:
            raise UserError("nothing to set: give --name, --avatar, --about or --nip05")
        current = (await profiles(s, [s.pubkey])).get(s.pubkey)
        content = profile_fields(current) | changes
        tags = [list(t) for t in current.tags] if current is not None else []
        if s.identity.auth_tag is not None:
            tags = [t for t in tags if not t or t[0] != AUTH_TAG_NAME] + [list(s.identity.auth_tag)]
        # a replaceable event only wins with a newer created_at (relay.md §3.1)
        created_at = max(int(time.time()), current.created_at + 1 if current is not None else 0)
        event = s.sign(PROFILE_KIND, orjson.dumps(content).decode(), tags, created_at)
        await s.publish(event)
        return ProfileSet(event.id, s.pubkey, content)

    async def presence(self, pubkeys: Iterable[str]) -> dict[str, str]:
        """{pubkey: online | away | offline} as the relay reports it (presence expires after 90 s).
        A read: any 64 hex is asked about, a curve point or not."""
        keys = list(dict.fromkeys(pubkey_arg(p, on_curve=False) for p in pubkeys))
        if not keys:
            raise UserError("--pubkeys is empty")
        live: dict[str, str] = {}
        for event in await self._s.query([{"kinds": [PRESENCE_KIND], "authors": keys}]):
            live.setdefault(event.pubkey, event.content)  # newest first
        return {pk: presence_state(live.get(pk)) for pk in keys}

    async def set_presence(self, status: str) -> PresenceSet:
        """Publish my 20001 over WebSocket. Raises UserError (status), AuthError (AUTH refused),
        NetworkError, or Refused (`OK false`)."""
        if status not in PRESENCE_STATES:
            raise UserError(f"presence must be one of {', '.join(PRESENCE_STATES)}")
        event = self._s.sign(PRESENCE_KIND, status)
        async with self._s.websocket() as client:
            try:
                result = await client.publish(event)
            except Exception as exc:
                raise websocket_failure(exc) from None
        if not result.accepted:
            raise Refused(f"relay refused the event: {result.message}", relay_message=result.message)
        return PresenceSet(event.id, status)
