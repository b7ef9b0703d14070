"""NIP-01 filters: strict parsing and one matching function for stored and live paths.

Source rules: relay.md §6.1 (fields, AND within a filter, OR across filters, a present empty
list matches nothing, bad `#` keys refused), §6.4 (inclusive bounds, ids prefix), §6.5 (limit
clamp). `#h` is a tag filter like any other (NIP-01): relay.md §6.2's fallback, which let an
event without `h` reach `#h` through its channel, is gone (issue 25 item 5, docs/decisions.md
174): channel reactions and deletions carry their channel's `h` instead.

A field is None when absent and a frozenset when present: "absent" and "present but empty"
are different filters and the difference is decided here, in `Filter.matches`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from buzz.core.errors import BadFilter
from buzz.core.event import Event, is_valid_unicode
from buzz.core.keys import HEX_DIGITS, is_hex

MAX_LIMIT = 1000  # relay.md §6.5: the one clamp, also NIP-11 max_limit and default_limit
DEFAULT_LIMIT = MAX_LIMIT
_FILTER_INT_MAX = 2**53 - 1

TagIndex = Mapping[str, frozenset[str]]


def tag_index(event: Event) -> dict[str, frozenset[str]]:
    """Map one-letter tag name → values `t[1]` of the event's tags with ≥ 2 elements."""
    acc: dict[str, set[str]] = {}
    for t in event.tags:
        if len(t) >= 2 and len(t[0]) == 1:
            acc.setdefault(t[0], set()).add(t[1])
    return {k: frozenset(v) for k, v in acc.items()}


def _is_tag_key(key: str) -> bool:
    return len(key) == 2 and key[0] == "#" and key[1].isascii() and key[1].isalpha()


def _int_field(name: str, value: Any) -> int:
    if type(value) is not int or value < 0 or value > _FILTER_INT_MAX:
        raise BadFilter(f"{name} must be a non-negative integer")
    return value


def _str_list(name: str, value: Any) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise BadFilter(f"{name} must be an array of strings")
    if not all(is_valid_unicode(v) for v in value):
        raise BadFilter(f"{name} values must be valid Unicode (no unpaired surrogates)")
    return value


