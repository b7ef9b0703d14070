"""Kinds where block/buzz's registry (`shared/vectors/kinds.json`) and relay.md §3.2 disagree.

relay.md wins; each entry keeps a kind out of one kinds.json agreement test with a one-line
reason, and the tests check that every entry still names a real disagreement (no stale rows).
Kinds that kinds.json lists and relay.md does not register are not differences: they are
unknown here and refused with `restricted: unknown event kind` (relay.md §3.2 item 1).
`ADDITIONS` are the kinds registered here that kinds.json does not list at all.

Compared columns: storage class and visibility sets (`DELIBERATE_DIFFERENCES`), write scope
(`SCOPE_DIFFERENCES`; kinds.json `null` = relay-only, reserved, AUTH or ephemeral, whose scope
is checked before ingest) and place (`PLACE_DIFFERENCES`; kinds.json flags `ingest_global_only`
/ `ingest_requires_h` against our Place G / H).
"""

from __future__ import annotations

# kind -> why storage class or visibility sets differ (none today: all shared kinds agree).
DELIBERATE_DIFFERENCES: dict[int, str] = {}

# kind -> why the write scope differs (relay.md §3.2 "Scope" column).
SCOPE_DIFFERENCES: dict[int, str] = {
    40099: "the relay spec lets an agent with a registered owner sign control outcomes (m:w, §9 item 11); "
    "buzz has no client scope for system messages",
    **dict.fromkeys(
        range(43001, 43007),
        "the jobs spec accepts the job lifecycle from channel members (m:w, issue 27); buzz refuses it at ingest",
    ),
    48101: "the relay spec makes huddle joins relay-signed only; buzz lets clients send them with channels:write",
    48102: "the relay spec makes huddle leaves relay-signed only; buzz lets clients send them with channels:write",
}

_WORKFLOW = (
    "the relay spec places workflow execution records in their channel (Place H); buzz has no ingest flag"
)
_GLOBAL = "the relay spec forces the channel to NULL (Place G); buzz does not flag the kind global-only"

# kind -> why the place differs (relay.md §3.2 "Place" column, §4.2).
PLACE_DIFFERENCES: dict[int, str] = {
    1059: _GLOBAL + " (gift wraps are p-gated global events)",
    1984: _GLOBAL + " (reports are global until the moderation queue exists)",
    44100: _GLOBAL + " (relay-signed notices are global so the target sees them, §4.6 item 3)",
    44101: _GLOBAL + " (relay-signed notices are global so the target sees them, §4.6 item 3)",
    9007: "the relay spec requires h (the new channel's id); buzz checks it in the command handler instead",
    9021: "the relay spec requires h (the channel to join); buzz checks it in the command handler instead",
    30620: "the relay spec requires h (the workflow's channel); buzz treats it as a command kind",
    40099: "the relay spec requires h (system messages live in a channel); buzz emits them internally only",
    **dict.fromkeys(
        range(43001, 43007),
        "the jobs spec places jobs in their channel (Place H); buzz refuses the kinds at ingest",
    ),
    **dict.fromkeys((46001, 46002, 46003, 46004, 46005, 46006, 46007, 46010, 46011, 46012), _WORKFLOW),
}

_CLIENTS = "issue 25 item 7: third-party Nostr clients publish it (docs/decisions.md 170)"

# kind -> why buzz registers a kind that block/buzz's kinds.json does not list.
ADDITIONS: dict[int, str] = {
    6: _CLIENTS + ": NIP-18 repost",
    16: _CLIENTS + ": NIP-18 generic repost",
    1111: _CLIENTS + ": NIP-22 comment",
    10050: _CLIENTS + ": NIP-17 DM relay list, which every NIP-17 helper publishes before a DM",
    10063: _CLIENTS + ": BUD-03 Blossom server list (the files issue uses it)",
    30024: _CLIENTS + ": NIP-23 long-form draft (author-only here: a draft is not published)",
    30181: "the jobs spec (§12) adds buzz's NIP-AW draft lane: agent work status, channel-scoped",
}
