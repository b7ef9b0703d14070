"""The harness gate chain (agents.md §4.4–§4.6), pure: no I/O, no clock.

Order for every channel event (the first failing step drops it):

1. relay pre-filter (the REQ built by `channel_filter`);
2. duplicates (`SeenIds`, at least 10 000 ids), own events and harness notices of any agent
   (`is_notice`, issue 14 item 6);
3. owner control commands `!shutdown`, `!cancel`, `!rotate` (`control_command`), consumed
   before the author gate;
4. author gate (`author_decision`: a table of admitted author classes per `--respond-to`
   mode, narrowed by the DM rule; siblings need a kind 0 lookup and members a 39002 lookup the
   caller performs). A mention that fails it gets one not-admitted notice per author, channel
   and hour (`NoticeLimiter`, `not_admitted_text`; issue 14 item 1), except in DMs;
5. rule match (`match_rule`, first match wins);
6. enqueue — the caller's job.

Only a `["p", A]` tag is a mention: text, `nostr:` URIs and `["notify", …]` never wake.
"""

from __future__ import annotations

import enum
import re
import tomllib
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from buzz.agent.config import ConfigError
from buzz.agent.event_view import mentions
from buzz.core import nip19
from buzz.core.channel_id import is_channel_id
from buzz.core.event import Event

DEFAULT_WAKE_KINDS: tuple[int, ...] = (9, 46010, 40007)  # message, approval request (later), reminder
MENTION_PROMPT_TAG = "@mention"
ALL_PROMPT_TAG = "message"
SEEN_IDS_CAPACITY = 10_000
ANY_CHANNEL = "*"

VOICE_GUIDELINES_KIND = 48106  # huddle.md §8.1: "channel rules for voice mode"


# -- wake rules (§4.4) -------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class WakeRule:
    """One subscription rule. `channels` is `"*"` or a set of UUIDs; `kinds` None = every kind."""

    channels: str | frozenset[str]
    kinds: frozenset[int] | None
    require_mention: bool
    prompt_tag: str

    def covers(self, channel: str) -> bool:
        return self.channels == ANY_CHANNEL or channel in self.channels  # type: ignore[operator]

    def matches(self, channel: str, event: Event, agent: str) -> bool:
        if not self.covers(channel):
            return False
        if self.kinds is not None and event.kind not in self.kinds:
            return False
        return not self.require_mention or mentions(event, agent)


def _override(rule: WakeRule, kinds: Sequence[int] | None, no_mention_filter: bool) -> WakeRule:
    return WakeRule(
        rule.channels,
        frozenset(kinds) if kinds is not None else rule.kinds,
        False if no_mention_filter else rule.require_mention,
        rule.prompt_tag,
    )


def build_rules(
    subscribe: str,
    kinds: Sequence[int] | None = None,
    no_mention_filter: bool = False,
    config_text: str | None = None,
) -> tuple[WakeRule, ...]:
    """The ordered rules of a `--subscribe` mode; `--kinds` and `--no-mention-filter` override
    every rule. `config_text` is the TOML of `--config` (config mode only). Raises ConfigError."""
    if subscribe == "mentions":
        base: tuple[WakeRule, ...] = (
            WakeRule(ANY_CHANNEL, frozenset(DEFAULT_WAKE_KINDS), True, MENTION_PROMPT_TAG),
        )
    elif subscribe == "all":
        base = (WakeRule(ANY_CHANNEL, None, False, ALL_PROMPT_TAG),)
    elif subscribe == "config":
        base = parse_rules_toml(config_text or "")
    else:
        raise ConfigError(f"unknown subscribe mode {subscribe!r}")
    return tuple(_override(r, kinds, no_mention_filter) for r in base)


def _rule_from_table(table: dict[str, Any], channels: str | frozenset[str], where: str) -> WakeRule:
    kinds = table.get("kinds", list(DEFAULT_WAKE_KINDS))
    if not isinstance(kinds, list) or not all(isinstance(k, int) and 0 <= k <= 65535 for k in kinds):
        raise ConfigError(f"{where}: kinds must be a list of integers 0–65535")
    require = table.get("require_mention", True)
    if not isinstance(require, bool):
        raise ConfigError(f"{where}: require_mention must be true or false")
    tag = table.get("prompt_tag", MENTION_PROMPT_TAG if require else ALL_PROMPT_TAG)
    if not isinstance(tag, str) or not tag:
        raise ConfigError(f"{where}: prompt_tag must be a non-empty string")
    return WakeRule(channels, frozenset(kinds), require, tag)


