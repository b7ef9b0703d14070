"""A TLS-terminating reverse proxy on loopback, as an operator puts in front of a relay whose
RELAY_URL is wss://: HTTPS requests and WebSocket upgrades are forwarded to the relay's plain
address. Its certificate is self-signed for `localhost` and 127.0.0.1; a child process trusts
it through SSL_CERT_FILE (OpenSSL's default verify paths, which aiohttp's context loads)."""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import ipaddress
import ssl
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import aiohttp
from aiohttp import web
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

FORWARDED_HEADERS = ("Authorization", "Content-Type", "X-Auth-Tag", "Accept")


def self_signed(folder: Path) -> tuple[Path, Path]:
    """A certificate for `localhost` / 127.0.0.1 and its key, as PEM files in `folder`."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName(
                [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
            ),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = folder / "proxy-cert.pem", folder / "proxy-key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    return cert_path, key_path


@dataclass
class TlsProxy:
    port: int
    cert: Path
    upstream: str = ""  # http://127.0.0.1:<relay port>, set once the relay runs

    @property
    def url(self) -> str:
        return f"wss://localhost:{self.port}"


async def _pump(source: aiohttp.ClientWebSocketResponse | web.WebSocketResponse, sink: object) -> None:
    async for msg in source:
        if msg.type == aiohttp.WSMsgType.TEXT:
            await sink.send_str(msg.data)  # type: ignore[attr-defined]
        elif msg.type == aiohttp.WSMsgType.BINARY:
            await sink.send_bytes(msg.data)  # type: ignore[attr-defined]
    await sink.close()  # type: ignore[attr-defined]


@contextlib.asynccontextmanager
async def tls_proxy(folder: Path) -> AsyncIterator[TlsProxy]:
    """A proxy on https://localhost:<free port>; set `.upstream` before sending through it."""
    cert, key = self_signed(folder)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)
    proxy = TlsProxy(0, cert)

    async with aiohttp.ClientSession() as session:

        async def forward(request: web.Request) -> web.StreamResponse:
            target = proxy.upstream + request.path_qs
            if request.headers.get("Upgrade", "").lower() == "websocket":
                downstream = web.WebSocketResponse()
                await downstream.prepare(request)
                async with session.ws_connect(target.replace("http://", "ws://", 1)) as upstream:
                    await asyncio.gather(_pump(upstream, downstream), _pump(downstream, upstream))
                return downstream
            headers = {h: request.headers[h] for h in FORWARDED_HEADERS if h in request.headers}
            async with session.request(
                request.method, target, headers=headers, data=await request.read()
            ) as answer:
                body = await answer.read()
                kind = answer.headers.get("Content-Type", "application/octet-stream")
                return web.Response(status=answer.status, body=body, headers={"Content-Type": kind})

        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", forward)
        runner = web.AppRunner(app)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=context)
        await site.start()
        server = site._server
        assert server is not None
        proxy.port = server.sockets[0].getsockname()[1]  # type: ignore[attr-defined]
        try:
            yield proxy
        finally:
            await runner.cleanup()