@dataclass(frozen=True, slots=True)
class Filter:
    """A parsed NIP-01 filter. Build with `Filter.parse` (wire input) or the constructor.

    `tags` maps a one-letter name (without `#`) to its accepted values. `limit` is the value
    the client sent (None when absent); `effective_limit` applies the relay.md §6.5 clamp.
    """

    ids: frozenset[str] | None = None
    authors: frozenset[str] | None = None
    kinds: frozenset[int] | None = None
    tags: Mapping[str, frozenset[str]] = field(default_factory=dict)
    since: int | None = None
    until: int | None = None
    limit: int | None = None
    search: str | None = None
    # The distinct lengths of `ids`: a prefix test is then one set lookup per length (at most
    # 64), not one `startswith` per prefix — a frame can carry 65,536 of them (issue 9 item 4).
    _id_lengths: frozenset[int] = field(default=frozenset(), init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.ids is not None:
            object.__setattr__(self, "_id_lengths", frozenset(len(p) for p in self.ids))

    @classmethod
    def parse(cls, obj: Any) -> Filter:
        """Parse one filter object (relay.md §6.1). Unknown non-`#` keys are ignored.

        Raises BadFilter for a wrong type, uppercase or non-hex ids/authors, a negative
        number, or a `#` key that is not `#` plus one ASCII letter.
        """
        if not isinstance(obj, dict):
            raise BadFilter("filter must be a JSON object")
        ids = authors = None
        kinds = None
        tags: dict[str, frozenset[str]] = {}
        since = until = limit = None
        search = None
        for key, value in obj.items():
            if key == "ids":
                vals = _str_list("ids", value)
                for v in vals:
                    if not (1 <= len(v) <= 64 and HEX_DIGITS.issuperset(v)):
                        raise BadFilter("ids must be 1-64 lowercase hex characters")
                ids = frozenset(vals)
            elif key == "authors":
                vals = _str_list("authors", value)
                if not all(is_hex(v, 64) for v in vals):
                    raise BadFilter("authors must be 64 lowercase hex characters")
                authors = frozenset(vals)
            elif key == "kinds":
                if not isinstance(value, list) or not all(type(k) is int and 0 <= k <= 65535 for k in value):
                    raise BadFilter("kinds must be an array of integers 0-65535")
                kinds = frozenset(value)
            elif key.startswith("#"):
                if not _is_tag_key(key):
                    raise BadFilter(f"tag filter key must be # and one letter, got {key!r}")
                tags[key[1]] = frozenset(_str_list(key, value))
            elif key == "since":
                since = _int_field("since", value)
            elif key == "until":
                until = _int_field("until", value)
            elif key == "limit":
                limit = _int_field("limit", value)
            elif key == "search":
                if not isinstance(value, str) or not is_valid_unicode(value):
                    raise BadFilter("search must be a string of valid Unicode")
                search = value
        return cls(ids, authors, kinds, tags, since, until, limit, search)

    # -- derived ---------------------------------------------------------------------------
    @property
    def effective_limit(self) -> int:
        """`min(limit, MAX_LIMIT)`, MAX_LIMIT when absent (relay.md §6.5)."""
        return DEFAULT_LIMIT if self.limit is None else min(self.limit, MAX_LIMIT)

    @property
    def is_empty_match(self) -> bool:
        """True when a present empty list makes the filter match nothing (relay.md §6.1 item 2)."""
        return any(s is not None and not s for s in (self.ids, self.authors, self.kinds)) or any(
            not v for v in self.tags.values()
        )

    @property
    def channels(self) -> frozenset[str]:
        """The `#h` values (channels the filter names), empty when it has no `#h`."""
        return self.tags.get("h", frozenset())

    # -- matching --------------------------------------------------------------------------
    def matches(self, event: Event, index: TagIndex | None = None) -> bool:
        """Does `event` satisfy every present field (relay.md §6.1; NIP-01 tag rules)?

        `index` is `tag_index(event)` when the caller already built it. `limit` and `search`
        are not matching clauses.
        """
        if self.ids is not None and not any(event.id[:n] in self.ids for n in self._id_lengths):
            return False
        if self.authors is not None and event.pubkey not in self.authors:
            return False
        if self.kinds is not None and event.kind not in self.kinds:
            return False
        if self.since is not None and event.created_at < self.since:
            return False
        if self.until is not None and event.created_at > self.until:
            return False
        if self.tags:
            idx = tag_index(event) if index is None else index
            for name, wanted in self.tags.items():
                have = idx.get(name)
                if have is None or have.isdisjoint(wanted):
                    return False
        return True

    def to_dict(self) -> dict[str, Any]:
        """The wire object (sorted lists, for stable output)."""
        out: dict[str, Any] = {}
        if self.ids is not None:
            out["ids"] = sorted(self.ids)
        if self.authors is not None:
            out["authors"] = sorted(self.authors)
        if self.kinds is not None:
            out["kinds"] = sorted(self.kinds)
        for name, values in sorted(self.tags.items()):
            out["#" + name] = sorted(values)
        for name in ("since", "until", "limit", "search"):
            value = getattr(self, name)
            if value is not None:
                out[name] = value
        return out


def parse_filters(objs: Iterable[Any]) -> list[Filter]:
    """Parse the filters of a REQ/COUNT. Raises BadFilter on the first bad one."""
    return [Filter.parse(o) for o in objs]


def matches_any(filters: Iterable[Filter], event: Event) -> bool:
    """OR across filters (relay.md §6.1 item 1)."""
    idx = tag_index(event)
    return any(f.matches(event, idx) for f in filters)
