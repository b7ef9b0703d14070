"""Engrams: persistent agent memory records (NIP-AE, engram.md), the pure shared library.

An engram is a kind 30174 event by the agent, addressed by `d = HMAC(K_c, domain ‖ 0 ‖ slug)`
and encrypted with NIP-44 v2 under the agent–owner conversation key `K_c`. This module
re-exports the public API of three small modules:

- `engram_body`: constants (§15.1), errors, slugs (§3), bodies (§6), `extract_refs` (§10.2);
- `engram_event`: `conversation_key`, `d_tag` (§4), `build_event` (§5), `validate_and_decrypt` (§7);
- `engram_head`: `monotonic_created_at` (§5.2), `select_head` and read outcomes (§8), listing
  (§9), reachability and `find_orphans` (§10.3), core-memory states (§13.4).

Nothing here does I/O or reads the clock. Every error is an `EngramError` (a ValueError);
`InvalidKey` and `Decrypt` are also `buzz.core.nip44` errors.
"""

from __future__ import annotations

from buzz.core.engram_body import (
    CLOCK_POISON_MARGIN,
    CORE_FETCH_TIMEOUT,
    CORE_SLUG,
    D_DOMAIN,
    HEAD_QUERY_LIMIT,
    KIND_ENGRAM,
    LIST_QUERY_LIMIT,
    MEM_PREFIX,
    PLAINTEXT_MAX,
    SEGMENT_MAX,
    SLUG_MAX,
    Body,
    BodyTooLarge,
    CoreBody,
    Decrypt,
    EngramError,
    InvalidBody,
    InvalidEnvelope,
    InvalidKey,
    InvalidSlug,
    MemoryBody,
    decode_body,
    encode_body,
    extract_refs,
    is_valid_slug,
    normalize_slug,
    validate_slug,
)
from buzz.core.engram_event import build_event, conversation_key, d_tag, validate_and_decrypt
from buzz.core.engram_head import (
    AllInvalid,
    CoreState,
    EmptyAnswer,
    Failure,
    Found,
    HeadOutcome,
    ListEntry,
    Opened,
    Record,
    core_state,
    dangling_refs,
    find_orphans,
    head_outcome,
    heads_by_slug,
    is_clock_poisoned,
    is_listing_truncated,
    listing,
    monotonic_created_at,
    open_candidates,
    reachable_from_core,
    select_head,
)

__all__ = [
    "CLOCK_POISON_MARGIN",
    "CORE_FETCH_TIMEOUT",
    "CORE_SLUG",
    "D_DOMAIN",
    "HEAD_QUERY_LIMIT",
    "KIND_ENGRAM",
    "LIST_QUERY_LIMIT",
    "MEM_PREFIX",
    "PLAINTEXT_MAX",
    "SEGMENT_MAX",
    "SLUG_MAX",
    "AllInvalid",
    "Body",
    "BodyTooLarge",
    "CoreBody",
    "CoreState",
    "Decrypt",
    "EmptyAnswer",
    "EngramError",
    "Failure",
    "Found",
    "HeadOutcome",
    "InvalidBody",
    "InvalidEnvelope",
    "InvalidKey",
    "InvalidSlug",
    "ListEntry",
    "MemoryBody",
    "Opened",
    "Record",
    "build_event",
    "conversation_key",
    "core_state",
    "d_tag",
    "dangling_refs",
    "decode_body",
    "encode_body",
    "extract_refs",
    "find_orphans",
    "head_outcome",
    "heads_by_slug",
    "is_clock_poisoned",
    "is_listing_truncated",
    "is_valid_slug",
    "listing",
    "monotonic_created_at",
    "normalize_slug",
    "open_candidates",
    "reachable_from_core",
    "select_head",
    "validate_and_decrypt",
    "validate_slug",
]
