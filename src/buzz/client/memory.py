"""Agent memory: encrypted engrams shared by an agent and its owner (engram.md §8–§12).

`Memory` is one `(agent, owner)` pair seen by one identity (§12.3): the agent side (the default;
the owner from `owner=` or the identity's NIP-OA tag) reads and writes, the owner side
(`agent=`) only reads. Each call opens its own WebSocket with NIP-42 AUTH (carrying the tag),
bounded by RELAY_TIMEOUT_S, and closes it. Values are UTF-8 text of at most
`engram.PLAINTEXT_MAX` bytes.

Errors (`buzz.client.errors`): UserError (bad slug, flag or value), NotFound (absent, tombstoned
or all candidates invalid), Conflict (base-hash mismatch, a `duplicate:` answer = the write lost
to a newer head, a clock-poisoned head), Refused (`OK false`, build failure), NetworkError,
AuthError.
"""

from __future__ import annotations

import contextlib
import hashlib
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from buzz.client.engrams import Engrams, Listing, Paged, Pair, connect, is_duplicate, relay_max_limit
from buzz.client.errors import Conflict, NotFound, Refused, UserError, WorkspaceError
from buzz.client.http_bridge import BridgeError
from buzz.client.identity import parse_pubkey
from buzz.client.models import EngramWrite, Patched
from buzz.client.session import Session, from_bridge_error
from buzz.core import engram, engram_bundle
from buzz.core.engram_patch import MalformedDiff, MultiFilePatch, NoOpPatch, PatchError, apply_patch
from buzz.core.event import Event, is_valid_unicode
from buzz.core.keys import is_hex

if TYPE_CHECKING:
    from buzz.recall.rank import Hit

RELAY_TIMEOUT_S = 10.0
LOG_DEFAULT_LIMIT = 100  # versions `log` shows by default
LOG_MAX_LIMIT = 1000


@dataclass(frozen=True, slots=True)
class Version:
    """One kept version of an entry (`Memory.log`): `sha256` of the plaintext value (None
    for a tombstone) and whether it is the head (§8)."""

    event_id: str
    created_at: int
    sha256: str | None
    tombstone: bool
    head: bool

    def to_dict(self) -> dict[str, object]:
        return {
            "event_id": self.event_id,
            "created_at": self.created_at,
            "sha256": self.sha256,
            "tombstone": self.tombstone,
            "head": self.head,
        }


@dataclass(frozen=True, slots=True)
class VersionLog:
    """`Memory.log`: the slug, its versions newest first, and whether they are all the relay
    holds (False when `limit` cut the list)."""

    slug: str
    versions: tuple[Version, ...]
    complete: bool

    def to_dict(self) -> dict[str, object]:
        return {
            "slug": self.slug,
            "versions": [v.to_dict() for v in self.versions],
            "complete": self.complete,
        }


@dataclass(frozen=True, slots=True)
class Orphans:
    """`Memory.orphans`: sorted orphan slugs, dangling references in reach order, and whether
    the listing they were computed from was complete (`reason` says why not)."""

    orphans: tuple[str, ...]
    dangling: tuple[str, ...]
    complete: bool
    reason: str | None


@dataclass(frozen=True, slots=True)
class Imported:
    """`Memory.import_bundle`: slugs written (and read back), already equal, left alone because
    the head here differs, the bundle events skipped as invalid, the bundle's export time, and
    the tombstoned slugs not written because this relay has no entry there to delete."""

    written: tuple[str, ...]
    unchanged: tuple[str, ...]
    conflicts: tuple[str, ...]
    skipped: int
    exported_at: int
    tombstones_skipped: tuple[str, ...] = ()


def normalize_slug(text: str) -> str:
    """`engram.normalize_slug` (§12.4); raises UserError "invalid slug: …"."""
    try:
        return engram.normalize_slug(text)
    except engram.InvalidSlug as exc:
        raise UserError(f"invalid slug: {exc.reason}") from None


def check_perspective(owner: str | None, agent: str | None) -> None:
    """`owner=` and `agent=` exclude each other (§12.3); raises UserError."""
    if owner is not None and agent is not None:
        raise UserError("--owner and --agent are mutually exclusive")


