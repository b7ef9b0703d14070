"""The client layer: relay transports (`RelayClient` over WebSocket, `BridgeClient` over HTTP)
and the workspace API over them (`buzz.client.workspace.Workspace`, errors in
`buzz.client.errors`, values in `buzz.client.models`).

`from buzz.client import RelayClient` loads the transport (aiohttp) on first use only, so
importing a light module of the package (`buzz.client.errors`) does not.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from buzz.client.relay_client import ConnectionLost, PublishResult, RelayClient, RelayError, Subscription

__all__ = ["ConnectionLost", "PublishResult", "RelayClient", "RelayError", "Subscription"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from buzz.client import relay_client

        return getattr(relay_client, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
