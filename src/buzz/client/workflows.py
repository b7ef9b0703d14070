"""Workflows (workflows.md §16, §17): definitions as signed 30620s, manual triggers 46020,
approval decisions 46030/46031, and the runs read from the relay's REST routes (NIP-98).

A definition is validated before it is signed by the relay's own validator
(`POST /workflows/validate`), so the CLI and the relay never disagree (decision 246).
"""

from __future__ import annotations

import hashlib
import json
import re
import uuid
from typing import Any
from urllib.parse import urlencode

from buzz.client.errors import AuthError, NotFound, UserError, WorkspaceError
from buzz.client.http_bridge import BridgeError
from buzz.client.session import Session, from_bridge_error
from buzz.client.values import channel_arg

KIND_DEFINITION, KIND_TRIGGER, KIND_GRANT, KIND_DENY = 30620, 46020, 46030, 46031
KIND_REQUESTED = 46010  # the relay's approval request
_ENABLED_LINE = re.compile(r"^enabled:[^\n]*$", re.MULTILINE)
_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\Z")
_HEX64 = re.compile(r"[0-9a-f]{64}\Z")


def _response(message: str) -> dict[str, Any]:
    if message.startswith("response:"):
        try:
            body = json.loads(message.removeprefix("response:"))
        except ValueError:
            return {}
        return body if isinstance(body, dict) else {}
    return {}


def with_enabled(yaml: str, enabled: bool) -> str:
    """The definition with its top-level `enabled` set, every other byte kept (§6.8 item 1)."""
    line = f"enabled: {'true' if enabled else 'false'}"
    if _ENABLED_LINE.search(yaml):
        return _ENABLED_LINE.sub(line, yaml, count=1)
    return yaml + ("" if yaml.endswith("\n") or not yaml else "\n") + line + "\n"


def _problem(p: dict[str, Any]) -> str:
    """A validator finding in words: `path: message (line L, column C)`."""
    where = f" (line {p['line']}, column {p['column']})" if p.get("line") is not None else ""
    return f"{p['path'] + ': ' if p.get('path') else ''}{p.get('message', '')}{where}"


def _workflow_arg(value: str) -> str:
    if not _UUID.match(value):
        raise UserError("--workflow must be a workflow id (a UUID)")
    return value