def base_hash_arg(slug: str, base_hash: str | None, no_base_hash: bool) -> str | None:
    """The expected SHA-256 of a patch base (§12.9 steps 1–2): required unless `no_base_hash`.
    Returns 64 lowercase hex or None; raises UserError."""
    if base_hash is not None and no_base_hash:
        raise UserError("--base-hash and --no-base-hash are mutually exclusive")
    if base_hash is None and not no_base_hash:
        raise UserError(
            f"patch needs --base-hash: run `buzz mem hash {slug}` and pass its output, "
            "or pass --no-base-hash to skip the check"
        )
    if base_hash is None:
        return None
    value = base_hash.strip().lower()
    if not is_hex(value, 64):
        raise UserError("invalid --base-hash: expected 64 hex characters")
    return value


def check_removable(slug: str) -> None:
    """Core cannot be tombstoned (§12.7; empty it with `set(core, "")`); raises UserError."""
    if slug == engram.CORE_SLUG:
        raise UserError("core cannot be tombstoned; to empty it run: buzz mem set core ''")


def sha256_hex(text: str) -> str:
    """SHA-256 (hex) of the UTF-8 value: what `hash` prints and `patch` checks."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _pubkey_flag(value: str, flag: str) -> str:
    """--owner / --agent: 64 hex (any case) or npub → 64 lowercase hex (agents.md §1.1 item 2)."""
    return parse_pubkey(value, flag)


def resolve_pair(session: Session, owner: str | None = None, agent: str | None = None) -> Pair:
    """The pair of §12.3: agent side by default (owner from `owner`, else the identity's tag),
    owner side with `agent` (both hex or npub). Raises UserError."""
    check_perspective(owner, agent)
    secret, me, tag = session.identity.secret, session.pubkey, session.identity.auth_tag
    if agent is not None:
        flag, other = "--agent", _pubkey_flag(agent, "--agent")
        if other == me:
            raise UserError("--agent must differ from your own pubkey (you would be reading as the agent)")
        pair = Pair.as_owner(secret, me, other)
    else:
        if owner is not None:
            flag, other = "--owner", _pubkey_flag(owner, "--owner")
        elif tag is not None:
            flag, other = "BUZZ_AUTH_TAG", tag[1]
        else:
            raise UserError("no owner: pass --owner <64 hex> or set BUZZ_AUTH_TAG (the agent's NIP-OA tag)")
        pair = Pair.as_agent(secret, me, other)
    try:
        pair.check_keys()
    except engram.InvalidKey as exc:
        raise UserError(f"invalid {flag}: {exc.reason}") from None
    return pair


def _not_found(slug: str, outcome: engram.HeadOutcome) -> NotFound:
    if isinstance(outcome, engram.AllInvalid):
        return NotFound(
            f"not found: {slug} (skipped {outcome.count} invalid candidates: {outcome.last_error})"
        )
    return NotFound(f"not found: {slug}")


def value_of(slug: str, outcome: engram.HeadOutcome) -> str:
    """The live text at `slug`; raises NotFound for absent, all-invalid or tombstoned."""
    if not isinstance(outcome, engram.Found):
        raise _not_found(slug, outcome)
    if outcome.body.is_tombstone:
        raise NotFound(f"tombstoned: {slug}")
    text = outcome.body.text
    assert text is not None
    return text


def _body(slug: str, value: str | None) -> engram.Body:
    if slug == engram.CORE_SLUG:
        assert value is not None
        return engram.CoreBody(value)
    return engram.MemoryBody(slug, value)


def _head_created_at(outcome: engram.HeadOutcome) -> int | None:
    return outcome.event.created_at if isinstance(outcome, engram.Found) else None


def _patched(current: str, diff: str) -> str:
    """engram.md §12.9 steps 6–10 with their UserError messages."""
    try:
        return apply_patch(current, diff)
    except (MultiFilePatch, NoOpPatch) as exc:
        raise UserError(str(exc)) from None
    except MalformedDiff as exc:
        raise UserError(f"malformed unified diff: {exc}") from None
    except PatchError as exc:
        raise UserError(f"patch does not apply (no fuzz and no offset are allowed): {exc}") from None


async def _write(engrams: Engrams, slug: str, value: str | None, head_created_at: int | None) -> EngramWrite:
    """§12.8 steps 5–7: monotonic created_at, poison check, build, submit."""
    now = int(time.time())
    created_at = engram.monotonic_created_at(now, head_created_at)
    if engram.is_clock_poisoned(created_at, now):
        raise Conflict(
            f"the head of {slug} has created_at {head_created_at}, more than "
            f"{engram.CLOCK_POISON_MARGIN} s ahead of this clock ({now}); refusing to write"
        )
    try:
        event: Event = engrams.build(_body(slug, value), created_at)
    except engram.EngramError as exc:
        raise WorkspaceError(f"build event failed: {exc.reason}") from None
    result = await engrams.publish(event)
    if is_duplicate(result):
        raise Conflict(
            f"write lost to a newer head of {slug}: {result.message}", relay_message=result.message
        )
    if not result.accepted:
        raise Refused(f"relay rejected the write: {result.message}", relay_message=result.message)
    return EngramWrite(slug, event.id, event.created_at)


class Memory:
    """The memory of one pair, as one identity sees it. Every `slug` argument is normalized
    first (`normalize_slug`: UserError when invalid)."""

    def __init__(self, session: Session, pair: Pair) -> None:
        self._s = session
        self.pair = pair

    @contextlib.asynccontextmanager
    async def _engrams(self) -> AsyncIterator[Engrams]:
        ident = self._s.identity
        async with connect(
            self._s.relay_url, ident.secret, auth_tags=ident.auth_tags, timeout=RELAY_TIMEOUT_S
        ) as client:
            yield Engrams(client, self.pair)

    async def get(self, slug: str) -> str:
        """The live value at `slug`; raises NotFound."""
        slug = normalize_slug(slug)
        async with self._engrams() as engrams:
            return value_of(slug, await engrams.head(slug))

    async def value(self, slug: str) -> str | None:
        """`get`, with None where it raises NotFound."""
        try:
            return await self.get(slug)
        except NotFound:
            return None

    async def hash(self, slug: str) -> str:
        """SHA-256 (hex) of `get(slug)`, for `patch(base_hash=…)`."""
        return sha256_hex(await self.get(slug))

    async def ls(self) -> Listing:
        """§9: live memory entries (core excluded) sorted by slug, with the relay's answer count
        and the number of records skipped as invalid."""
        max_limit = await self.page_limit()
        async with self._engrams() as engrams:
            return await engrams.listing(max_limit)

    async def _all_heads(self) -> tuple[dict[str, engram.Record], Paged]:
        """Every slug's decrypted head (tombstones and core included) and how the listing paged
        (`complete`, `reason`), over the relay's NIP-11 clamp."""
        max_limit = await self.page_limit()
        async with self._engrams() as engrams:
            heads, _, _ = await engrams.heads(max_limit)
            paged = engrams.last_paging
        assert paged is not None
        return heads, paged

    async def page_limit(self) -> int | None:
        """The relay's NIP-11 `max_limit` (None if unknown), for `engram.is_listing_truncated`."""
        return await relay_max_limit(self._s.relay_url)

    async def set(self, slug: str, value: str) -> EngramWrite:
        """§12.8: fetch the head, write `value` (agent side only)."""
        slug = normalize_slug(slug)
        async with self._engrams() as engrams:
            head = await engrams.head(slug)
            return await _write(engrams, slug, value, _head_created_at(head))

    async def patch(
        self, slug: str, diff: str, base_hash: str | None, *, allow_empty: bool = False, dry_run: bool = False
    ) -> Patched:
        """§12.9: apply a one-file unified diff at exactly its line numbers. `base_hash` (hex or
        None to skip) must match the current value, else Conflict. A dry run publishes nothing
        (`write` None). Raises UserError when the patch does not apply, is too large, or empties
        the value without `allow_empty`."""
        slug = normalize_slug(slug)
        async with self._engrams() as engrams:
            head = await engrams.head(slug)
            current = value_of(slug, head)
            if base_hash is not None and sha256_hex(current) != base_hash:
                raise Conflict(
                    f"base hash mismatch: {slug} has sha256 {sha256_hex(current)}, --base-hash is {base_hash}"
                )
            result = _patched(current, diff)
            if len(result.encode("utf-8")) > engram.PLAINTEXT_MAX:
                raise UserError(f"patched value exceeds {engram.PLAINTEXT_MAX} bytes")
            if not result and not allow_empty:
                raise UserError(f"the patch empties {slug}: pass --allow-empty to write an empty value")
            if dry_run:
                return Patched(slug, sha256_hex(result), None)
            write = await _write(engrams, slug, result, _head_created_at(head))
        return Patched(slug, sha256_hex(result), write)

    async def rm(self, slug: str) -> EngramWrite:
        """Tombstone `slug`; core cannot be removed (`check_removable`)."""
        slug = normalize_slug(slug)
        check_removable(slug)
        async with self._engrams() as engrams:
            head = await engrams.head(slug)
            return await _write(engrams, slug, None, _head_created_at(head))

    async def search(self, text: str, limit: int = 10, *, cache: bool = True) -> list[Hit]:
        """Issue 16: the `limit` (1..100) live entries that best match `text` by meaning, best
        first, ranked on this machine after decryption (`buzz.recall`: BM25 + sentence
        embeddings). With `cache`, vectors are kept in the reader's encrypted cache file
        (`recall.cache`), so only new or changed entries are embedded. Raises UserError (empty
        text, bad limit), WorkspaceError (the embedding model is not installed)."""
        # Imported here: numpy, bm25s and onnxruntime load only for a search, so every other
        # command works (and a missing extra is named) without them.
        from buzz.recall.cache import VectorCache, cache_path, derive_key
        from buzz.recall.embed import EmbeddingUnavailable
        from buzz.recall.rank import MAX_LIMIT
        from buzz.recall.search import search_heads

        query = text.strip()
        if not query:
            raise UserError("search text is empty")
        if not is_valid_unicode(query):  # bytes that are not UTF-8 reach argv as lone surrogates
            raise UserError("search text is not valid UTF-8")
        if not 1 <= limit <= MAX_LIMIT:
            raise UserError(f"invalid --limit: expected 1..{MAX_LIMIT}")
        max_limit = await self.page_limit()
        async with self._engrams() as engrams:
            heads, _, _ = await engrams.heads(max_limit)
        store = None
        if cache:
            me = self._s.pubkey
            path = cache_path(me, self.pair.agent)
            store = VectorCache.load(path, derive_key(self.pair.secret, self.pair.agent))
        try:
            return search_heads(heads, query, limit, store)
        except EmbeddingUnavailable as exc:
            raise WorkspaceError(f"memory search needs the embedding model: {exc}") from None

    async def log(self, slug: str, limit: int = LOG_DEFAULT_LIMIT) -> VersionLog:
        """Issue 16 item 3: the versions of `slug` the relay still holds, newest first (§8 tie
        rule: `created_at` descending, then id ascending), each verified, decrypted and hashed
        here; `head` marks the version the §8 head query answers (what `get` reads).

        The versions come from the bridge's `POST /history` (docs/decisions.md 81), paged up
        to `limit` (1..LOG_MAX_LIMIT; `complete` False when more remain), merged with the head
        query's answer (a relay without `/history` shows what that answer holds). The relay
        serves them to the agent and to the owner its owner tag names only, and only their key
        opens them; anyone else gets NotFound, exactly as for a slug never written. Candidates
        that fail verification or decryption, or name another slug, are skipped. Raises
        UserError (slug, limit), NotFound, WorkspaceError.
        """
        slug = normalize_slug(slug)
        if not 1 <= limit <= LOG_MAX_LIMIT:
            raise UserError(f"invalid --limit: expected 1..{LOG_MAX_LIMIT}")
        p = self.pair
        d = engram.d_tag(engram.conversation_key(p.secret, p.their_pubkey), slug)
        kept, complete = await self._history(d, limit)
        async with self._engrams() as engrams:
            answer = await engrams.answer(slug)
        seen = {e.id for e in kept}
        merged = kept + [e for e in answer if e.id not in seen]
        records, last_error = self._records(merged, slug)  # each event opened once
        in_answer = {e.id for e in answer}
        head = engram.select_head(r for r in records if r.id in in_answer)
        if not records:
            raise _not_found(
                slug,
                engram.AllInvalid(len(merged), last_error or "body slug differs from the address")
                if merged
                else engram.EmptyAnswer(),
            )
        records.sort(key=lambda r: (-r.created_at, r.id))
        versions = tuple(
            Version(
                r.id,
                r.created_at,
                None if r.body.text is None else sha256_hex(r.body.text),
                r.body.is_tombstone,
                head is not None and r.id == head.id,
            )
            for r in records[:limit]
        )
        return VersionLog(slug, versions, complete and len(records) <= limit)

    def _records(self, events: list[Event], slug: str) -> tuple[list[engram.Record], str | None]:
        """The events that verify, open and name `slug`, and the last failure's reason."""
        p = self.pair
        opened = engram.open_candidates(events, p.agent, p.owner, p.secret, p.their_pubkey)
        return [r for r in opened.records if r.body.slug == slug], opened.last_error

    async def _history(self, d: str, limit: int) -> tuple[list[Event], bool]:
        """Up to `limit` versions at (30174, agent, d) from `POST /history`, and whether that
        was all of them. A relay without the route (404) contributes nothing."""
        events: list[Event] = []
        before: list[object] | None = None
        while len(events) < limit:
            try:
                page, before = await self._s.bridge.history(
                    engram.KIND_ENGRAM, self.pair.agent, d, limit=limit - len(events), before=before
                )
            except BridgeError as exc:
                if exc.status == 404 and not events:
                    return [], True
                raise from_bridge_error(exc) from None
            events += page
            if before is None or not page:
                return events, True
        return events, False

    async def orphans(self) -> Orphans:
        """Issue 16 item 4 / engram.md §10.3: live memory slugs that core does not reach through
        `[[slug]]` references (`find_orphans`), and reached slugs without a live head
        (`dangling_refs`), over the complete listing. Review only: nothing is deleted."""
        heads, paged = await self._all_heads()
        return Orphans(
            tuple(engram.find_orphans(heads)),
            tuple(engram.dangling_refs(heads)),
            paged.complete,
            paged.reason,
        )

    async def export(self, now: int | None = None) -> tuple[bytes, int, int]:
        """Issue 16 item 4: a bundle (`buzz.core.engram_bundle`) of every head of this pair,
        tombstones and core included, sealed under the pair key and signed by the agent; with
        the number of heads and its `exported_at` (unix s). Agent side only (the agent signs). Raises UserError (owner side),
        Refused when the listing is incomplete (a bundle must not silently miss entries)."""
        if not self.pair.is_agent:
            raise UserError("only the agent exports its memory (it signs the bundle); run as the agent")
        heads, paged = await self._all_heads()
        if not paged.complete:
            raise Refused(f"cannot export an incomplete listing: {paged.reason}")
        events = [heads[s].event for s in sorted(heads)]
        p = self.pair
        key = engram.conversation_key(p.secret, p.their_pubkey)
        stamp = int(time.time()) if now is None else now
        return engram_bundle.seal(p.secret, p.owner, key, events, stamp), len(events), stamp

    async def import_bundle(self, data: bytes) -> Imported:
        """Issue 16 item 4: carry a bundle's heads to this relay by re-signing each as a fresh
        event (new `created_at`, monotonic over any head here), then read every slug back.

        The bundle must be signed by this agent for this owner; every event in it is verified
        and opened again (invalid ones are counted in `skipped`). A slug whose head here
        already has the same body is `unchanged`; one whose head here differs is a conflict
        and is left alone (nothing is overwritten); a tombstone with no head here is not
        written (nothing to delete) and is listed in `tombstones_skipped`. Agent side only. Raises UserError (bad or foreign bundle, owner side)."""
        if not self.pair.is_agent:
            raise UserError("only the agent imports its memory (it re-signs every head); run as the agent")
        p = self.pair
        key = engram.conversation_key(p.secret, p.their_pubkey)
        try:
            bundle = engram_bundle.open_bundle(data, key)
        except engram_bundle.BundleError as exc:
            raise UserError(f"invalid bundle: {exc.reason}") from None
        if (bundle.agent, bundle.owner) != (p.agent, p.owner):
            raise UserError("invalid bundle: it holds another agent's or another owner's memory")
        opened = engram.open_candidates(bundle.events, p.agent, p.owner, p.secret, p.their_pubkey)
        wanted = engram.heads_by_slug(opened.records)
        written, unchanged, conflicts, tombstones = [], [], [], []
        async with self._engrams() as engrams:
            for slug in sorted(wanted):
                body = wanted[slug].body
                here = await engrams.head(slug)
                if isinstance(here, engram.Found):
                    if here.body == body:
                        unchanged.append(slug)
                    else:
                        conflicts.append(slug)
                    continue
                if isinstance(here, engram.AllInvalid):
                    conflicts.append(slug)
                    continue
                if body.is_tombstone:
                    tombstones.append(slug)
                    continue
                await _write(engrams, slug, body.text, None)
                written.append(slug)
            verified = 0
            for slug in written:
                again = await engrams.head(slug)
                if isinstance(again, engram.Found) and again.body == wanted[slug].body:
                    verified += 1
        if verified != len(written):
            raise Refused(
                f"read-back failed: {len(written) - verified} of {len(written)} written heads differ"
            )
        return Imported(
            tuple(written),
            tuple(unchanged),
            tuple(conflicts),
            opened.skipped,
            bundle.exported_at,
            tuple(tombstones),
        )
