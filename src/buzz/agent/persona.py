"""`buzz agent run --persona SLUG` (jobs spec §10.2): the owner's persona (30175) gives the
`[System]` section, the default model and the default session title; `<author>:SLUG` names
a persona another author shared. The harness reads the newest readable version at startup
(none → exit 1, `persona not found`) and keeps watching it: a newer version applies to the
sessions created after it arrives, never to running ones."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any

import orjson

from buzz.agent.config import ConfigError, HarnessConfig
from buzz.client.errors import UserError
from buzz.client.identity import parse_pubkey
from buzz.core.event import Event
from buzz.jobs import limits as L
from buzz.jobs.records import PERSONA_SLUG

log = logging.getLogger(__name__)

PERSONA_SUB = "persona"
Query = Callable[[Iterable[Mapping[str, Any]]], Awaitable[list[Event]]]


def parse_persona_ref(text: str, owner: str | None) -> tuple[str, str]:
    """(author, slug) of `--persona`. Raises ConfigError."""
    author_text, sep, slug = text.strip().rpartition(":")
    if not sep:
        if owner is None:
            raise ConfigError("--persona SLUG needs a known owner (BUZZ_AUTH_TAG); or name it <author>:SLUG")
        author = owner
    else:
        try:
            author = parse_pubkey(author_text, "--persona author", on_curve=False)
        except UserError as exc:
            raise ConfigError(str(exc)) from None
    if not PERSONA_SLUG.fullmatch(slug):
        raise ConfigError(f"--persona: {slug!r} is not a persona slug (^[a-z0-9][a-z0-9_-]{{0,63}}$)")
    return author, slug


def persona_filter(author: str, slug: str) -> dict[str, Any]:
    return {"kinds": [L.KIND_PERSONA], "authors": [author], "#d": [slug], "limit": 1}


def newest(events: Iterable[Event]) -> Event | None:
    """The relay's tie rule: newest created_at, then lowest id."""
    return min(events, key=lambda e: (-e.created_at, e.id), default=None)


def apply_persona(
    config: HarnessConfig, persona: Event, flags: HarnessConfig
) -> tuple[HarnessConfig, str | None]:
    """`config` with the persona's system prompt and default model (flags still win for the
    model), and the persona's display name. Hints (`runtime`, `provider`, …) are logged."""
    try:
        body = orjson.loads(persona.content)
    except orjson.JSONDecodeError:
        body = {}
    if not isinstance(body, dict):
        body = {}
    prompt = body.get("system_prompt")
    model = body.get("model")
    for hint in ("runtime", "provider", "avatar_url"):
        if body.get(hint):
            log.info("persona %s: %s %r is a hint; not applied", persona.d_tag, hint, body[hint])
    changes: dict[str, Any] = {
        "system_prompt": prompt if isinstance(prompt, str) and prompt.strip() else None
    }
    if flags.model is None:
        changes["model"] = model if isinstance(model, str) and model.strip() else None
    name = body.get("display_name")
    return dataclasses.replace(config, **changes), name if isinstance(name, str) else None
