"""The tools of `buzz mcp` (agents.md §7): names, descriptions and JSON Schemas. Pure data.

Each `ToolSpec.input_schema` is a JSON Schema object (draft 2020-12) with
`additionalProperties: false`; `defaults` fills the `default` of every absent property so a
handler reads one value whichever way the client called it. The server validates every call
against its schema before running it (fail closed); the workspace client API then applies the
exact rules the CLI also follows (agents.md §2.3, engram.md §12), which the schemas only
summarize.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

UUID_PATTERN = r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$"
HEX64_PATTERN = r"^[0-9a-fA-F]{64}$"
PUBKEY_PATTERN = r"^([0-9a-fA-F]{64}|npub1[023456789acdefghjklmnpqrstuvwxyz]+)$"

_CHANNEL = {"type": "string", "format": "uuid", "pattern": UUID_PATTERN, "description": "Channel id (UUID)."}
_EVENT_ID = {"type": "string", "pattern": HEX64_PATTERN, "description": "Event id (64 hex)."}
_PUBKEY = {"type": "string", "pattern": PUBKEY_PATTERN, "description": "Pubkey, 64 hex or npub1…."}
_SINCE = {"type": "integer", "minimum": 0, "description": "Only events at or after this unix time."}


def _obj(properties: dict[str, Any], required: tuple[str, ...] = ()) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "object", "properties": properties, "additionalProperties": False}
    if required:
        schema["required"] = list(required)
    return schema


def _limit(maximum: int, default: int) -> dict[str, Any]:
    return {"type": "integer", "minimum": 1, "maximum": maximum, "default": default}


@dataclass(frozen=True)
class ToolSpec:
    """One MCP tool: `name`, `description` and `input_schema` as listed by `tools/list`."""

    name: str
    description: str
    input_schema: dict[str, Any]

    def defaults(self, arguments: Mapping[str, Any]) -> dict[str, Any]:
        """`arguments` plus the schema `default` of every absent property."""
        out = dict(arguments)
        for key, prop in self.input_schema.get("properties", {}).items():
            if key not in out and "default" in prop:
                out[key] = prop["default"]
        return out


TOOLS: tuple[ToolSpec, ...] = (
    ToolSpec(
        "send_message",
        "Post a message (kind 9) to a channel, optionally as a thread reply, optionally with files. `@Name` "
        "in the content is resolved against the channel members; `mentions` lists pubkeys to notify (they "
        "wake agents). Returns {event_id, channel_id, created_at, reply_to, root, mention_pubkeys} (and "
        "files: [{url, sha256, size, type, name}] when files were attached).",
        _obj(
            {
                "channel_id": _CHANNEL,
                "content": {
                    "type": "string",
                    "minLength": 1,
                    "maxLength": 65536,
                    "description": "Message text (Markdown), 1-65536 bytes of UTF-8.",
                },
                "reply_to": {**_EVENT_ID, "description": "Parent event id: makes this a thread reply."},
                "mentions": {
                    "type": "array",
                    "items": _PUBKEY,
                    "maxItems": 50,
                    "description": "Pubkeys to mention (hex or npub); each must be a channel member.",
                },
                "broadcast": {
                    "type": "boolean",
                    "default": False,
                    "description": "Also show a thread reply on the channel timeline (needs reply_to).",
                },
                "files": {
                    "type": "array",
                    "items": {"type": "string", "minLength": 1},
                    "minItems": 1,
                    "maxItems": 10,
                    "description": "Local file paths to attach (uploaded first; an image, a log, a report).",
                },
            },
            ("channel_id",),
        )
        | {"anyOf": [{"required": ["content"]}, {"required": ["files"]}]},
    ),
    ToolSpec(
        "get_messages",
        "Read a channel's messages, newest first. Returns {messages: [message]}; a message has the event "
        "fields plus channel_id, reply_to, root, mentions and edited_at.",
        _obj(
            {
                "channel_id": _CHANNEL,
                "limit": _limit(500, 50),
                "before": {
                    "type": "integer",
                    "minimum": 1,
                    "description": "Only events older than this unix time.",
                },
                "since": _SINCE,
                "kinds": {
                    "type": "array",
                    "items": {"type": "integer", "minimum": 0, "maximum": 65535},
                    "minItems": 1,
                    "description": "Event kinds (default [9]).",
                },
            },
            ("channel_id",),
        ),
    ),
    ToolSpec(
        "get_thread",
        "Read the thread containing event_id: its root and replies, oldest first. Returns "
        "{root, messages: [message]}.",
        _obj(
            {
                "channel_id": _CHANNEL,
                "event_id": {**_EVENT_ID, "description": "Any event of the thread (root or reply)."},
                "limit": _limit(500, 100),
                "depth_limit": {"type": "integer", "minimum": 1, "maximum": 100, "default": 100},
            },
            ("channel_id", "event_id"),
        ),
    ),
    ToolSpec(
        "search",
        "Full-text search over the messages you can read, best match first. Returns {messages: [message]}.",
        _obj(
            {
                "query": {
                    "type": "string",
                    "minLength": 1,
                    "maxLength": 4096,
                    "description": "Words to find.",
                },
                "channel_id": _CHANNEL,
                "author": {**_PUBKEY, "description": "Only this author (hex or npub)."},
                "since": _SINCE,
                "limit": _limit(100, 20),
            },
            ("query",),
        ),
    ),
    ToolSpec(
        "list_channels",
        "List channels (DMs excluded), sorted by name. Returns {channels: [{id, name, type, visibility, "
        "about, archived, member}]}.",
        _obj(
            {
                "member_only": {
                    "type": "boolean",
                    "default": True,
                    "description": "Only channels I belong to.",
                },
                "visibility": {"type": "string", "enum": ["open", "private"]},
                "limit": _limit(500, 100),
            }
        ),
    ),
    ToolSpec(
        "join_channel",
        "Join an open channel (kind 9021). Returns {channel_id, event_id}.",
        _obj({"channel_id": _CHANNEL}, ("channel_id",)),
    ),
    ToolSpec(
        "add_reaction",
        "React to an event with one emoji or :shortcode: (kind 7). Returns {event_id, target}.",
        _obj(
            {
                "event_id": {**_EVENT_ID, "description": "The event reacted to."},
                "emoji": {
                    "type": "string",
                    "minLength": 1,
                    "maxLength": 64,
                    "description": "Emoji or :shortcode:.",
                },
            },
            ("event_id", "emoji"),
        ),
    ),
    ToolSpec(
        "mem_get",
        "Read one of your memory entries (encrypted to you and your owner). A slug other than `core` is "
        "stored under `mem/`. Returns {slug, value}; value is null when the entry does not exist.",
        _obj(
            {"slug": {"type": "string", "minLength": 1, "description": "`core` or a mem/ slug."}}, ("slug",)
        ),
    ),
    ToolSpec(
        "mem_set",
        "Write one of your memory entries (replaces the previous value). Keep `core` small; put detail in "
        "mem/ slugs. Returns {slug, event_id, created_at}.",
        _obj(
            {
                "slug": {"type": "string", "minLength": 1, "description": "`core` or a mem/ slug."},
                "value": {"type": "string", "description": "The full new value (at most 65535 bytes)."},
            },
            ("slug", "value"),
        ),
    ),
    ToolSpec(
        "mem_ls",
        "List your live memory slugs (core excluded). Returns {slugs: [string], complete: bool} "
        "(complete false: the relay could not be paged to the end).",
        _obj({}),
    ),
    ToolSpec(
        "mem_search",
        "Find your memory entries by meaning, not only by name (ranked on your machine after "
        "decryption; the relay never sees the text). Returns {results: [{slug, score, snippet}]}, "
        "best first; read one in full with mem_get.",
        _obj(
            {
                "text": {"type": "string", "minLength": 1, "description": "What you are looking for."},
                "limit": {"type": "integer", "minimum": 1, "maximum": 100, "description": "Default 10."},
            },
            ("text",),
        ),
    ),
    ToolSpec(
        "upload_file",
        "Upload a local file to the relay. Returns its blob descriptor {url, sha256, size, type, uploaded, "
        "dim?, blurhash?, thumb?} (for an imeta tag, a NIP-AJ media artifact or a job result). To post a "
        "file in a channel, prefer send_message with files.",
        _obj({"path": {"type": "string", "minLength": 1, "description": "Local file path."}}, ("path",)),
    ),
    ToolSpec(
        "get_file",
        "Download a file attached to a message you can read (by its URL or SHA-256) and check its hash. "
        "Returns {path, sha256, size, type}.",
        _obj(
            {
                "url": {
                    "type": "string",
                    "minLength": 1,
                    "description": "The file's URL (…/media/<sha256>.<ext>).",
                },
                "sha256": {**_EVENT_ID, "description": "The file's SHA-256 (64 hex)."},
                "path": {
                    "type": "string",
                    "minLength": 1,
                    "description": "Where to write it (default: ./<sha256>.<ext> in the working directory).",
                },
            }
        )
        | {"oneOf": [{"required": ["url"]}, {"required": ["sha256"]}]},
    ),
    ToolSpec(
        "send_private_dm",
        "Send an end-to-end encrypted direct message (NIP-17): sealed and gift-wrapped to each "
        "recipient and to you; the relay cannot read it. Answer a private DM only this way, never in a "
        "channel. Returns {event_id, created_at, recipients, reply_to, wrap_ids, e2ee}.",
        _obj(
            {
                "pubkeys": {
                    "type": "array",
                    "items": _PUBKEY,
                    "minItems": 1,
                    "maxItems": 8,
                    "description": "Recipients.",
                },
                "content": {
                    "type": "string",
                    "minLength": 1,
                    "maxLength": 30000,
                    "description": "Message text, 1-30000 bytes of UTF-8.",
                },
                "reply_to": {**_EVENT_ID, "description": "Id of the private message answered."},
            },
            ("pubkeys", "content"),
        ),
    ),
    ToolSpec(
        "get_private_dms",
        "Read your end-to-end encrypted direct messages (decrypted on your machine), oldest first: all of "
        "them, or the conversation with exactly `pubkeys`. Returns {messages: [{id, pubkey, created_at, "
        "content, participants, reply_to, wrap_id, e2ee}], unreadable}.",
        _obj({"pubkeys": {"type": "array", "items": _PUBKEY, "maxItems": 8}, "limit": _limit(1000, 100)}),
    ),
    # -- jobs (jobs spec §8): the CLI's implementation, `buzz.client.jobs` --------------------------
    ToolSpec(
        "request_job",
        "Ask an agent member of a channel for a job (kind 43001). `agent` is hex, npub or @Name. Returns "
        "{job_id, event_id, channel_id, assignee}; follow it with get_job.",
        _obj(
            {
                "channel_id": _CHANNEL,
                "agent": {"type": "string", "minLength": 1, "description": "The agent: hex, npub or @Name."},
                "prompt": {
                    "type": "string",
                    "minLength": 1,
                    "maxLength": 65536,
                    "description": "What to do.",
                },
                "requested_outcome": {
                    "type": "string",
                    "description": "The outcome asked for (default: the prompt).",
                },
                "deadline_secs": {
                    "type": "integer",
                    "minimum": 1,
                    "maximum": 604800,
                    "description": "Seconds to finish in.",
                },
                "parent_job": {**_EVENT_ID, "description": "The job this one was delegated from."},
            },
            ("channel_id", "agent", "prompt"),
        ),
    ),
    ToolSpec(
        "list_jobs",
        "Jobs of a channel, newest first, each {id, channel_id, requester, assignee, state, disposition, "
        "requested_outcome, last_progress, created_at, updated_at}.",
        _obj(
            {
                "channel_id": _CHANNEL,
                "state": {
                    "type": "string",
                    "enum": ["requested", "accepted", "running", "completed", "failed", "cancelled"],
                },
                "limit": _limit(500, 50),
            },
            ("channel_id",),
        ),
    ),
    ToolSpec(
        "get_job",
        "One job: {job, result, failure} (result: the NIP-AJ document of its 43004).",
        _obj({"job_id": {**_EVENT_ID, "description": "The job id (its 43001's event id)."}}, ("job_id",)),
    ),
    ToolSpec(
        "cancel_job",
        "Stop a job (kind 43005): its requester, the agent's owner or a channel admin may. Returns {job_id, event_id}.",
        _obj({"job_id": _EVENT_ID, "reason": {"type": "string", "maxLength": 1024}}, ("job_id",)),
    ),
    ToolSpec(
        "submit_job_result",
        "Publish the result of a job you were given (kind 43004) as a NIP-AJ manifest: {schemaVersion: 1, "
        "jobRequest: <job id>, requestedOutcome, outcome, disposition: completed|partial|blocked|failed|"
        "no_artifact, artifacts?: [{kind, label, reference}], verification?: [{label, status: passed|failed|"
        "not_run, evidence?}], blocker?}. References are repository-relative paths or http(s)/nostr/buzz "
        "URLs, never local paths or file: URLs; completed needs an artifact. Returns {event_id, job_id, disposition}.",
        _obj(
            {
                "channel_id": _CHANNEL,
                "job_id": _EVENT_ID,
                "manifest": {"type": "object", "description": "The NIP-AJ document."},
            },
            ("channel_id", "job_id", "manifest"),
        ),
    ),
)


def _with_workflow_tools(tools: tuple[ToolSpec, ...]) -> tuple[ToolSpec, ...]:
    from buzz.mcp.workflow_tools import WORKFLOW_TOOLS  # it builds on this module's helpers

    return tools + WORKFLOW_TOOLS


TOOLS = _with_workflow_tools(TOOLS)
TOOLS_BY_NAME: dict[str, ToolSpec] = {t.name: t for t in TOOLS}