def parse_rules_toml(text: str) -> tuple[WakeRule, ...]:
    """Rules of the `--config` file (§4.4): `[[rules]]` tables in order (first match wins), each
    with `channels` (`"*"` or a list of UUIDs), `kinds`, `require_mention` (default true) and
    `prompt_tag`; every `[channel.<uuid>]` table becomes a one-channel rule placed before the
    first `"*"` rule. Raises ConfigError for malformed TOML or values."""
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"--config: invalid TOML: {exc}") from None
    listed: list[WakeRule] = []
    for i, table in enumerate(doc.get("rules", [])):
        where = f"--config rules[{i}]"
        if not isinstance(table, dict):
            raise ConfigError(f"{where}: must be a table")
        chans = table.get("channels", ANY_CHANNEL)
        if chans != ANY_CHANNEL:
            if not isinstance(chans, list) or not all(is_channel_id(c) for c in chans):
                raise ConfigError(f'{where}: channels must be "*" or a list of channel UUIDs')
            chans = frozenset(chans)
        listed.append(_rule_from_table(table, chans, where))
    per_channel = []
    for channel, table in (doc.get("channel") or {}).items():
        if not is_channel_id(channel) or not isinstance(table, dict):
            raise ConfigError(f"--config [channel.{channel}]: the key must be a channel UUID")
        per_channel.append(_rule_from_table(table, frozenset({channel}), f"--config [channel.{channel}]"))
    first_any = next((i for i, r in enumerate(listed) if r.channels == ANY_CHANNEL), len(listed))
    rules = (*listed[:first_any], *per_channel, *listed[first_any:])
    if not rules:
        raise ConfigError("--config: no rules (add [[rules]] or [channel.<uuid>] tables)")
    return rules


def match_rule(rules: Iterable[WakeRule], channel: str, event: Event, agent: str) -> WakeRule | None:
    """The first rule that covers `channel`, lists the kind and (if required) is mentioned."""
    return next((r for r in rules if r.matches(channel, event, agent)), None)


def channel_filter(rules: Iterable[WakeRule], channel: str, agent: str, since: int) -> dict[str, Any] | None:
    """The REQ filter of `ch-<C>` (§4.3 item 1): the kinds of the rules covering C (absent when
    one of them takes every kind), `#h` = [C], `since`, and `#p` = [A] when every covering rule
    requires a mention. None when no rule covers C (nothing to subscribe)."""
    covering = [r for r in rules if r.covers(channel)]
    if not covering:
        return None
    flt: dict[str, Any] = {}
    if all(r.kinds is not None for r in covering):
        # 48106 (voice guidelines) always passes: it is context for prompts, never a turn
        flt["kinds"] = sorted(set().union(*(r.kinds or () for r in covering), {VOICE_GUIDELINES_KIND}))
    flt["#h"] = [channel]
    if all(r.require_mention for r in covering):
        flt["#p"] = [agent]
    flt["since"] = since
    return flt


# -- duplicates (§4.3 item 2, §4.5 step 2) -----------------------------------------------------
class SeenIds:
    """Remembers the most recent `capacity` event ids (≥ 10 000 per §4.3 item 2)."""

    def __init__(self, capacity: int = SEEN_IDS_CAPACITY) -> None:
        self._ids: OrderedDict[str, None] = OrderedDict()
        self._capacity = capacity

    def add(self, event_id: str) -> bool:
        """Record `event_id`; False when it was already remembered (a duplicate)."""
        if event_id in self._ids:
            self._ids.move_to_end(event_id)
            return False
        self._ids[event_id] = None
        if len(self._ids) > self._capacity:
            self._ids.popitem(last=False)
        return True

    def __contains__(self, event_id: object) -> bool:
        return event_id in self._ids

    def __len__(self) -> int:
        return len(self._ids)


