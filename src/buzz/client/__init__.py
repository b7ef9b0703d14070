"""Async relay client."""

from buzz.client.relay_client import ConnectionLost, PublishResult, RelayClient, RelayError, Subscription

__all__ = ["ConnectionLost", "PublishResult", "RelayClient", "RelayError", "Subscription"]
