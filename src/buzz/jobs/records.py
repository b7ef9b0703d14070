"""The directory records (jobs spec §11): persona 30175, team 30176, managed agent 30177 and
team catalog 30178. They are readable by others, so no record may carry a secret (§11.7);
each content check raises `Invalid("<record> <reason>")`.

The `d` and `shared` tag rules of 30175 and 30178 are the relay's (`relay/ingestion/rules/records.py`);
this module checks what the contents say, for the relay and for the CLI before it signs.
"""

from __future__ import annotations

import re
from typing import Any

from buzz.core.errors import Invalid
from buzz.core.nip19 import decode
from buzz.jobs import limits as L
from buzz.jobs.text import is_hex64, is_int, is_text, json_object, nbytes

RECORD_NAMES: dict[int, str] = {
    L.KIND_PERSONA: "persona",
    L.KIND_TEAM: "team",
    L.KIND_MANAGED_AGENT: "managed agent",
    L.KIND_TEAM_CATALOG: "team catalog",
}
PERSONA_SLUG = re.compile(r"[a-z0-9][a-z0-9_-]{0,63}")
_RECORD_MAX_BYTES = 65_535  # relay.md's content cap for records other than personas


def _is_nsec(value: str) -> bool:
    if not value.startswith("nsec1"):
        return False
    try:
        return decode(value)[0] == "nsec"
    except Exception:  # not a valid bech32 string: not a key
        return False


_NSEC_TOKEN = re.compile(r"nsec1[02-9ac-hj-np-z]{58}")


def contains_nsec(text: str) -> bool:
    """`text` carries a NIP-19 secret key anywhere (what producers refuse before signing:
    a prompt that quotes a key is as bad as a member holding one)."""
    return any(_is_nsec(m.group(0)) for m in _NSEC_TOKEN.finditer(text))


def secret_member(value: Any) -> str | None:
    """The first forbidden member name (or `nsec1` value) found at any depth, else None."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            for name, inner in item.items():
                if (
                    isinstance(name, str)
                    and name.lower().replace("_", "").replace("-", "") in L.FORBIDDEN_MEMBERS
                ):
                    return name
                stack.append(inner)
        elif isinstance(item, list):
            stack.extend(item)
        elif isinstance(item, str) and _is_nsec(item.strip()):
            return "nsec1 key"
    return None


def check_record(kind: int, content: str) -> dict[str, Any]:
    """The content rules of a 30175–30178 (§11.2–§11.5, §11.7). Returns the object."""
    name = RECORD_NAMES[kind]
    most = L.PERSONA_MAX_BYTES if kind == L.KIND_PERSONA else _RECORD_MAX_BYTES
    try:
        body = json_object(content, name, most)
    except Invalid as exc:  # json_object says "<name>: …"; records say "<name> …"
        raise Invalid(exc.reason.replace(f"{name}: ", f"{name} ", 1)) from None
    found = secret_member(body)
    if found is not None:
        raise Invalid(f"{name} content must not carry secrets ({found})")
    CHECKS[kind](body)
    return body


def _opt_str(body: dict[str, Any], member: str, record: str) -> None:
    if body.get(member) is not None and not isinstance(body[member], str):
        raise Invalid(f"{record} {member} must be a string or null")


def _persona(body: dict[str, Any]) -> None:
    display = body.get("display_name")
    if not is_text(display):
        raise Invalid("persona display_name is required")
    if nbytes(display) > L.DISPLAY_NAME_MAX_BYTES:
        raise Invalid(f"persona display_name too long (max {L.DISPLAY_NAME_MAX_BYTES} bytes)")
    for member in ("system_prompt", "avatar_url", "runtime", "model", "provider"):
        _opt_str(body, member, "persona")
    pool = body.get("name_pool")
    if pool is not None and not (isinstance(pool, list) and all(isinstance(n, str) for n in pool)):
        raise Invalid("persona name_pool must be an array of strings")


def _team(body: dict[str, Any]) -> None:
    if not is_text(body.get("name")):
        raise Invalid("team name is required")
    for member in ("description", "instructions"):
        _opt_str(body, member, "team")
    ids = body.get("persona_ids")
    if ids is not None and not (
        isinstance(ids, list) and all(isinstance(i, str) and PERSONA_SLUG.fullmatch(i) for i in ids)
    ):
        raise Invalid("team persona_ids must be an array of persona slugs")


def _managed(body: dict[str, Any]) -> None:
    if body.get("name") is not None and not is_text(body["name"]):
        raise Invalid("managed agent name must be text")
    persona = body.get("persona_id")
    if persona is not None and not (isinstance(persona, str) and PERSONA_SLUG.fullmatch(persona)):
        raise Invalid("managed agent persona_id must be a persona slug or null")
    parallelism = body.get("parallelism")
    if parallelism is not None and not (
        is_int(parallelism) and L.PARALLELISM_MIN <= parallelism <= L.PARALLELISM_MAX
    ):
        raise Invalid(f"managed agent parallelism must be an integer {L.PARALLELISM_MIN}-{L.PARALLELISM_MAX}")
    mode = body.get("respond_to")
    if mode is not None and mode not in L.RESPOND_TO_MODES:
        raise Invalid(f"managed agent respond_to must be one of {', '.join(L.RESPOND_TO_MODES)}")
    allow = body.get("respond_to_allowlist")
    if allow is not None:
        if not isinstance(allow, list) or len(allow) > L.ALLOWLIST_MAX:
            raise Invalid(
                f"managed agent respond_to_allowlist must be an array of at most {L.ALLOWLIST_MAX} pubkeys"
            )
        if not all(is_hex64(p) for p in allow):
            raise Invalid("managed agent respond_to_allowlist entries must be 64 lowercase hex")


def _catalog(body: dict[str, Any]) -> None:
    """The catalog's schema belongs to clients: an object without secrets is enough."""


CHECKS = {
    L.KIND_PERSONA: _persona,
    L.KIND_TEAM: _team,
    L.KIND_MANAGED_AGENT: _managed,
    L.KIND_TEAM_CATALOG: _catalog,
}


def record_id_problem(d: str) -> str | None:
    """§11.3 / §11.5: a team or catalog `d` is non-empty, ≤ 64 characters, no whitespace or
    control characters."""
    if not d:
        return "d tag must not be empty"
    if len(d) > L.RECORD_ID_MAX_CHARS or any(ch.isspace() or ord(ch) < 32 or ord(ch) == 127 for ch in d):
        return "d tag must be at most 64 characters without whitespace or control characters"
    return None