# -- owner control commands (§4.5 step 3) ------------------------------------------------------
class Command(enum.Enum):
    SHUTDOWN = "!shutdown"
    CANCEL = "!cancel"
    ROTATE = "!rotate"


_COMMANDS = {c.value: c for c in Command}


# A leading mention: `nostr:npub1…`, `nostr:nprofile1…`, `@npub1…` or a bare `npub1…`, then
# an optional `:` or `,` (the `@Name` form is matched against the agent's names).
_BECH32_MENTION = re.compile(r"(?:nostr:|@)?((?:npub|nprofile)1[02-9ac-hj-np-z]+)[:,]?(?=\s|$)")


def _mentioned_key(token: str) -> str | None:
    try:
        hrp, data = nip19.decode(token)
    except ValueError:
        return None
    if hrp == "npub":
        return data if isinstance(data, str) else None
    return getattr(data, "pubkey", None)


def strip_self_mentions(content: str, agent: str, names: Iterable[str] = ()) -> str:
    """`content` trimmed, without the mentions of the agent `A` it starts with: what the
    browser sends for `@Name !cancel` (the `@Name` stays in the text) or another client for
    `nostr:npub1… !cancel`. A leading mention of anyone else is kept (docs/decisions.md 333)."""
    text = content.strip()
    by_length = sorted({n for n in names if n}, key=len, reverse=True)
    while True:
        match = _BECH32_MENTION.match(text)
        if match is not None and _mentioned_key(match.group(1)) == agent:
            text = text[match.end() :].lstrip()
            continue
        name = next(
            (
                n
                for n in by_length
                if text.startswith("@" + n) and not _word_char(text[len(n) + 1 : len(n) + 2])
            ),
            None,
        )
        if name is None:
            return text
        text = text[len(name) + 1 :].lstrip(":,").lstrip()


def _word_char(ch: str) -> bool:
    return bool(ch) and (ch.isalnum() or ch == "_")


def control_command(event: Event, agent: str, owner: str | None, names: Iterable[str] = ()) -> Command | None:
    """The owner command carried by `event`: a kind 9 from O, tagged `["p", A]`, whose content
    trimmed of surrounding whitespace and of leading mentions of A (`names`: A's display
    names) is exactly one command. Anyone else's text is ordinary."""
    if owner is None or event.pubkey != owner:
        return None
    return _command(event, agent, names)


def stop_request(event: Event, agent: str, names: Iterable[str] = ()) -> bool:
    """`!cancel` from anyone, in the shape of an owner command: the caller decides whether its
    author may stop the turn in flight (its requester may, docs/decisions.md 334)."""
    return _command(event, agent, names) is Command.CANCEL


def _command(event: Event, agent: str, names: Iterable[str]) -> Command | None:
    if event.kind != 9 or not mentions(event, agent):
        return None
    return _COMMANDS.get(strip_self_mentions(event.content, agent, names))


# -- author gate (§4.6) ------------------------------------------------------------------------
class Decision(enum.Enum):
    ADMIT = "admit"
    DROP = "drop"
    CHECK_SIBLING = "check_sibling"  # admit iff the author is a sibling (kind 0 lookup)
    CHECK_MEMBER = "check_member"  # admit iff a sibling or a member of the channel (39002)


OWNER, SIBLING, ALLOWLISTED, MEMBER, STRANGER = "owner", "sibling", "allowlisted", "member", "stranger"

