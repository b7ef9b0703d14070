"""Read-only views of channel events that several harness parts need (agents.md §3.3, §3.4). Pure."""

from __future__ import annotations

from dataclasses import dataclass

from buzz.core.channel_id import is_channel_id
from buzz.core.event import Event
from buzz.core.keys import is_hex


@dataclass(frozen=True, slots=True)
class ThreadRefs:
    """NIP-10 marked links of an event: `parent` (the `reply` tag) and `root` (None when top-level)."""

    root: str | None
    parent: str | None

    @property
    def in_thread(self) -> bool:
        return self.parent is not None


def thread_refs(event: Event) -> ThreadRefs:
    """agents.md §3.3 item 1: a reply iff an `e` tag has marker `reply`; unmarked `e` tags are
    never thread links. The root is the `root`-marked tag, else the parent itself."""
    parent = root = None
    for tag in event.tags:
        if len(tag) >= 4 and tag[0] == "e" and is_hex(tag[1], 64):
            if tag[3] == "reply" and parent is None:
                parent = tag[1]
            elif tag[3] == "root" and root is None:
                root = tag[1]
    if parent is None:
        return ThreadRefs(None, None)
    return ThreadRefs(root or parent, parent)


def reply_anchor(event: Event) -> str:
    """The reply anchor of agents.md §4.12 step 1: the thread root, else the event itself."""
    return thread_refs(event).root or event.id


def mentioned(event: Event) -> list[str]:
    """Distinct `p` values that are 64 lowercase hex, in tag order (§3.2)."""
    out: list[str] = []
    for value in event.tag_values("p"):
        if is_hex(value, 64) and value not in out:
            out.append(value)
    return out


def mentions(event: Event, pubkey: str) -> bool:
    """True iff the event has a tag `["p", pubkey]` (exact lowercase hex; §3.4 item 1, §4.4)."""
    return any(len(t) >= 2 and t[0] == "p" and t[1] == pubkey for t in event.tags)


def channel_of(event: Event) -> str | None:
    """The first `h` value that is a canonical channel UUID (agents.md §3.1), or None."""
    return next((h for h in event.tag_values("h") if is_channel_id(h)), None)


# The marker on every notice a harness posts as a message (retrying, failure, not admitted):
# no agent starts a turn on an event carrying it (issue 14 item 6), so one agent's failure
# notice cannot wake its siblings.
NOTICE_TAG = "buzz:agent-notice"


def is_notice(event: Event) -> bool:
    """True for a harness notice, whichever agent posted it."""
    return any(len(t) >= 2 and t[0] == NOTICE_TAG for t in event.tags)
