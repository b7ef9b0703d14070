"""Bytes on sockets: the WebSocket layers (aiohttp's and the lean one), the send queue,
the ping wheel and the HTTP guard (timeouts, the open-file budget, connection caps)."""
