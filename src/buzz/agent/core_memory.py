"""Core-memory injection for a new agent session (engram.md §13, agents.md §4.15).

`fetch_core_memory` runs the core head query for `(agent, owner)` (engram I/O of the client
layer: `buzz.client.engrams.Engrams.core`), bounded by
CORE_FETCH_TIMEOUT (3 s) for connect, query and decode together, and returns one of the three
§13.4 states with the section to append to the session's system prompt:

| state           | section                                                   |
|-----------------|-----------------------------------------------------------|
| FOUND           | `<core-memory>\\n` + profile (verbatim) + `\\n</core-memory>` |
| CONFIRMED_EMPTY | the same wrapper around the onboarding nudge              |
| FAILURE         | None: inject nothing (a warning is logged)                |

A failure (timeout, transport or auth error, a CLOSED, only undecryptable candidates) never
yields the nudge: that would invite the agent to overwrite a core that is only unreachable.
Without an owner nothing is fetched and nothing injected (§13.2). The caller caches the
section with the session and fetches again only for a new session.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass

from buzz.client import RelayClient
from buzz.client.engrams import Engrams, Pair, connect
from buzz.client.errors import WorkspaceError
from buzz.core import engram
from buzz.core.engram import CoreState
from buzz.core.keys import public_key

log = logging.getLogger(__name__)

CORE_MEMORY_TAG = "core-memory"
LEGACY_CORE_LABEL = "Agent Memory — core"

ONBOARDING_NUDGE = (
    "No core memory exists yet for you and your owner. Core memory keeps your identity, rules "
    "and goals across sessions; it is loaded here at the start of every new session.\n"
    "Ask your user about yourself: who you are, what you are for, how they want you to work and "
    "what you must never do. Then save the answer with:\n"
    '  buzz mem set core "…"\n'
    'Keep it short; put details in memory entries (buzz mem set mem/<name> "…") and refer to '
    "them from core as [[mem/<name>]]."
)


def semantic_section(tag: str, content: str) -> str:
    """A tagged prompt section: `<tag>\\n` + content verbatim + `\\n</tag>` (§13.5)."""
    return f"<{tag}>\n{content}\n</{tag}>"


def normalize_semantic_section(tag: str, legacy_label: str, text: str) -> str:
    """Rewrite a legacy section whose first line is `[<legacy_label>]` to the tagged form (§13.5).

    Anything else is returned unchanged.
    """
    first, sep, rest = text.partition("\n")
    if first == f"[{legacy_label}]":
        return semantic_section(tag, rest if sep else "")
    return text


def render_core_section(state: CoreState, profile: str | None) -> str | None:
    """The §13.4 section for `state`; None for FAILURE."""
    if state is CoreState.FOUND:
        return semantic_section(CORE_MEMORY_TAG, profile or "")
    if state is CoreState.CONFIRMED_EMPTY:
        return semantic_section(CORE_MEMORY_TAG, ONBOARDING_NUDGE)
    return None


@dataclass(frozen=True, slots=True)
class CoreMemory:
    """The outcome of one fetch: `state` (None when not fetched: no owner), the `section` to
    append last to the system prompt (None = inject nothing), and `reason` for a failure."""

    state: CoreState | None
    section: str | None
    reason: str | None = None


async def _fetch(client: RelayClient, pair: Pair) -> CoreMemory:
    state, profile, reason = await Engrams(client, pair).core()
    if state is CoreState.FAILURE:
        return _failed(reason or "failure")
    return CoreMemory(state, render_core_section(state, profile))


async def fetch_core_memory(
    agent_secret: str,
    owner_pubkey: str | None,
    *,
    client: RelayClient | None = None,
    relay_url: str | None = None,
    auth_tags: tuple[tuple[str, ...], ...] | list[list[str]] = (),
    timeout: float = engram.CORE_FETCH_TIMEOUT,
) -> CoreMemory:
    """Fetch and render core memory for a new session (engram.md §13.3–§13.4). Never raises.

    Uses `client` (already authenticated as the agent) or opens a connection to `relay_url`
    (NIP-42 AUTH with `auth_tags`). The whole fetch is bounded by `timeout` seconds.
    `owner_pubkey` None → nothing fetched, `CoreMemory(None, None)`.
    """
    if not owner_pubkey:
        return CoreMemory(None, None, "no owner known")
    try:
        pair = Pair.as_agent(agent_secret, public_key(agent_secret), owner_pubkey.lower())
        pair.check_keys()
    except ValueError as exc:
        return _failed(f"bad agent or owner key: {exc}")
    try:
        async with asyncio.timeout(timeout):
            if client is not None:
                return await _fetch(client, pair)
            if relay_url is None:
                return _failed("no relay to fetch core memory from")
            async with connect(relay_url, agent_secret, auth_tags=auth_tags, timeout=timeout) as fresh:
                return await _fetch(fresh, pair)
    except TimeoutError:
        return _failed(f"core memory fetch timed out after {timeout} s")
    except WorkspaceError as exc:
        return _failed(exc.message)


def _failed(reason: str) -> CoreMemory:
    log.warning("core memory not injected: %s", reason)
    return CoreMemory(CoreState.FAILURE, None, reason)
