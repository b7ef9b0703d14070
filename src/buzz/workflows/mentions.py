"""`@Name` in a workflow message → the member's pubkey (workflows.md §8.1 item 3), pure.

Case-insensitive, longest names first; the `@` must start the text or follow a character that
is not a name character, and the character after the name must not be one. A name shared by
two members is ambiguous and adds nothing.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping

from buzz.workflows.definition import AskAgent, Definition, Problem, SendMessage
from buzz.workflows.limits import MAX_MENTIONS


def _name_char(ch: str) -> bool:
    return ch.isalnum() or ch in "_-"


def display_name(profile_content: str) -> str | None:
    """A kind 0's `display_name`, else `name`, else None."""
    try:
        meta = json.loads(profile_content)
    except ValueError:
        return None
    if not isinstance(meta, dict):
        return None
    for key in ("display_name", "name"):
        value = meta.get(key)
        if isinstance(value, str) and value.strip():
            return value.strip()
    return None


def unique_names(names: Mapping[str, str]) -> dict[str, str]:
    """pubkey → name becomes lowercased name → pubkey, dropping names two members share."""
    seen: dict[str, str | None] = {}
    for pubkey, name in names.items():
        key = name.lower()
        seen[key] = None if key in seen and seen[key] != pubkey else pubkey
    return {k: v for k, v in seen.items() if v is not None}


def resolve_one(name: str, names: Mapping[str, str]) -> str | None:
    """The member whose name is exactly `name` (case-insensitive), when unique."""
    return unique_names(names).get(name.lower())


def mentioned(text: str, names: Mapping[str, str]) -> list[str]:
    """Pubkeys of the members `text` mentions, in order of first mention, at most MAX_MENTIONS."""
    table = unique_names(names)
    ambiguous = {n.lower() for n in names.values()} - table.keys()
    by_length = sorted(table.keys() | ambiguous, key=len, reverse=True)
    lower = text.lower()
    found: list[str] = []
    i = lower.find("@")
    while i != -1 and len(found) < MAX_MENTIONS:
        if i == 0 or not _name_char(lower[i - 1]):
            rest = lower[i + 1 :]
            for name in by_length:
                end = len(name)
                if rest.startswith(name) and (end == len(rest) or not _name_char(rest[end])):
                    pubkey = table.get(name)
                    if pubkey is not None and pubkey not in found:
                        found.append(pubkey)
                    break
        i = lower.find("@", i + 1)
    return found


def names_of(profiles: Iterable[tuple[str, str]]) -> dict[str, str]:
    """(pubkey, kind 0 content) pairs → pubkey → display name."""
    out: dict[str, str] = {}
    for pubkey, content in profiles:
        name = display_name(content)
        if name is not None:
            out[pubkey] = name
    return out


def unmatched(text: str, names: Mapping[str, str]) -> list[str]:
    """The `@Name`s written in `text` that will ping nobody: no member has that name, or two
    share it. As written, once each, in order. A name glued to a word (`a@b`) or a template
    (`@{{…}}`) is not a mention."""
    table = unique_names(names)
    by_length = sorted({n.lower() for n in names.values()}, key=len, reverse=True)
    lower = text.lower()
    out: list[str] = []
    i = lower.find("@")
    while i != -1:
        if i == 0 or not _name_char(lower[i - 1]):
            rest = lower[i + 1 :]
            hit = next(
                (
                    n
                    for n in by_length
                    if rest.startswith(n) and (len(n) == len(rest) or not _name_char(rest[len(n)]))
                ),
                None,
            )
            if hit is None or hit not in table:
                end = i + 1
                while end < len(text) and _name_char(text[end]):
                    end += 1
                word = text[i + 1 : end] if hit is None else text[i + 1 : i + 1 + len(hit)]
                if word and word not in out:
                    out.append(word)
        i = lower.find("@", i + 1)
    return out


def mention_warnings(definition: Definition, names: Mapping[str, str]) -> list[Problem]:
    """What a save should say about the channel's members (`names`, pubkey → name): a
    `send_message` `@Name` that will ping nobody, an `ask_agent` `@Name` that will fail its
    step. Templated text is checked as written; the run resolves it again (§8.1 item 3)."""
    out: list[Problem] = []
    for i, step in enumerate(definition.steps):
        action = step.action
        if isinstance(action, SendMessage) and action.channel is None:
            for name in unmatched(action.text, names):
                out.append(
                    Problem(
                        f"steps[{i}].text",
                        f"@{name} is not a member of the channel (or names two), so it will not be pinged",
                    )
                )
        elif isinstance(action, AskAgent) and action.agent.startswith("@") and "{{" not in action.agent:
            if resolve_one(action.agent[1:], names) is None:
                out.append(
                    Problem(
                        f"steps[{i}].agent",
                        f"{action.agent} is not a member of the channel, so the step will fail",
                    )
                )
    return out
