"""The client layer: relay transports (`RelayClient` over WebSocket, `BridgeClient` over HTTP)
and the workspace API over them (`buzz.client.workspace.Workspace`, errors in
`buzz.client.errors`, values in `buzz.client.models`)."""

from buzz.client.relay_client import ConnectionLost, PublishResult, RelayClient, RelayError, Subscription

__all__ = ["ConnectionLost", "PublishResult", "RelayClient", "RelayError", "Subscription"]
