"""The agent directory records from the client side (jobs spec §11, §13.2): personas (30175),
teams (30176) and managed agents (30177) — list, get, set (merged with the current head, kept
members included) and delete (NIP-09 `a` + `k`).

Every `set` runs the relay's own content checks (`buzz.jobs.records`) before signing, so a
secret (an `nsec1` key, an `apiKey` member …) is refused locally and never published. Writers
set `created_at = max(now, head + 1)` so an edit always wins.
"""

from __future__ import annotations

import time
from typing import Any

import orjson

from buzz.client.errors import NotFound, UserError
from buzz.client.session import Session
from buzz.client.users import Users
from buzz.client.values import pubkey_arg
from buzz.core.errors import BuzzError
from buzz.core.event import Event
from buzz.jobs import limits as L
from buzz.jobs.records import PERSONA_SLUG, RECORD_NAMES, check_record, contains_nsec, record_id_problem

Body = dict[str, Any]


def _content(event: Event) -> Body:
    try:
        body = orjson.loads(event.content)
    except orjson.JSONDecodeError:
        return {}
    return body if isinstance(body, dict) else {}


def _newest(events: list[Event]) -> Event | None:
    return min(events, key=lambda e: (-e.created_at, e.id), default=None)


class AgentRecords:
    def __init__(self, session: Session) -> None:
        self._s = session

    # -- shared plumbing ------------------------------------------------------------------------
    async def _heads(self, kind: int, author: str | None, d: str | None = None) -> list[Event]:
        flt: dict[str, Any] = {"kinds": [kind], "limit": 500}
        if author is not None:
            flt["authors"] = [author]
        if d is not None:
            flt["#d"] = [d]
        newest: dict[tuple[str, str], Event] = {}
        for event in await self._s.query([flt]):
            key = (event.pubkey, event.d_tag)
            if key not in newest or (-event.created_at, event.id) < (-newest[key].created_at, newest[key].id):
                newest[key] = event
        return sorted(newest.values(), key=lambda e: -e.created_at)

    async def _head(self, kind: int, author: str, d: str) -> Event | None:
        return _newest(await self._heads(kind, author, d))

    async def _publish(
        self, kind: int, d: str, body: Body, head: Event | None, extra: list[list[str]]
    ) -> Event:
        content = orjson.dumps(body).decode()
        if contains_nsec(content):
            raise UserError(f"{RECORD_NAMES[kind]} content must not carry secrets (nsec1 key)")
        try:
            check_record(kind, content)
        except BuzzError as exc:
            raise UserError(exc.reason) from None
        at = int(time.time())
        if head is not None:
            at = max(at, head.created_at + 1)
        event = self._s.sign(kind, content, [["d", d], *extra], at)
        await self._s.publish(event)
        return event

    async def _delete(self, kind: int, d: str) -> Event:
        head = await self._head(kind, self._s.pubkey, d)
        if head is None:
            raise NotFound(f"no record {kind}:{d} of yours")
        event = self._s.sign(5, "", [["a", f"{kind}:{self._s.pubkey}:{d}"], ["k", str(kind)]])
        await self._s.publish(event)
        return event

    # -- personas (30175) -------------------------------------------------------------------------
    @staticmethod
    def _persona_row(event: Event, with_prompt: bool = False) -> Body:
        body = _content(event)
        row = {
            "slug": event.d_tag,
            "author": event.pubkey,
            "display_name": body.get("display_name"),
            "model": body.get("model"),
            "provider": body.get("provider"),
            "runtime": body.get("runtime"),
            "shared": ["shared", "true"] in [list(t) for t in event.tags],
            "event_id": event.id,
            "created_at": event.created_at,
        }
        if with_prompt:
            row["system_prompt"] = body.get("system_prompt")
        return row

    async def personas(self, author: str | None = None, mine: bool = False) -> list[Body]:
        who = self._s.pubkey if mine else (pubkey_arg(author, "--author", on_curve=False) if author else None)
        return [self._persona_row(e) for e in await self._heads(L.KIND_PERSONA, who)]

    async def persona(self, slug: str, author: str | None = None) -> Body:
        who = pubkey_arg(author, "--author", on_curve=False) if author else self._s.pubkey
        head = await self._head(L.KIND_PERSONA, who, slug)
        if head is None:
            raise NotFound(f"persona {slug} not found (or not shared with you)")
        return self._persona_row(head, with_prompt=True)

    async def set_persona(self, slug: str, fields: Body, shared: bool | None) -> Body:
        if not PERSONA_SLUG.fullmatch(slug):
            raise UserError("--slug must match ^[a-z0-9][a-z0-9_-]{0,63}$")
        head = await self._head(L.KIND_PERSONA, self._s.pubkey, slug)
        body = {**(_content(head) if head else {}), **{k: v for k, v in fields.items() if v is not None}}
        if head is None and not body.get("display_name"):
            raise UserError("a new persona needs --display-name")
        was_shared = head is not None and ["shared", "true"] in [list(t) for t in head.tags]
        extra = [["shared", "true"]] if (was_shared if shared is None else shared) else []
        event = await self._publish(L.KIND_PERSONA, slug, body, head, extra)
        return {"slug": slug, "event_id": event.id}

    async def delete_persona(self, slug: str) -> Body:
        return {"slug": slug, "event_id": (await self._delete(L.KIND_PERSONA, slug)).id}

    # -- teams (30176) -----------------------------------------------------------------------------
    @staticmethod
    def _team_row(event: Event) -> Body:
        return {"team": event.d_tag, "author": event.pubkey, **_content(event), "event_id": event.id}

    async def teams(self, author: str | None = None) -> list[Body]:
        who = pubkey_arg(author, "--author", on_curve=False) if author else None
        return [self._team_row(e) for e in await self._heads(L.KIND_TEAM, who)]

    async def team(self, team: str, author: str | None = None) -> Body:
        who = pubkey_arg(author, "--author", on_curve=False) if author else self._s.pubkey
        head = await self._head(L.KIND_TEAM, who, team)
        if head is None:
            raise NotFound(f"team {team} not found")
        return self._team_row(head)

    async def set_team(
        self,
        team: str,
        name: str,
        description: str | None,
        instructions: str | None,
        personas: list[str] | None,
        clear_instructions: bool = False,
    ) -> Body:
        problem = record_id_problem(team)
        if problem is not None:
            raise UserError(f"--team: {problem}")
        head = await self._head(L.KIND_TEAM, self._s.pubkey, team)
        old = _content(head) if head else {}
        body = {**old, "name": name}
        if description is not None:
            body["description"] = description
        # "always publish" both members: readers take absent as unknown, null/[] as cleared
        body["instructions"] = (
            None
            if clear_instructions
            else instructions
            if instructions is not None
            else old.get("instructions")
        )
        body["persona_ids"] = personas if personas is not None else old.get("persona_ids", [])
        event = await self._publish(L.KIND_TEAM, team, body, head, [])
        return {"team": team, "event_id": event.id}

    async def delete_team(self, team: str) -> Body:
        return {"team": team, "event_id": (await self._delete(L.KIND_TEAM, team)).id}

    # -- managed agents (30177) -----------------------------------------------------------------------
    @staticmethod
    def _managed_row(event: Event) -> Body:
        body = _content(event)
        return {
            "agent": event.d_tag,
            "name": body.get("name"),
            "persona_id": body.get("persona_id"),
            "respond_to": body.get("respond_to"),
            "respond_to_allowlist": body.get("respond_to_allowlist", []),
            "parallelism": body.get("parallelism"),
            "event_id": event.id,
        }

    async def managed(self, owner: str | None = None) -> list[Body]:
        who = pubkey_arg(owner, "--owner", on_curve=False) if owner else self._s.pubkey
        return [self._managed_row(e) for e in await self._heads(L.KIND_MANAGED_AGENT, who)]

    async def managed_agent(self, agent: str) -> Body:
        pk = pubkey_arg(agent, "--agent")
        head = await self._head(L.KIND_MANAGED_AGENT, self._s.pubkey, pk)
        if head is None:
            raise NotFound(f"no managed-agent record of yours for {pk}")
        return self._managed_row(head)

    async def set_managed(
        self,
        agent: str,
        fields: Body,
        clear_allowlist: bool = False,
        no_persona: bool = False,
        allow: list[str] | None = None,
    ) -> Body:
        """Merge `fields` into my 30177 for `agent`; I must be its owner (its kind 0 tag).
        `allow` adds pubkeys to the allowlist the merge leaves (what a refused asker is told)."""
        pk = pubkey_arg(agent, "--agent")
        (profile,) = await Users(self._s).get([pk])
        if profile.owner != self._s.pubkey:
            raise UserError(
                f"you are not the owner of agent {pk} (its profile's auth tag names another owner, or none)"
            )
        head = await self._head(L.KIND_MANAGED_AGENT, self._s.pubkey, pk)
        body = {**(_content(head) if head else {}), **{k: v for k, v in fields.items() if v is not None}}
        if clear_allowlist:
            body["respond_to_allowlist"] = []
        if no_persona:
            body["persona_id"] = None
        if allow:
            current = body.get("respond_to_allowlist")
            listed = [p for p in current if isinstance(p, str)] if isinstance(current, list) else []
            added = [pubkey_arg(p, "--allow") for p in allow]
            body["respond_to_allowlist"] = list(dict.fromkeys([*listed, *added]))
        event = await self._publish(L.KIND_MANAGED_AGENT, pk, body, head, [])
        return {"agent": pk, "event_id": event.id}

    async def delete_managed(self, agent: str) -> Body:
        pk = pubkey_arg(agent, "--agent")
        return {"agent": pk, "event_id": (await self._delete(L.KIND_MANAGED_AGENT, pk)).id}
