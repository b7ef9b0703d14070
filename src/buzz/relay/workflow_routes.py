"""HTTP routes of the workflow engine (workflows.md §14, §15): `POST /hooks/{id}` (the secret is
the credential; every unknown or unusable hook answers one identical 404) and the NIP-98 reads
`GET /workflows…` with keyset paging, plus `POST /workflows/validate`.

Thin glue over `Engine.webhook`, the store's workflow reads and the validator. The query
string of `/hooks` is never logged (`httplog` logs paths only).
"""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime
from typing import Any

from aiohttp import web

from buzz.core.channel_id import is_channel_id
from buzz.relay.http_bridge import Bridge, _Refusal
from buzz.relay.relay import Relay
from buzz.store.base import StoreError
from buzz.workflows.mentions import mention_warnings
from buzz.workflows.rows import approval_json, run_json
from buzz.workflows.schedule import next_fires
from buzz.workflows.validate import validate

HOOK_BODY_MAX = 1_048_576
NOT_FOUND = {"error": "workflow not found"}


def _json(status: int, body: dict[str, Any], headers: dict[str, str] | None = None) -> web.Response:
    return web.json_response(body, status=status, headers=headers)


class WorkflowRoutes:
    def __init__(self, relay: Relay) -> None:
        self.relay = relay
        self.engine = relay.workflows
        self.bridge = Bridge(relay)

    @property
    def enabled(self) -> bool:
        return self.relay.config.workflows.enabled

    async def hook(self, request: web.Request) -> web.Response:
        workflow_id = request.match_info["id"]
        if not self.enabled:
            return _json(404, NOT_FOUND)
        if not is_channel_id(workflow_id):
            return _json(400, {"error": "invalid workflow UUID"})
        secret = request.headers.get("X-Webhook-Secret")
        if secret is None:
            secret = request.query.get("secret")
        body = await request.content.read(HOOK_BODY_MAX + 1)
        status, answer, headers = await self.engine.webhook(workflow_id, secret, body,
                                                            request.headers.get("Idempotency-Key"))  # fmt: skip
        return _json(status, answer, headers)

    async def _reader(self, request: web.Request) -> str:
        if not self.enabled:
            raise _Refusal(404, NOT_FOUND)
        return await self.bridge._authenticate(request, b"")

    async def _readable_workflow(self, request: web.Request) -> Any:
        reader = await self._reader(request)
        wf = await self.engine.store.workflow(request.match_info["wid"])
        if wf is None or wf.status == "deleted":
            raise _Refusal(404, NOT_FOUND)
        if not await self.relay.store.readable_channels([wf.channel_id], reader):
            raise _Refusal(404, NOT_FOUND)
        return wf

    async def _workflow_full(self, wf: Any) -> dict[str, Any]:
        """`<workflow>` of §15 item 1 with its effective state and its newest run."""
        out = self._workflow_json(wf)
        out["effectively_enabled"] = await self.engine.effectively_enabled(wf)
        if wf.status == "suspended":  # §18 item 1: the list shows why (decision 322)
            banned = await self.engine.store.banned_among({wf.owner})
            out["status_reason"] = ("owner_banned: the owner is banned from this relay" if banned else
                                    "owner_left: the owner is no longer an active member of the channel")  # fmt: skip
        last = await self.engine.store.workflow_runs(wf.id, None, 1)
        out["last_run"] = (
            {"id": last[0].id, "status": last[0].status, "created_at": last[0].created_at} if last else None
        )
        return out

    def _workflow_json(self, wf: Any) -> dict[str, Any]:
        definition = self.engine.definition(wf)
        trigger: dict[str, Any] = {"on": wf.trigger_on}
        for key in ("emoji",):
            if getattr(definition.trigger, key, None) is not None:
                trigger[key] = getattr(definition.trigger, key)
        schedule = getattr(definition.trigger, "schedule", None)
        fires = next_fires(schedule, int(time.time()), 1) if schedule is not None else []
        return {"id": wf.id, "name": wf.name, "description": definition.description, "owner": wf.owner,
                "channel_id": wf.channel_id, "enabled": wf.enabled, "status": wf.status,
                "trigger": trigger, "elevated": wf.elevated, "revision": wf.head_event_id,
                "definition_hash": wf.definition_hash, "has_webhook_secret": wf.secret_hash is not None,
                "created_at": wf.created_at, "updated_at": wf.updated_at,
                "next_fire_at": fires[0] if fires else None}  # fmt: skip

    async def _answer(self, request: web.Request, fn: Any) -> web.Response:
        try:
            return await fn(request)
        except _Refusal as refusal:
            return refusal.response  # type: ignore[return-value]
        except StoreError:
            return _json(500, {"error": "internal server error"})

    async def list_workflows(self, request: web.Request) -> web.Response:
        async def go(request: web.Request) -> web.Response:
            reader = await self._reader(request)
            channel_id = request.query.get("channel", "")
            if not is_channel_id(channel_id) or not await self.relay.store.readable_channels(
                [channel_id], reader
            ):
                return _json(404, {"error": "channel not found"})
            rows = await self.engine.store.workflows(channel_id=channel_id, limit=1000)
            return _json(200, {"workflows": [await self._workflow_full(wf) for wf in rows]})

        return await self._answer(request, go)

    async def get_workflow(self, request: web.Request) -> web.Response:
        async def go(request: web.Request) -> web.Response:
            wf = await self._readable_workflow(request)
            head = await self.relay.store.get(wf.head_event_id)
            return _json(
                200, {"workflow": await self._workflow_full(wf), "yaml": head.event.content if head else None}
            )

        return await self._answer(request, go)

    async def runs(self, request: web.Request) -> web.Response:
        async def go(request: web.Request) -> web.Response:
            wf = await self._readable_workflow(request)
            q = request.query
            try:
                limit = int(q.get("limit", "20"))
            except ValueError:
                limit = 0
            if not 1 <= limit <= 100:
                return _json(400, {"error": "limit must be between 1 and 100"})
            before, before_id = q.get("before"), q.get("before_id")
            if (before is None) != (before_id is None):
                return _json(400, {"error": "before and before_id must be supplied together"})
            cursor = None
            if before is not None and before_id is not None:
                at = _time(before)
                if at is None:
                    return _json(400, {"error": "before must be an RFC 3339 time or Unix seconds"})
                cursor = (at, before_id)
            rows = await self.engine.store.workflow_runs(wf.id, cursor, limit)
            out = []
            for row in rows:
                loaded = await self.engine.store.workflow_run(row.id)
                if loaded is not None:
                    out.append(run_json(*loaded))
            nxt = None
            if len(rows) == limit:
                last = rows[-1]
                nxt = {"before": datetime.fromtimestamp(last.created_at, UTC).isoformat().replace("+00:00", "Z"),
                       "before_id": last.id}  # fmt: skip
            return _json(200, {"runs": out, "next": nxt})

        return await self._answer(request, go)

    async def _run(self, request: web.Request) -> tuple[Any, Any]:
        wf = await self._readable_workflow(request)
        loaded = await self.engine.store.workflow_run(request.match_info["rid"])
        if loaded is None or loaded[0].workflow_id != wf.id:
            raise _Refusal(404, {"error": "workflow run not found"})
        return wf, loaded

    async def run(self, request: web.Request) -> web.Response:
        async def go(request: web.Request) -> web.Response:
            _, loaded = await self._run(request)
            return _json(200, {"run": run_json(*loaded)})

        return await self._answer(request, go)

    async def approvals(self, request: web.Request) -> web.Response:
        async def go(request: web.Request) -> web.Response:
            _, loaded = await self._run(request)
            rows = await self.engine.store.workflow_run_approvals(loaded[0].id)
            return _json(200, {"approvals": [approval_json(r) for r in rows]})

        return await self._answer(request, go)

    async def validate(self, request: web.Request) -> web.Response:
        async def go(request: web.Request) -> web.Response:
            if not self.enabled:
                return _json(404, NOT_FOUND)
            body = await self.bridge._body(request)
            asker = await self.bridge._authenticate(request, body)
            try:
                ask = json.loads(body)
            except ValueError:
                ask = None
            if not isinstance(ask, dict) or not isinstance(ask.get("yaml"), str):
                return _json(400, {"error": 'body must be {"yaml": "…"}'})
            now = int(time.time())
            report = validate(ask["yaml"], now=now, channel_id=ask.get("channel_id"))
            definition = report.definition
            schedule = getattr(definition.trigger, "schedule", None) if definition else None
            warnings = list(report.warnings)
            channel = ask.get("channel_id")
            if definition is not None and isinstance(channel, str) and is_channel_id(channel):
                warnings += await self._mention_warnings(definition, channel, asker)
            return _json(200, {
                "valid": definition is not None, "errors": [p.as_json() for p in report.errors],
                "warnings": [p.as_json() for p in warnings],
                "elevated": bool(definition and definition.elevated),
                "next_fires": next_fires(schedule, now, 5) if schedule is not None else []})  # fmt: skip

        return await self._answer(request, go)

    async def _mention_warnings(self, definition: Any, channel_id: str, asker: str) -> list[Any]:
        """`@Name`s that will reach nobody (mentions.mention_warnings), told only to an active
        member of the channel: its member list is not revealed to anyone else."""
        member = await self.engine.store.get_member(channel_id, asker)
        if member is None or not member.active:
            return []
        return mention_warnings(definition, await self.engine.actions.member_names(channel_id))


def _time(text: str) -> int | None:
    if text.isdigit():
        return int(text)
    try:
        return int(datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp())
    except ValueError:
        return None


def add_routes(app: web.Application, relay: Relay) -> None:
    routes = WorkflowRoutes(relay)
    app.router.add_post("/hooks/{id}", routes.hook)
    app.router.add_get("/workflows", routes.list_workflows)
    app.router.add_post("/workflows/validate", routes.validate)
    app.router.add_get("/workflows/{wid}", routes.get_workflow)
    app.router.add_get("/workflows/{wid}/runs", routes.runs)
    app.router.add_get("/workflows/{wid}/runs/{rid}", routes.run)
    app.router.add_get("/workflows/{wid}/runs/{rid}/approvals", routes.approvals)