class Workflows:
    def __init__(self, session: Session) -> None:
        self._s = session

    async def _rest(self, method: str, path: str, body: Any = None) -> dict[str, Any]:
        raw = None if body is None else json.dumps(body).encode()
        try:
            status, answer = await self._s.bridge.call(method, path, raw)
        except BridgeError as exc:
            raise from_bridge_error(exc) from None
        message = answer.get("error", "") if isinstance(answer, dict) else str(answer)
        if status in (200, 202) and isinstance(answer, dict):
            return answer
        if status == 404:
            raise NotFound(message or "not found")
        if status == 400:
            raise UserError(message)
        if status in (401, 403):
            raise AuthError(message)
        raise WorkspaceError(f"relay answered HTTP {status}: {message}", retryable=status >= 500)

    async def validate(self, yaml: str, channel_id: str | None = None) -> dict[str, Any]:
        """The relay's verdict; raises UserError listing every error with its line and column."""
        if not yaml.strip():
            raise UserError("the workflow definition is empty")
        report = await self._rest("POST", "/workflows/validate", {"yaml": yaml, "channel_id": channel_id})
        if not report.get("valid"):
            lines = [_problem(e) for e in report.get("errors", [])]
            raise UserError("invalid workflow definition: " + "; ".join(lines))
        return report

    async def list(self, channel_id: str) -> dict[str, Any]:
        return await self._rest("GET", "/workflows?" + urlencode({"channel": channel_id}))

    async def get(self, workflow_id: str) -> dict[str, Any]:
        return await self._rest("GET", f"/workflows/{_workflow_arg(workflow_id)}")

    async def _save(self, workflow_id: str, channel_id: str, yaml: str, name: str | None,
                    expected: str | None) -> dict[str, Any]:  # fmt: skip
        report = await self.validate(yaml, channel_id)
        tags = [["d", workflow_id], ["h", channel_id]]
        if name:
            tags.append(["name", name])
        if expected:
            tags.append(["expected-revision", expected])
        event = self._s.sign(KIND_DEFINITION, yaml, tags)
        result = await self._s.publish(event)
        body = _response(result.message)
        return {
            "workflow_id": workflow_id,
            "event_id": event.id,
            "webhook_secret": body.get("webhook_secret"),
            # saved all the same: what the relay's validator and the channel's members say
            # (an `@Name` no member answers to pings nobody)
            "warnings": [_problem(w) for w in report.get("warnings", []) if isinstance(w, dict)],
        }

    async def create(self, channel_id: str, yaml: str, name: str | None = None) -> dict[str, Any]:
        # The channel checked here, as every other command does (the nil UUID, a non-UUID):
        # the relay would only say its h tag is missing.
        return await self._save(str(uuid.uuid4()), channel_arg(channel_id), yaml, name, None)

    async def _own(self, workflow_id: str) -> dict[str, Any]:
        got = await self.get(workflow_id)
        if got["workflow"]["owner"] != self._s.pubkey:
            raise UserError("only the workflow's owner may change it")
        return got

    async def update(self, workflow_id: str, yaml: str, name: str | None = None) -> dict[str, Any]:
        got = await self._own(workflow_id)
        wf = got["workflow"]
        return await self._save(workflow_id, wf["channel_id"], yaml, name, wf["revision"])

    async def set_enabled(self, workflow_id: str, enabled: bool) -> dict[str, Any]:
        got = await self._own(workflow_id)
        wf = got["workflow"]
        out = await self._save(workflow_id, wf["channel_id"], with_enabled(got["yaml"] or "", enabled), None,
                               wf["revision"])  # fmt: skip
        return {"workflow_id": workflow_id, "event_id": out["event_id"], "enabled": enabled}

    async def delete(self, workflow_id: str) -> dict[str, Any]:
        wf = (await self.get(workflow_id))["workflow"]
        tags = [["a", f"{KIND_DEFINITION}:{wf['owner']}:{workflow_id}"], ["k", str(KIND_DEFINITION)],
                ["h", wf["channel_id"]]]  # fmt: skip
        event = self._s.sign(5, "", tags)
        await self._s.publish(event)
        return {"workflow_id": workflow_id, "event_id": event.id}

    async def trigger(self, workflow_id: str, inputs: str | None = None) -> dict[str, Any]:
        content = ""
        if inputs is not None:
            try:
                parsed = json.loads(inputs)
            except ValueError:
                parsed = None
            if not isinstance(parsed, dict):
                raise UserError("--inputs must be a JSON object")
            content = json.dumps(parsed, separators=(",", ":"))
        event = self._s.sign(KIND_TRIGGER, content, [["d", _workflow_arg(workflow_id)]])
        result = await self._s.publish(event)
        body = _response(result.message)
        return {"run_id": body.get("run_id"), "workflow_id": workflow_id, "event_id": event.id}

    async def runs(self, workflow_id: str, limit: int | None = None, before: str | None = None,
                   before_id: str | None = None) -> dict[str, Any]:  # fmt: skip
        if (before is None) != (before_id is None):
            raise UserError("--before and --before-id go together")
        query = {
            k: v for k, v in (("limit", limit), ("before", before), ("before_id", before_id)) if v is not None
        }
        suffix = "?" + urlencode(query) if query else ""
        return await self._rest("GET", f"/workflows/{_workflow_arg(workflow_id)}/runs{suffix}")

    async def run(self, workflow_id: str, run_id: str) -> dict[str, Any]:
        base = f"/workflows/{_workflow_arg(workflow_id)}/runs/{run_id}"
        run = await self._rest("GET", base)
        approvals = await self._rest("GET", base + "/approvals")
        return {"run": run["run"], "approvals": approvals["approvals"]}

    async def decide(self, grant: bool, approval: str | None = None, token: str | None = None,
                     note: str = "") -> dict[str, Any]:  # fmt: skip
        """46030 / 46031 naming the approval by reference (`d`), by the token's hash (`d`,
        hashed here as buzz does), or by the 46010 id (`e`)."""
        if (approval is None) == (token is None):
            raise UserError("give exactly one of --approval and --token")
        if token is not None:
            ref, tags = hashlib.sha256(token.encode()).hexdigest(), None
        else:
            assert approval is not None
            if not _HEX64.match(approval):
                raise UserError("--approval must be an approval reference or a 46010 event id (64 hex)")
            ref, tags = approval, [["e", approval]]
        event = self._s.sign(KIND_GRANT if grant else KIND_DENY, note, tags or [["d", ref]])
        await self._s.publish(event)
        decision = "granted" if grant else "denied"
        out: dict[str, Any] = {"decision": decision, "event_id": event.id, **await self._approval(ref)}
        if out.get("workflow_id"):
            out["summary"] = (f"{decision} step {out['step_id']} of run {out['run_id']} of workflow "
                              f"{out['workflow_name'] or out['workflow_id']}")  # fmt: skip
        return out

    async def _approval(self, ref: str) -> dict[str, Any]:
        """What a decision answered, read from its approval request (the relay's 46010, found by
        its id or its reference): the workflow, run and step, the reference and the request id.
        Only the reference when the request cannot be read."""
        try:
            found = await self._s.query([{"kinds": [KIND_REQUESTED], "ids": [ref]},
                                         {"kinds": [KIND_REQUESTED], "#d": [ref], "limit": 1}])  # fmt: skip
        except WorkspaceError:
            found = []
        if not found:
            return {"approval_ref": ref}
        request = found[0]
        try:
            body = json.loads(request.content)
        except ValueError:
            body = {}
        body = body if isinstance(body, dict) else {}
        return {
            "approval_ref": next((t[1] for t in request.tags if len(t) > 1 and t[0] == "d"), ref),
            "request_event_id": request.id,
            "workflow_id": body.get("workflow_id"),
            "workflow_name": body.get("workflow_name"),
            "run_id": body.get("run_id"),
            "step_id": body.get("step_id"),
        }