# Author classes admitted in non-DM channels, per --respond-to (§4.6 table; `members` is
# issue 14 item 1: anyone who is a member of the channel where the mention happened).
ADMITTED: dict[str, frozenset[str]] = {
    "owner-only": frozenset({OWNER, SIBLING}),
    "allowlist": frozenset({OWNER, SIBLING, ALLOWLISTED}),
    "members": frozenset({OWNER, SIBLING, MEMBER}),
    "anyone": frozenset({OWNER, SIBLING, ALLOWLISTED, MEMBER, STRANGER}),
    "nobody": frozenset(),
}
# Who each mode answers, in the words of the start-up line and the not-admitted notice.
POLICY_TEXT: dict[str, str] = {
    "owner-only": "my owner{owner} and agents they own",
    "allowlist": "my owner{owner}, agents they own and people on their list",
    "members": "members of this channel",
    "anyone": "anyone",
    "nobody": "nobody (I only run scheduled work)",
}
NOTICE_WINDOW_S = 3600.0
NOTICE_MEMORY = 10_000
# DM rule (§4.6 item 2): channels of these types admit at most the owner and siblings.
DM_LIKE_TYPES = frozenset({"dm", "unknown"})
DM_ADMITTED = frozenset({OWNER, SIBLING})


def admitted_classes(mode: str, channel_type: str) -> frozenset[str]:
    """The author classes `mode` admits in a channel of `channel_type`, DM rule applied."""
    admitted = ADMITTED[mode]
    return admitted & DM_ADMITTED if channel_type in DM_LIKE_TYPES else admitted


def author_decision(
    mode: str,
    channel_type: str,
    author: str,
    agent: str,
    owner: str | None,
    allowlist: Iterable[str] = (),
) -> Decision:
    """Step 4 of the gate chain. With no owner known, the owner and sibling classes are empty,
    so `owner-only` admits nobody (§4.2 item 2)."""
    admitted = admitted_classes(mode, channel_type)
    if owner is not None and author == owner and OWNER in admitted:
        return Decision.ADMIT
    if STRANGER in admitted:
        return Decision.ADMIT
    if ALLOWLISTED in admitted and author in set(allowlist):
        return Decision.ADMIT
    if owner is not None and author in (agent, owner):
        return Decision.DROP
    if MEMBER in admitted:
        return Decision.CHECK_MEMBER
    if owner is not None and SIBLING in admitted:
        return Decision.CHECK_SIBLING
    return Decision.DROP


def describe_policy(mode: str, owner_name: str | None = None) -> str:
    """Who `mode` answers, e.g. "my owner (Olivia) and agents they own"."""
    return POLICY_TEXT[mode].format(owner=f" ({owner_name})" if owner_name else "")


def grant_command(mode: str, agent: str, asker: str) -> str:
    """The one command that lets `asker` in (agents and people as npubs), naming only a mode
    that admits them (docs/decisions.md 373): in `members`, whose members an allowlist would
    shut out, `anyone` (the one mode that keeps them and admits a non-member); else an added
    allowlist entry (`owner-only` and `nobody` become `allowlist`: the owner and their agents
    keep their place, and the asker joins them)."""
    if mode == "members":
        return f"buzz agents managed set --agent {agent} --respond-to anyone"
    return f"buzz agents managed set --agent {agent} --respond-to allowlist --allow {asker}"


def not_admitted_text(mode: str, owner: str, agent: str, asker: str) -> str:
    """The visible answer to a mention the author gate refused (issue 14 item 1): who the
    agent answers, and whom to ask for access and how (issue 27: the owner grants it with one
    click on this notice, in the Directory, or with one command; no restart). `owner` is the
    owner's display name or npub; `agent` and `asker` are npubs."""
    return (
        f"I only answer {describe_policy(mode, owner)}, so I can't help with this. "
        f"Ask my owner {owner} for access: they can let you in with one click on this message, "
        f"in the Directory (Answers), or with `{grant_command(mode, agent, asker)}`."
    )


class NoticeLimiter:
    """At most one not-admitted notice per (author, channel) per `window_s` (one hour),
    remembering at most `capacity` pairs (oldest forgotten first). Time is passed in."""

    def __init__(self, window_s: float = NOTICE_WINDOW_S, capacity: int = NOTICE_MEMORY) -> None:
        self.window_s = window_s
        self._last: OrderedDict[tuple[str, str], float] = OrderedDict()
        self._capacity = capacity

    def allow(self, author: str, channel: str, now: float) -> bool:
        key = (author, channel)
        last = self._last.get(key)
        if last is not None and now - last < self.window_s:
            return False
        self._last[key] = now
        self._last.move_to_end(key)
        while len(self._last) > self._capacity:
            self._last.popitem(last=False)
        return True
