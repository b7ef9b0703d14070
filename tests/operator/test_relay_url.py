"""The banner's connect line works with RELAY_URL set, and a client that dials an address the
relay does not sign for is told which URL it expects (issue 24 item 6): a real `buzz relay
serve`, a real TLS proxy in front of it, the real `buzz` executable."""

from __future__ import annotations

from pathlib import Path

from tests.cli.helpers import buzz
from tests.operator.support import served
from tests.support.relay import Identity
from tests.support.tls_proxy import tls_proxy


def _connect_url(banner: list[str]) -> str:
    (line,) = [line for line in banner if line.startswith("  connect:")]
    return line.split("buzz --relay ", 1)[1].split(" ", 1)[0]


async def test_behind_a_tls_proxy_the_banner_names_relay_url_and_it_works(tmp_path: Path) -> None:
    alice = Identity.new()
    async with tls_proxy(tmp_path) as proxy, served(tmp_path / "data", env={"RELAY_URL": proxy.url}) as relay:
        proxy.upstream = relay.http_url
        connect = _connect_url(relay.banner)
        assert connect == proxy.url
        assert relay.banner[10] == (
            f"  RELAY_URL:    {proxy.url}: AUTH and NIP-98 name its scheme (wss://, https://), so clients "
            f"connect through your TLS proxy; one that dials {relay.url} directly fails AUTH"
        )
        trust = {"SSL_CERT_FILE": str(proxy.cert)}
        # the connect line, as printed: the HTTP bridge (NIP-98) and the WebSocket (NIP-42)
        created = await buzz(connect, alice, "channels", "create", "--name", "proxied", env=trust)
        channel = created.json["channel_id"]
        sent = await buzz(
            connect, alice, "messages", "send", "--channel", channel, "--content", "hi", env=trust
        )
        assert sent.json["channel_id"] == channel
        assert (await buzz(connect, alice, "users", "set-presence", "online", env=trust)).json[
            "status"
        ] == "online"

        # the bound address itself: refused, and the error says which URL the relay expects
        direct = await buzz(relay.url, alice, "channels", "list", env=trust)
        assert direct.code == 3
        error = direct.error
        assert error["relay_message"] == "NIP-98: u tag does not match the request URL"
        assert f"https://127.0.0.1:{relay.port}/query" in error["message"]
        assert f"connect with --relay {proxy.url}" in error["message"]
        await relay.stop()


async def test_a_ws_relay_url_keeps_the_bound_address_which_works(tmp_path: Path) -> None:
    """RELAY_URL with the ws:// scheme (another host name): the bound address authenticates
    (the Host the client dialled is accepted), so the banner names it."""
    alice = Identity.new()
    async with served(tmp_path / "data", env={"RELAY_URL": "ws://buzz.example.test:4000"}) as relay:
        connect = _connect_url(relay.banner)
        assert connect == relay.url
        assert (await buzz(connect, alice, "channels", "list")).json == {"channels": []}
        assert (await buzz(connect, alice, "users", "set-presence", "away")).json["status"] == "away"
        await relay.stop()
