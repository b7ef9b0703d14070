"""The NIP-11 relay information document (relay.md §14).

Every `limitation` value is read from the constant or configuration the enforcing code uses:
`created_at_upper_limit` / `created_at_lower_limit` are the clock window in seconds around the
relay's time (relay.md §8 item 7; kind 1059's wider past side is in docs/kinds.md).
"""

from __future__ import annotations

from typing import Any

from buzz import __version__
from buzz.core import limits
from buzz.relay.config import RelayConfig

SOFTWARE_URL = "https://github.com/buzz-workspace/buzz-py"
BASE_NIPS = (1, 2, 9, 11, 17, 18, 22, 25, 29, 34, 42, 45, 50, 59)
HTTP_BRIDGE_NIP = 98
CORS_HEADERS = {
    "Access-Control-Allow-Origin": "*",
    "Access-Control-Allow-Headers": "*",
    "Access-Control-Allow-Methods": "GET, OPTIONS",
}


def document(config: RelayConfig, relay_pubkey: str) -> dict[str, Any]:
    nips = sorted({*BASE_NIPS, *((HTTP_BRIDGE_NIP,) if config.http_bridge else ())})
    limitation: dict[str, Any] = {
        "max_message_length": config.max_frame_bytes,
        "max_subscriptions": limits.MAX_SUBSCRIPTIONS,
        "max_filters": limits.MAX_FILTERS,
        "max_limit": limits.MAX_LIMIT,
        "default_limit": limits.DEFAULT_LIMIT,
        "max_subid_length": limits.MAX_SUBID_LENGTH,
        "max_content_length": limits.MAX_CONTENT_BYTES,
        "min_pow_difficulty": 0,
        "auth_required": True,
        "payment_required": False,
        "restricted_writes": True,
        "created_at_upper_limit": limits.MAX_CLOCK_DRIFT_S,
        "max_not_before_delta": limits.MAX_NOT_BEFORE_DELTA_S,
    }
    if config.max_past_drift_s:  # 0 disables the past side: nothing to advertise
        limitation["created_at_lower_limit"] = config.max_past_drift_s
    doc: dict[str, Any] = {
        "name": config.relay_name,
        "description": config.relay_description,
        "pubkey": config.owner_pubkey,
        "self": relay_pubkey,
        "contact": config.relay_contact,
        "supported_nips": nips,
        "supported_extensions": [],
        "software": SOFTWARE_URL,
        "version": __version__,
        "limitation": limitation,
    }
    # Issue 25 item 8: an unset field is left out, never `null` (a client read `pubkey: null`
    # and asked for `authors: [null]`).
    return {k: v for k, v in doc.items() if v is not None}
