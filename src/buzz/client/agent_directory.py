"""The agent directory (jobs spec §13.1, §13.2 `buzz agents list`): every agent the caller can
see — the agents among the active members of the channels it can read (39002), and its own
agents (its managed-agent records) — with owner, persona, whom it answers, presence and live
status.

- An agent is a kind 0 with one valid NIP-OA `auth` tag; its owner is the one that tag names.
- Persona, respond-to, allowlist and parallelism come from the owner's 30177 for the agent;
  a 30177 by anyone else is ignored (checklist 52). Without one, `respond_to` is the
  `respondTo` of a fresh work-status snapshot, else "unknown".
- Live status folds the agent's 30181 snapshots (`buzz.jobs.work_status.directory_status`):
  the relay returns only those of channels the caller can read, and a snapshot of a channel
  outside the readable list read here is dropped as well, so a channel the caller cannot read
  is never shown or counted.
"""

from __future__ import annotations

import time
from typing import Any

import orjson

from buzz.client.errors import NotFound
from buzz.client.lookups import MEMBERS_KIND, METADATA_KIND, profiles
from buzz.client.session import Session
from buzz.client.users import Users
from buzz.client.values import channel_arg
from buzz.client.views import channel_view, display_name, member_roles, newest_per_channel, profile_view
from buzz.core.event import Event
from buzz.jobs import limits as L
from buzz.jobs import work_status

Body = dict[str, Any]


def _content(event: Event | None) -> Body:
    if event is None:
        return {}
    try:
        body = orjson.loads(event.content)
    except orjson.JSONDecodeError:
        return {}
    return body if isinstance(body, dict) else {}


def _newest_by(events: list[Event], key: Any) -> dict[Any, Event]:
    out: dict[Any, Event] = {}
    for e in events:
        k = key(e)
        if k not in out or (-e.created_at, e.id) < (-out[k].created_at, out[k].id):
            out[k] = e
    return out


class AgentDirectory:
    def __init__(self, session: Session) -> None:
        self._s = session

    async def _channels(self, channel: str | None) -> dict[str, str]:
        """{channel id: name} of the channels I can read (only `channel` with it)."""
        flt: Body = {"kinds": [METADATA_KIND]}
        if channel is not None:
            flt["#d"] = [channel_arg(channel)]
        metas = newest_per_channel(await self._s.query([flt]))
        if channel is not None and not metas:
            raise NotFound(f"channel not found: {flt['#d'][0]}")
        return {cid: channel_view(meta).name for cid, meta in metas.items()}

    async def list(self, channel: str | None = None, now: float | None = None) -> list[Body]:
        s, now = self._s, time.time() if now is None else now
        names = await self._channels(channel)
        members: dict[str, None] = {}
        if names:
            rosters = newest_per_channel(await s.query([{"kinds": [MEMBERS_KIND], "#d": sorted(names)}]))
            for roster in rosters.values():
                members.update(dict.fromkeys(member_roles(roster)))
        mine: dict[str, None] = {}
        if channel is None:  # my own agents, wherever they are: those my 30177s name, if mine
            records = await s.query([{"kinds": [L.KIND_MANAGED_AGENT], "authors": [s.pubkey]}])
            mine = dict.fromkeys(e.d_tag for e in records if len(e.d_tag) == 64)
        found = await profiles(s, {**members, **mine})
        agents = {pk: profile_view(pk, found.get(pk)) for pk in {**members, **mine}}
        agents = {
            pk: p
            for pk, p in agents.items()
            if p.is_agent and p.owner is not None and (pk in members or p.owner == s.pubkey)
        }
        if not agents:
            return []
        keys, owners = sorted(agents), sorted({p.owner for p in agents.values() if p.owner})
        records = _newest_by(
            await s.query([{"kinds": [L.KIND_MANAGED_AGENT], "authors": owners, "#d": keys}]),
            lambda e: (e.pubkey, e.d_tag),
        )
        policy = {pk: _content(records.get((agents[pk].owner, pk))) for pk in keys}
        slugs = sorted(
            {str(b["persona_id"]) for b in policy.values() if isinstance(b.get("persona_id"), str)}
        )
        personas = (
            _newest_by(
                await s.query([{"kinds": [L.KIND_PERSONA], "authors": owners, "#d": slugs}]),
                lambda e: (e.pubkey, e.d_tag),
            )
            if slugs
            else {}
        )
        snapshot_filter: Body = {"kinds": [L.KIND_AGENT_WORK_STATUS], "authors": keys}
        if channel is not None:
            snapshot_filter["#h"] = sorted(names)
        seen: dict[str, list[work_status.Seen]] = {pk: [] for pk in keys}
        for event in await s.query([snapshot_filter]):
            snap = work_status.read(event)
            if snap is not None and snap.agent in seen:
                seen[snap.agent].append(snap)
        try:
            presence: dict[str, str | None] = dict(await Users(s).presence(keys))
        except Exception:  # the directory still lists; presence is "unknown"
            presence = {}
        owner_names = {pk: display_name(found.get(pk)) for pk in owners}
        missing = [pk for pk in owners if pk not in found]
        if missing:
            extra = await profiles(s, missing)
            owner_names.update({pk: display_name(extra.get(pk)) for pk in missing})
        rows = []
        for pk in keys:
            profile, body = agents[pk], policy[pk]
            status = work_status.directory_status(seen[pk], presence.get(pk), now, names)
            fresh = [x for x in seen[pk] if x.channel_id in names and x.is_fresh(now)]
            reported = next((x.respond_to for x in fresh if x.respond_to), None)
            slug = body.get("persona_id") if isinstance(body.get("persona_id"), str) else None
            persona = personas.get((profile.owner, slug)) if slug else None
            rows.append(
                {
                    "pubkey": pk,
                    "npub": profile.npub,
                    "name": profile.display_name or profile.name,
                    "owner": profile.owner,
                    "owner_name": owner_names.get(profile.owner or ""),
                    "persona": slug,
                    "persona_name": _content(persona).get("display_name") if persona else None,
                    "respond_to": body.get("respond_to") or reported or "unknown",
                    "respond_to_allowlist": body.get("respond_to_allowlist") or [],
                    "parallelism": body.get("parallelism"),
                    "presence": presence.get(pk, "unknown"),
                    "status": status,
                }
            )
        rows.sort(key=lambda r: ((r["name"] or "").lower(), r["pubkey"]))
        return rows
