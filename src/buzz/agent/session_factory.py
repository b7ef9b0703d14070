"""Session creation (agents.md §4.10, §4.15): memory, system prompt, `session/new`, settings.

Steps for a new channel session, in order:

0. the channel's newest voice guidelines (48106), read from the relay (`fetch_voice_guidelines`);
1. core memory fetch (`buzz.agent.core_memory.fetch_core_memory`, bounded by 3 s) when memory
   is enabled and an owner is known; its section (found / nudge / nothing on failure) is cached
   with the session and never refreshed mid-session;
2. the system prompt (§4.11, memory section last);
3. `session/new` with the absolute `cwd`, `mcpServers` and the prompt by the selected transport
   (`TRANSPORT_RULES`); `_meta.sessionTitle` is merged into the same `_meta` object;
4. model, effort and permission mode, when the agent advertised a way to set them (failures are
   logged, not fatal);
5. `--initial-message` as the session's first prompt (its outcome is ignored).

Heartbeat sessions get the same prompt without core memory.
"""

from __future__ import annotations

import logging
import os
import shlex
from typing import Any

from buzz.agent.acp_pool import AgentProcess
from buzz.agent.core_memory import fetch_core_memory
from buzz.agent.gates import VOICE_GUIDELINES_KIND
from buzz.agent.prompts import ChannelInfo, is_private, join_sections, system_prompt_sections
from buzz.agent.runtime import Runtime
from buzz.agent.sessions import SessionState

log = logging.getLogger(__name__)

VOICE_FETCH_TIMEOUT_S = 5.0


def resolve_transport(configured: str, agent_command: str, protocol_version: int) -> str:
    """`--system-prompt-transport` (§4.10 item 4): `auto` → `claude-meta` when the command's
    base name starts with `claude`, else `field` when `initialize` returned protocolVersion ≥ 2,
    else `user`."""
    if configured != "auto":
        return configured
    if os.path.basename(agent_command).startswith("claude"):
        return "claude-meta"
    return "field" if protocol_version >= 2 else "user"


def mcp_servers(runtime: Runtime) -> list[dict[str, Any]]:
    """`[]`, or with `--mcp-command` one stdio server named `buzz` carrying the three `BUZZ_*`
    identity variables (§4.10 item 3)."""
    words = shlex.split(runtime.config.mcp_command or "")
    if not words:
        return []
    env = [
        {"name": "BUZZ_RELAY_URL", "value": runtime.config.ws_url},
        {"name": "BUZZ_PRIVATE_KEY", "value": runtime.identity.secret},
    ]
    if runtime.identity.auth_tag is not None:
        import orjson

        env.append({"name": "BUZZ_AUTH_TAG", "value": orjson.dumps(runtime.identity.auth_tag).decode()})
    return [{"name": "buzz", "command": words[0], "args": words[1:], "env": env}]


def session_title(runtime: Runtime, channel: ChannelInfo | None) -> str:
    if runtime.config.session_title:
        return runtime.config.session_title
    name = runtime.persona_name or runtime.agent_name or "agent"
    return f"{name} · #{channel.name}" if channel is not None else f"{name} · heartbeat"


async def _memory_section(runtime: Runtime) -> str | None:
    if not runtime.config.memory_enabled or runtime.identity.owner is None:
        return None
    try:
        client = await runtime.link.current_client(timeout=3.0)
    except Exception as exc:
        log.warning("core memory not injected: no relay connection (%s)", exc)
        return None
    memory = await fetch_core_memory(runtime.identity.secret, runtime.identity.owner, client=client)
    return memory.section


async def fetch_voice_guidelines(runtime: Runtime, channel_id: str) -> None:
    """Read the channel's newest 48106 into `runtime`. The starter of a huddle posts it before
    adding agents and with no `p` tag (huddle.md §8.4 step 2, §8.1), so an agent added later, or
    a harness started later, never receives it on its subscription; it is read whenever a channel
    session is created: the first prompt in the channel and the first after a rotation (issue
    24 item 1). A failed read keeps what was known and is logged."""
    flt = {"kinds": [VOICE_GUIDELINES_KIND], "#h": [channel_id], "limit": 1}
    try:
        events = await runtime.link.query([flt], timeout=VOICE_FETCH_TIMEOUT_S)
    except Exception as exc:
        log.warning("could not read the voice guidelines (48106) of %s: %s", channel_id, exc)
        return
    for event in events:
        if event.kind == VOICE_GUIDELINES_KIND and channel_id in event.tag_values("h"):
            runtime.note_voice_guidelines(channel_id, event)


