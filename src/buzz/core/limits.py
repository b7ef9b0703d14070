"""Protocol limits (relay.md §17). The relay enforces these and NIP-11 advertises the same objects."""

from __future__ import annotations

from buzz.core.filters import DEFAULT_LIMIT, MAX_LIMIT

MAX_FRAME_BYTES = 524_288  # default of BUZZ_MAX_FRAME_BYTES (configurable)
MAX_CONTENT_BYTES = 262_144
MAX_CLOCK_DRIFT_S = 900  # future side, fixed; past side is BUZZ_MAX_PAST_DRIFT_S
OBSERVER_CLOCK_DRIFT_S = 300  # kind 24200
GIFT_WRAP_PAST_DRIFT_S = 3 * 86_400  # kind 1059's past side (NIP-59 dates wraps up to 2 days back)
AUTH_WINDOW_S = 60
AUTH_TIMEOUT_S = 5
# NIP-42 on one connection (issue 25 item 2): how many pubkeys it may authenticate, and how
# failed attempts are rate-limited (a burst of 5, then one more every 12 s).
MAX_AUTH_PUBKEYS = 16
AUTH_FAILURE_BURST = 5
AUTH_FAILURE_DECAY_S = 12
CHALLENGE_BYTES = 32
MAX_SUBSCRIPTIONS = 1024
MAX_FILTERS = 10
MAX_SUBID_LENGTH = 64
COUNT_EXACT_BUDGET = 5000
SEARCH_MAX_QUERY_CHARS = 4096
# Reads one member can make expensive (issue 24 items 9–12, docs/limits.md "Reads"; not in
# relay.md §17 but for COUNT_EXACT_BUDGET). A search's terms are deduplicated (case does not
# tell two apart); more distinct terms, or a longer term, are refused. A search or COUNT that
# runs past READ_TIMEOUT_S is stopped in the database. One read (a REQ's stored results, a
# `POST /query` answer) holds at most READ_MAX_BYTES of events (their tags and content as
# stored): the first event past it ends the answer, as `limit` does.
SEARCH_MAX_TERMS = 32
SEARCH_MAX_TERM_BYTES = 256
READ_TIMEOUT_S = 5.0
READ_MAX_BYTES = 4 << 20
# Tags per event, by kind (`buzz.core.kinds.KindTable.max_tags`): lists that name people or
# events one by one may hold many; every other kind DEFAULT_MAX_TAGS.
DEFAULT_MAX_TAGS = 2000
D_TAG_MAX_BYTES = 1024
MAX_THREAD_DEPTH = 100
MAX_DELETION_TARGETS = 100  # `e` and `a` targets of one kind 5 (NIP-09 lists; decision 175)
REACTION_MAX_CHARS = 64
MAX_NOT_BEFORE_DELTA_S = 31_536_000
SEND_BUFFER = 1000
SEND_BUFFER_BYTES = 8 << 20  # per connection: queued outbound text, and each REQ's held matches
SLOW_CLIENT_GRACE = 15
PING_INTERVAL_S = 30
MAX_MISSED_PONGS = 3
MAX_CONNECTIONS = 10_000
MAX_CONCURRENT_HANDLERS = 1024
HTTP_BODY_MAX = 1 << 20
NIP98_REPLAY_TTL_S = 120
PRESENCE_TTL_S = 90
REDIS_REQUEST_TIMEOUT_MS = 250  # default of BUZZ_REDIS_TIMEOUT_MS: Redis calls a request waits on
# `POST /history` (issue 16 item 3, docs/decisions.md 81; not in relay.md §17): versions per
# answer by default and at most (a larger `limit` is clamped), and the answer's byte budget (the
# sum of the events' JSON), so one answer stays a few MiB however large the versions are.
HISTORY_DEFAULT_LIMIT = 100
HISTORY_MAX_LIMIT = 500
HISTORY_MAX_BYTES = 4 << 20
# Plain HTTP (issue 24 item 13, docs/limits.md; not in relay.md §17). A request's headers must
# arrive within HTTP_HEADER_TIMEOUT_S of the connection opening (or of its previous answer), its
# body within HTTP_BODY_TIMEOUT_S of the headers (defaults of BUZZ_HTTP_HEADER_TIMEOUT_S and
# BUZZ_HTTP_BODY_TIMEOUT_S). The open-file limit is shared out at start (`relay.fd_budget`):
# FD_RESERVE descriptors for the store, Redis, logs, listening sockets and files being served;
# a quarter of the rest (at most HTTP_CONNECTIONS_MAX) for HTTP connections that are not
# WebSockets, of which at most half (and HTTP_REQUESTS_MAX) may have a request in progress; the
# remainder bounds the WebSockets under BUZZ_MAX_CONNECTIONS. A request beyond the cap is
# answered 503 with `Retry-After: HTTP_RETRY_AFTER_S` and its connection closed.
HTTP_HEADER_TIMEOUT_S = 30
HTTP_BODY_TIMEOUT_S = 30
FD_RESERVE = 128
HTTP_CONNECTIONS_MAX = 1024
HTTP_REQUESTS_MAX = 256
HTTP_RETRY_AFTER_S = 5
# Text fields (not in relay.md §17, which bounds only whole events; docs/decisions.md 94): the
# most Unicode code points each may hold. Policy data, read by the 9007/9002 and kind 0
# validators and by the ban list's store; a longer value is refused with `text_too_long`'s
# reason (`invalid:` on the wire). docs/limits.md lists them for operators and client authors.
TEXT_CAPS: dict[str, int] = {
    "channel name": 80,  # 9007 / 9002 `name`, after the leading `#` and whitespace are stripped
    "channel about": 1000,  # 9007 / 9002 `about`
    "channel topic": 250,  # 9007 / 9002 `topic`
    "channel purpose": 250,  # 9007 / 9002 `purpose`
    "profile name": 80,  # kind 0 content `name`
    "profile display_name": 80,  # kind 0 content `display_name`
    "ban reason": 500,  # `buzz admin ban --reason`
}


def text_too_long(field: str, value: str) -> str | None:
    """The refusal reason when `value` holds more than `TEXT_CAPS[field]` code points, else None."""
    cap = TEXT_CAPS[field]
    n = len(value)
    return f"{field} too long ({n} characters, max {cap})" if n > cap else None


__all__ = [name for name in dir() if name.isupper()] + ["DEFAULT_LIMIT", "MAX_LIMIT"]
