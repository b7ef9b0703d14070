"""Engram I/O over one relay connection: head fetch, listing, publishing (engram.md §8, §9, §12.4).

Used by the memory area of the workspace API (`buzz.client.memory`, i.e. `buzz mem` and the MCP
`mem_*` tools) and by the agent harness's core-memory fetch. A `Pair` says whose memory is read
and with which keys; an `Engrams` runs the queries of §8 and §9 on an authenticated
`RelayClient` and hands the answers to the pure library (`buzz.core.engram`). A query that does
not complete raises a `buzz.client.errors` failure (or yields a `Failure` outcome): failure is
never presented as absence.

| cause | error |
|---|---|
| transport error, timeout, connection lost | `NetworkError` (retryable) |
| AUTH refused; `auth-required:`, `restricted:`, `blocked:` answers | `AuthError` |
| any other refusal or unexpected answer | `Refused` |
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass

import aiohttp

from buzz.client.errors import AuthError, NetworkError, Refused, WorkspaceError
from buzz.client.relay_client import ConnectionLost, PublishResult, RelayClient, RelayError
from buzz.core import engram
from buzz.core.event import Event
from buzz.core.keys import is_hex

# CLOSED / OK prefixes that mean "you may not" rather than "something broke" (relay.md §7.8).
_AUTH_PREFIXES = ("auth-required", "restricted", "blocked")


def failure_of(exc: BaseException) -> WorkspaceError:
    """Classify a client exception by the table above (never raises)."""
    if isinstance(exc, WorkspaceError):
        return exc
    if isinstance(exc, ConnectionLost):
        return NetworkError(f"connection lost: {exc.message}")
    if isinstance(exc, RelayError):
        cls = AuthError if exc.prefix in _AUTH_PREFIXES else Refused
        return cls(f"relay refused: {exc.message}", relay_message=exc.message)
    if isinstance(exc, TimeoutError):
        return NetworkError("timed out waiting for the relay")
    if isinstance(exc, aiohttp.ClientError | OSError):
        return NetworkError(f"cannot reach the relay: {exc}")
    return Refused(f"unexpected relay answer: {exc!r}")


def websocket_url(url: str) -> str:
    """`http(s)://…` → `ws(s)://…` (agents.md §2.1 accepts all four); other URLs unchanged."""
    for http, ws in (("https://", "wss://"), ("http://", "ws://")):
        if url.lower().startswith(http):
            return ws + url[len(http) :]
    return url


@contextlib.asynccontextmanager
async def connect(
    url: str, secret_key: str, *, auth_tags: Sequence[Sequence[str]] = (), timeout: float = 10.0
) -> AsyncIterator[RelayClient]:
    """An authenticated client for `url` (NIP-42, with `auth_tags` such as a NIP-OA tag).

    Connecting and AUTH together are bounded by `timeout` seconds. Raises NetworkError,
    AuthError or Refused.
    """
    client = RelayClient(websocket_url(url), secret_key, auth_tags=auth_tags, timeout=timeout)
    try:
        await asyncio.wait_for(client.connect(), timeout)
    except BaseException as exc:
        await client.close()
        if isinstance(exc, Exception):
            raise failure_of(exc) from None
        raise
    try:
        yield client
    finally:
        await client.close()


async def relay_max_limit(url: str, timeout: float = 3.0) -> int | None:
    """NIP-11 `limitation.max_limit` of the relay at `url` (ws/wss/http/https), None if unknown."""
    http = websocket_url(url).replace("wss://", "https://", 1).replace("ws://", "http://", 1)
    try:
        async with aiohttp.ClientSession() as session:
            async with session.get(
                http,
                headers={"Accept": "application/nostr+json"},
                timeout=aiohttp.ClientTimeout(total=timeout),
            ) as resp:
                info = await resp.json(content_type=None)
    except (aiohttp.ClientError, OSError, TimeoutError, ValueError):
        return None
    limit = info.get("limitation", {}).get("max_limit") if isinstance(info, dict) else None
    return limit if isinstance(limit, int) and not isinstance(limit, bool) and limit > 0 else None


# -- whose memory -----------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Pair:
    """One `(agent, owner)` memory and the keys that open it (engram.md §12.3).

    `secret` is the reader's secret key (64 hex) and `their_pubkey` the other party: the owner
    when the reader is the agent, the agent when the reader is the owner.
    """

    agent: str
    owner: str
    secret: str
    their_pubkey: str

    @classmethod
    def as_agent(cls, secret: str, agent: str, owner: str) -> Pair:
        return cls(agent, owner, secret, owner)

    @classmethod
    def as_owner(cls, secret: str, owner: str, agent: str) -> Pair:
        return cls(agent, owner, secret, agent)

    @property
    def is_agent(self) -> bool:
        return self.their_pubkey == self.owner

    def check_keys(self) -> None:
        """Raises engram.InvalidKey when `their_pubkey` is not 64 hex of a curve point."""
        if not is_hex(self.their_pubkey, 64):
            raise engram.InvalidKey("pubkey must be 64 hex characters")
        engram.conversation_key(self.secret, self.their_pubkey)


@dataclass(frozen=True, slots=True)
class Listing:
    """A §9 listing: live entries sorted by slug, the number of records the relay answered over
    all pages (tombstones and core included), the number skipped as invalid, and whether paging
    reached the end (`reason` says why not)."""

    entries: tuple[engram.ListEntry, ...]
    answered: int
    skipped: int
    complete: bool = True
    reason: str | None = None
    pages: int = 1


@dataclass(frozen=True, slots=True)
class Paged:
    """`Engrams.paged_records`: the events (unverified, deduplicated), pages asked, whether the
    relay has no more, and why not when it may."""

    events: tuple[Event, ...]
    pages: int
    complete: bool
    reason: str | None


MAX_PAGES = 100  # 100 pages of the relay clamp (1,000) = 100,000 records


class Engrams:
    """Engram queries and writes for one Pair on one authenticated client."""

    def __init__(self, client: RelayClient, pair: Pair) -> None:
        self.client = client
        self.pair = pair
        self.last_paging: Paged | None = None

    def _key(self) -> bytes:
        return engram.conversation_key(self.pair.secret, self.pair.their_pubkey)

    async def _query(self, flt: dict[str, object]) -> list[Event]:
        try:
            return await self.client.query([flt])
        except Exception as exc:
            raise failure_of(exc) from None

    def head_filter(self, slug: str) -> dict[str, object]:
        """The §8 step 1 filter for `slug` (validated, not normalized)."""
        d = engram.d_tag(self._key(), slug)
        return {
            "kinds": [engram.KIND_ENGRAM],
            "authors": [self.pair.agent],
            "#d": [d],
            "#p": [self.pair.owner],
            "limit": engram.HEAD_QUERY_LIMIT,
        }

    async def answer(self, slug: str) -> list[Event]:
        """The relay's answer to the §8 head query for `slug`, unverified. Raises WorkspaceError."""
        return await self._query(self.head_filter(slug))

    async def head(self, slug: str) -> engram.Found | engram.EmptyAnswer | engram.AllInvalid:
        """§8 for `slug`: Found, EmptyAnswer or AllInvalid. A Found whose body names another
        slug is counted as invalid. Raises WorkspaceError (Failure)."""
        answer = await self.answer(slug)
        opened = engram.open_candidates(
            answer, self.pair.agent, self.pair.owner, self.pair.secret, self.pair.their_pubkey
        )
        matching = [r for r in opened.records if r.body.slug == slug]
        head = engram.select_head(matching)
        if head is not None:
            return engram.Found(head.event, head.body)
        if not answer:
            return engram.EmptyAnswer()
        last = (
            opened.last_error
            if len(matching) == len(opened.records)
            else "body slug differs from the address"
        )
        return engram.AllInvalid(len(answer), last or "no candidate")

    async def core(self) -> tuple[engram.CoreState, str | None, str | None]:
        """The core head of engram.md §13.3–§13.4: (state, profile text for FOUND, failure
        reason for FAILURE). Raises WorkspaceError when the query does not complete."""
        answer = await self.answer(engram.CORE_SLUG)
        p = self.pair
        outcome = engram.head_outcome(answer, p.agent, p.owner, p.secret, p.their_pubkey)
        state, profile = engram.core_state(outcome)
        reason = None
        if state is engram.CoreState.FAILURE:
            reason = outcome.reason if isinstance(outcome, engram.AllInvalid | engram.Failure) else "failure"
        return state, profile, reason

    async def fetch_head(self, slug: str) -> engram.HeadOutcome:
        """`head`, with a Failure outcome instead of an error (never raises for I/O)."""
        try:
            return await self.head(slug)
        except WorkspaceError as exc:
            return engram.Failure(exc.message)

    async def listing(self, max_limit: int | None = None) -> Listing:
        """§9: every record of the pair (no `#d`, limit 5000, paged past the relay's clamp by
        `paged_records`), heads per `d`, live memory entries only. Raises WorkspaceError."""
        heads, answered, skipped = await self.heads(max_limit)
        paged = self.last_paging
        assert paged is not None
        return Listing(
            tuple(engram.listing(heads)), answered, skipped, paged.complete, paged.reason, paged.pages
        )

    async def heads(self, max_limit: int | None = None) -> tuple[dict[str, engram.Record], int, int]:
        """§9 steps 1–3: the decrypted head of every slug (tombstones and core included), the
        number of events the relay answered and the number skipped; `max_limit` is the relay's
        NIP-11 clamp when known (`paged_records`). Raises WorkspaceError."""
        paged = await self.paged_records(max_limit)
        opened = engram.open_candidates(
            paged.events, self.pair.agent, self.pair.owner, self.pair.secret, self.pair.their_pubkey
        )
        self.last_paging = paged
        return engram.heads_by_slug(opened.records), len(paged.events), opened.skipped

    async def paged_records(self, max_limit: int | None = None) -> Paged:
        """Every record of the pair, paging by `until` past the relay's clamp (issue 16 item 2).

        Each page asks for LIST_QUERY_LIMIT events `until` the oldest `created_at` seen
        (inclusive, so events sharing that second are not lost) and keeps the new ids. A page is
        full when it holds the relay's clamp: `max_limit` (NIP-11) when known, else the first
        page's size once a later page proved it was clamped. Paging stops when a page brings
        nothing new (complete) unless that page is one second and full (incomplete: `until`
        cannot step past it), or after MAX_PAGES (incomplete). Raises WorkspaceError.
        """
        flt: dict[str, object] = {
            "kinds": [engram.KIND_ENGRAM],
            "authors": [self.pair.agent],
            "#p": [self.pair.owner],
            "limit": engram.LIST_QUERY_LIMIT,
        }
        seen: dict[str, Event] = {}
        until: int | None = None
        first = 0
        bound = min(engram.LIST_QUERY_LIMIT, max_limit) if max_limit else engram.LIST_QUERY_LIMIT
        for page in range(1, MAX_PAGES + 1):
            answer = await self._query(flt if until is None else {**flt, "until": until})
            first = first or len(answer)
            fresh = [e for e in answer if e.id not in seen]
            seen.update((e.id, e) for e in fresh)
            if page > 1 and fresh and not max_limit:
                bound = min(bound, first)  # page 1 was clamped at `first`
            one_second = len({e.created_at for e in answer}) == 1
            at_until = one_second and answer[0].created_at == (
                until if until is not None else answer[0].created_at
            )
            if at_until and len(answer) >= bound:
                reason = f"a full page of records share created_at {answer[0].created_at}; `until` cannot page past it"
                return Paged(tuple(seen.values()), page, False, reason)
            if not fresh or (at_until and until is not None):
                return Paged(tuple(seen.values()), page, True, None)
            until = min(e.created_at for e in answer)
        return Paged(tuple(seen.values()), MAX_PAGES, False, f"stopped after {MAX_PAGES} pages")

    def build(self, body: engram.Body, created_at: int) -> Event:
        """Sign `body` as the agent (the reader must be the agent). Raises EngramError
        (BodyTooLarge, InvalidKey, InvalidBody)."""
        if not self.pair.is_agent:
            raise ValueError("only the agent writes its memory")
        return engram.build_event(self.pair.secret, self.pair.owner, body, created_at)

    async def publish(self, event: Event) -> PublishResult:
        """Send the event and return the relay's acceptance. Raises WorkspaceError (transport)."""
        try:
            return await self.client.publish(event)
        except Exception as exc:
            raise failure_of(exc) from None


def is_duplicate(result: PublishResult) -> bool:
    """A write that lost to a newer head (engram.md §12.4): a conflict. The relay answers it
    `OK false "duplicate: have a newer version"` (issue 25 item 4; `OK true "duplicate:"` for
    the same event again)."""
    return result.message == "duplicate" or result.message.startswith("duplicate:")
