"""`call_webhook` (workflows.md §8.5): SSRF guard after DNS resolution, the connection pinned to
the checked address, no redirects, no proxy, 10 s per attempt, 1 MiB response cap, the
`Idempotency-Key` of the run and step on every attempt, and the optional retry.

The guard is data (`Allow`): an address passes when it is globally routable or listed by the
operator (`BUZZ_WORKFLOW_WEBHOOK_ALLOW`, CIDRs and host names); `http` only for listed
destinations. The host is resolved off the event loop on every attempt, and aiohttp is handed
a resolver that answers only the address that passed, so a second lookup cannot swap it.
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
import socket
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import aiohttp
from aiohttp.abc import AbstractResolver, ResolveResult

import buzz
from buzz.workflows import limits as L

Address = ipaddress.IPv4Address | ipaddress.IPv6Address
RETRY_STATUSES = frozenset({408, 429}) | frozenset(range(500, 600))


class WebhookFailed(Exception):
    """The step fails with `webhook_failed` and this message; `retryable` per §8.5 item 8."""

    def __init__(self, message: str, retryable: bool = False, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retryable = retryable
        self.retry_after = retry_after
        self.attempts = 1  # set by `call` to the attempts made


@dataclass(frozen=True)
class Allow:
    networks: tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...] = ()
    hosts: frozenset[str] = frozenset()

    @classmethod
    def parse(cls, text: str) -> Allow:
        """`BUZZ_WORKFLOW_WEBHOOK_ALLOW`: comma list of CIDRs (or addresses) and host names."""
        networks, hosts = [], set()
        for item in (i.strip() for i in text.split(",")):
            if not item:
                continue
            try:
                networks.append(ipaddress.ip_network(item, strict=False))
            except ValueError:
                hosts.add(item.lower().rstrip("."))
        return cls(tuple(networks), frozenset(hosts))

    def listed(self, host: str, address: Address) -> bool:
        return host in self.hosts or any(address in n for n in self.networks)


def _unmapped(address: Address) -> Address:
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


async def resolve_allowed(host: str, port: int, scheme: str, allow: Allow) -> str:
    """The first resolved address of `host`, when every one passes (§8.5 items 1, 4). Raises."""
    host = host.lower().rstrip(".")
    try:
        literal: Address | None = ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        literal = None
    if literal is not None:
        addresses = [_unmapped(literal)]
    else:
        loop = asyncio.get_running_loop()
        try:
            infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except OSError as exc:
            raise WebhookFailed(
                f"call_webhook transport failed: cannot resolve {host}: {exc}", True
            ) from None
        addresses = [_unmapped(ipaddress.ip_address(info[4][0].split("%")[0])) for info in infos]
    if not addresses:
        raise WebhookFailed(f"call_webhook transport failed: {host} has no address", True)
    for address in addresses:
        if not (address.is_global or allow.listed(host, address)):
            raise WebhookFailed("call_webhook destination is not allowed")
    if scheme == "http" and not all(allow.listed(host, a) for a in addresses):
        raise WebhookFailed("call_webhook URL is not allowed")
    return str(addresses[0])


class _Pinned(AbstractResolver):
    """Answers every lookup with the one address that passed the guard."""

    def __init__(self, address: str) -> None:
        self._address = address

    async def resolve(self, host: str, port: int = 0, family: int = socket.AF_INET) -> list[ResolveResult]:
        fam = socket.AF_INET6 if ":" in self._address else socket.AF_INET
        return [ResolveResult(hostname=host, host=self._address, port=port, family=fam, proto=0, flags=0)]

    async def close(self) -> None:
        return None


def _content_type(body: str) -> str:
    try:
        json.loads(body)
    except ValueError:
        return "text/plain; charset=utf-8"
    return "application/json"


async def attempt(
    method: str,
    url: str,
    headers: Sequence[Sequence[str]],
    body: str | None,
    extra: dict[str, str],
    allow: Allow,
) -> dict[str, Any]:
    """One attempt: the output on a 2xx, else raises WebhookFailed."""
    parts = urlsplit(url)
    scheme = (parts.scheme or "").lower()
    if scheme not in ("http", "https") or not parts.hostname or parts.username or parts.password:
        raise WebhookFailed("call_webhook URL is not allowed")
    if len(url.encode()) > L.WEBHOOK_URL_MAX_BYTES:
        raise WebhookFailed("call_webhook URL is not allowed")
    port = parts.port or (443 if scheme == "https" else 80)
    address = await resolve_allowed(parts.hostname, port, scheme, allow)
    sent = {name: value for name, value in headers}
    if body is not None and not any(n.lower() == "content-type" for n in sent):
        sent["Content-Type"] = _content_type(body)
    sent.update(extra)
    timeout = aiohttp.ClientTimeout(total=L.WEBHOOK_CALL_TIMEOUT_S)
    connector = aiohttp.TCPConnector(resolver=_Pinned(address), use_dns_cache=False, force_close=True)
    try:
        async with (
            aiohttp.ClientSession(connector=connector, timeout=timeout, trust_env=False) as session,
            session.request(
                method,
                url,
                headers=sent,
                data=body.encode() if body is not None else None,
                allow_redirects=False,
            ) as response,  # fmt: skip
        ):
            raw = await response.content.read(L.WEBHOOK_RESPONSE_MAX_BYTES + 1)
            if len(raw) > L.WEBHOOK_RESPONSE_MAX_BYTES:
                raise WebhookFailed("call_webhook response exceeds 1 MiB")
            status = response.status
            retry_after = response.headers.get("Retry-After")
    except WebhookFailed:
        raise
    except (TimeoutError, aiohttp.ClientError, OSError) as exc:
        reason = "timed out" if isinstance(exc, TimeoutError) else (str(exc) or type(exc).__name__)
        raise WebhookFailed(f"call_webhook transport failed: {reason}", True) from None
    if not 200 <= status < 300:
        after = float(retry_after) if retry_after and retry_after.isdigit() and status in (429, 503) else None
        raise WebhookFailed(f"call_webhook returned HTTP {status}", status in RETRY_STATUSES, after)
    text = raw.decode("utf-8", "replace")
    try:
        parsed = json.loads(text) if text else None
    except ValueError:
        parsed = None
    return {"status": status, "body": text, "json": parsed}


async def call(effect: dict[str, Any], workflow_id: str, run_id: str, allow: Allow) -> dict[str, Any]:
    """The step: attempts with the retry of §8.5 item 8. Raises WebhookFailed (final)."""
    extra = {"Idempotency-Key": effect["idempotency_key"], "User-Agent": f"buzz-workflows/{buzz.__version__}",
             "X-Buzz-Workflow-Id": workflow_id, "X-Buzz-Run-Id": run_id}  # fmt: skip
    retry = effect.get("retry") or {"max": 0, "backoff": L.WEBHOOK_BACKOFF_DEFAULT_S}
    attempts = 0
    while True:
        attempts += 1
        try:
            out = await attempt(
                effect["method"], effect["url"], effect["headers"], effect.get("body"), extra, allow
            )
            return {**out, "attempts": attempts}
        except WebhookFailed as exc:
            if not exc.retryable or attempts > retry["max"]:
                exc.attempts = attempts
                raise
            wait = retry["backoff"] * 2 ** (attempts - 1)
            if exc.retry_after is not None and exc.retry_after <= L.WEBHOOK_BACKOFF_MAX_S:
                wait = exc.retry_after
            await asyncio.sleep(min(wait, L.WEBHOOK_BACKOFF_MAX_S))