async def create_session(runtime: Runtime, proc: AgentProcess, channel: ChannelInfo | None) -> SessionState:
    """Create a session on `proc` for `channel` (None: the worker's heartbeat session).
    Raises what `proc.request` raises (AgentGone, RequestError, TimeoutError)."""
    cfg = runtime.config
    if channel is not None and not is_private(channel.id):  # a private DM is no huddle
        await fetch_voice_guidelines(runtime, channel.id)
    memory = await _memory_section(runtime) if channel is not None else None
    sections = system_prompt_sections(
        runtime.cwd, cfg.base_prompt, cfg.system_prompt, cfg.team_instructions, memory
    )
    text = join_sections(sections)
    transport = resolve_transport(cfg.system_prompt_transport, cfg.agent_command, proc.protocol_version)
    params: dict[str, Any] = {"cwd": runtime.cwd, "mcpServers": mcp_servers(runtime)}
    meta: dict[str, Any] = {"sessionTitle": session_title(runtime, channel)}
    if transport == "field":
        params["systemPrompt"] = text
    elif transport == "claude-meta":
        meta["systemPrompt"] = {"append": text}
    params["_meta"] = meta
    result = await proc.request("session/new", params)
    if not isinstance(result, dict) or not isinstance(result.get("sessionId"), str):
        raise ValueError("session/new answered without a sessionId")
    state = SessionState(
        session_id=result["sessionId"],
        worker=proc.index,
        channel=channel.id if channel is not None else None,
        memory_section=memory,
        preamble=sections if transport == "user" else [],
        model=cfg.model or _current_model(result),
    )
    log.info(
        "agent[%d] new session %s for %s (transport %s, memory %s)",
        proc.index,
        state.session_id,
        channel.id if channel else "heartbeat",
        transport,
        "injected" if memory else "none",
    )
    await apply_settings(runtime, proc, state.session_id, result)
    if cfg.initial_message:
        blocks = [*state.preamble, cfg.initial_message]
        state.preamble = []
        outcome = await proc.prompt(state.session_id, blocks, cfg.idle_timeout, cfg.max_turn_duration)
        log.info("initial message answered: %s", outcome.stop_reason or outcome.failure)
    return state


def _current_model(result: dict[str, Any]) -> str | None:
    models = result.get("models")
    if isinstance(models, dict) and isinstance(models.get("currentModelId"), str):
        return models["currentModelId"]
    return None


def _config_option(result: dict[str, Any], categories: tuple[str, ...], ids: tuple[str, ...]) -> str | None:
    for option in result.get("configOptions") or []:
        if not isinstance(option, dict):
            continue
        if option.get("category") in categories or option.get("id") in ids:
            return option.get("id")
    return None


async def _try(proc: AgentProcess, what: str, method: str, params: dict[str, Any]) -> None:
    try:
        await proc.request(method, params, timeout=30.0)
    except Exception as exc:
        log.warning("could not apply %s: %s", what, exc)


async def apply_settings(
    runtime: Runtime, proc: AgentProcess, session_id: str, result: dict[str, Any]
) -> None:
    """§4.10 item 5: `--model`, `--effort-level`, `--permission-mode`, only through what the
    `session/new` result advertised."""
    cfg = runtime.config
    if cfg.model:
        if isinstance(result.get("models"), dict):
            await _try(proc, "--model", "session/set_model", {"sessionId": session_id, "modelId": cfg.model})
        elif (option := _config_option(result, ("model",), ("model",))) is not None:
            await _try(
                proc,
                "--model",
                "session/set_config_option",
                {"sessionId": session_id, "configId": option, "value": cfg.model},
            )
    if cfg.effort_level and (
        option := _config_option(result, ("thought_level",), ("effort", "effort_level"))
    ):
        await _try(
            proc,
            "--effort-level",
            "session/set_config_option",
            {"sessionId": session_id, "configId": option, "value": cfg.effort_level},
        )
    modes = result.get("modes")
    available = (
        {m.get("id") for m in (modes or {}).get("availableModes", []) if isinstance(m, dict)}
        if isinstance(modes, dict)
        else set()
    )
    if cfg.permission_mode in available:
        await _try(
            proc,
            "--permission-mode",
            "session/set_mode",
            {"sessionId": session_id, "modeId": cfg.permission_mode},
        )
    elif (option := _config_option(result, ("mode",), ("mode", "permission_mode"))) is not None:
        await _try(
            proc,
            "--permission-mode",
            "session/set_config_option",
            {"sessionId": session_id, "configId": option, "value": cfg.permission_mode},
        )
