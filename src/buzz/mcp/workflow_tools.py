"""The twelve workflow tools of `buzz mcp` (workflows.md §17): schemas and handlers, each one
call of `buzz.client.workflows` (the CLI's implementation, results and error categories)."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from buzz.client.workspace import Workspace
from buzz.mcp.tools import HEX64_PATTERN, UUID_PATTERN, ToolSpec, _obj

_WF = {"type": "string", "pattern": UUID_PATTERN, "description": "Workflow id (UUID)."}
_CHANNEL = {"type": "string", "pattern": UUID_PATTERN, "description": "Channel id (UUID)."}
_YAML = {"type": "string", "minLength": 1, "maxLength": 65536, "description": "The YAML definition."}
_NAME = {"type": "string", "minLength": 1, "maxLength": 256, "description": "Display name."}
_APPROVAL = {"type": "string", "pattern": HEX64_PATTERN, "description": "Approval reference or its 46010 id."}
_NOTE = {
    "type": "string",
    "maxLength": 4096,
    "default": "",
    "description": "A note recorded with the decision.",
}

WORKFLOW_TOOLS: tuple[ToolSpec, ...] = (
    ToolSpec("list_workflows", "A channel's workflows. Returns {workflows: [...]}.",
             _obj({"channel_id": _CHANNEL}, ("channel_id",))),
    ToolSpec("get_workflow", "One workflow and its YAML. Returns {workflow, yaml}.",
             _obj({"workflow_id": _WF}, ("workflow_id",))),
    ToolSpec("create_workflow", "Save a new workflow in a channel. Returns {workflow_id, event_id, webhook_secret}.",
             _obj({"channel_id": _CHANNEL, "yaml": _YAML, "name": _NAME}, ("channel_id", "yaml"))),
    ToolSpec("update_workflow", "Replace a workflow's definition. Returns {workflow_id, event_id, webhook_secret}.",
             _obj({"workflow_id": _WF, "yaml": _YAML, "name": _NAME}, ("workflow_id", "yaml"))),
    ToolSpec("delete_workflow", "Delete a workflow; its unfinished runs are cancelled. Returns {workflow_id, event_id}.",
             _obj({"workflow_id": _WF}, ("workflow_id",))),
    ToolSpec("enable_workflow", "Turn a workflow on. Returns {workflow_id, event_id, enabled}.",
             _obj({"workflow_id": _WF}, ("workflow_id",))),
    ToolSpec("disable_workflow", "Turn a workflow off. Returns {workflow_id, event_id, enabled}.",
             _obj({"workflow_id": _WF}, ("workflow_id",))),
    ToolSpec("trigger_workflow", "Run a workflow now with optional inputs. Returns {run_id, workflow_id, event_id}.",
             _obj({"workflow_id": _WF, "inputs": {"type": "object", "description": "Inputs: trigger.<key>."}},
                  ("workflow_id",))),
    ToolSpec("list_workflow_runs", "A workflow's runs, newest first. Returns {runs, next}.",
             _obj({"workflow_id": _WF, "limit": {"type": "integer", "minimum": 1, "maximum": 100},
                   "before": {"type": "string"}, "before_id": {"type": "string"}}, ("workflow_id",))),
    ToolSpec("get_workflow_run", "One run with its step trace and approvals. Returns {run, approvals}.",
             _obj({"workflow_id": _WF, "run_id": {"type": "string", "pattern": UUID_PATTERN}},
                  ("workflow_id", "run_id"))),
    ToolSpec("approve_workflow_step", "Grant a pending approval. Returns {approval_ref, event_id, decision}.",
             _obj({"approval": _APPROVAL, "note": _NOTE}, ("approval",))),
    ToolSpec("deny_workflow_step", "Deny a pending approval (the run is cancelled). Returns {approval_ref, event_id, decision}.",
             _obj({"approval": _APPROVAL, "note": _NOTE}, ("approval",))),
)  # fmt: skip

Handler = Callable[[Workspace, Mapping[str, Any]], Awaitable[Any]]


def _inputs(a: Mapping[str, Any]) -> str | None:
    return json.dumps(a["inputs"]) if "inputs" in a else None


WORKFLOW_HANDLERS: dict[str, Handler] = {
    "list_workflows": lambda ws, a: ws.workflows.list(a["channel_id"]),
    "get_workflow": lambda ws, a: ws.workflows.get(a["workflow_id"]),
    "create_workflow": lambda ws, a: ws.workflows.create(a["channel_id"], a["yaml"], a.get("name")),
    "update_workflow": lambda ws, a: ws.workflows.update(a["workflow_id"], a["yaml"], a.get("name")),
    "delete_workflow": lambda ws, a: ws.workflows.delete(a["workflow_id"]),
    "enable_workflow": lambda ws, a: ws.workflows.set_enabled(a["workflow_id"], True),
    "disable_workflow": lambda ws, a: ws.workflows.set_enabled(a["workflow_id"], False),
    "trigger_workflow": lambda ws, a: ws.workflows.trigger(a["workflow_id"], _inputs(a)),
    "list_workflow_runs": lambda ws, a: ws.workflows.runs(a["workflow_id"], a.get("limit"), a.get("before"),
                                                          a.get("before_id")),
    "get_workflow_run": lambda ws, a: ws.workflows.run(a["workflow_id"], a["run_id"]),
    "approve_workflow_step": lambda ws, a: ws.workflows.decide(True, a["approval"], None, a.get("note", "")),
    "deny_workflow_step": lambda ws, a: ws.workflows.decide(False, a["approval"], None, a.get("note", "")),
}  # fmt: skip
