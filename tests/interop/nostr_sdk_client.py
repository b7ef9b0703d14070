"""A nostr-sdk (rust-nostr Python bindings) client run against our relay in its own process.

Usage: python nostr_sdk_client.py <ws-url>. Prints one JSON object with what it saw and
ends with os._exit, since the sdk's runtime can crash on interpreter teardown.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import traceback
from datetime import timedelta

import nostr_sdk as n


async def connect(url: str, keys: n.Keys) -> n.Client:
    client = n.ClientBuilder().authenticator(n.SignerAuthenticator(keys)).build()
    await client.add_relay(n.RelayUrl.parse(url))
    await client.connect(and_wait=timedelta(seconds=5))
    return client


async def main(url: str) -> dict:
    n.uniffi_set_event_loop(asyncio.get_running_loop())
    keys = n.Keys.generate()
    me = keys.public_key()
    out: dict = {"pubkey": me.to_hex(), "errors": []}
    client = (
        n.ClientBuilder()
        .signer(n.NostrSigner.keys(keys))
        .authenticator(n.SignerAuthenticator(n.NostrSigner.keys(keys)))
        .build()
        if hasattr(n.ClientBuilder, "signer")
        else n.ClientBuilder().authenticator(n.SignerAuthenticator(keys)).build()
    )
    await client.add_relay(n.RelayUrl.parse(url))
    await client.connect(and_wait=timedelta(seconds=5))

    stored = (
        n.EventBuilder(n.Kind(1), "from nostr-sdk: stored").tags([n.Tag.parse(["t", "sdk"])]).finalize(keys)
    )
    sent = await client.send_event(stored)
    out["publish_success"] = [str(u) for u in sent.success]
    out["publish_failed"] = {str(k): v for k, v in sent.failed.items()}
    out["stored_id"] = stored.id().to_hex()

    flt = n.Filter().kind(n.Kind(1)).author(me).hashtag("sdk")
    fetched = await client.fetch_events(n.ReqTarget.auto([flt]), timedelta(seconds=5))
    out["fetched"] = (
        [e.id().to_hex() for e in fetched.to_vec()]
        if hasattr(fetched, "to_vec")
        else [e.id().to_hex() for e in fetched]
    )

    # The live event comes from a second sdk client: a client does not notify its own sends.
    stream = client.notifications()
    await client.subscribe(n.ReqTarget.auto([n.Filter().kind(n.Kind(1)).hashtag("sdk")]))
    other_keys = n.Keys.generate()
    other = await connect(url, other_keys)
    live = (
        n.EventBuilder(n.Kind(1), "from nostr-sdk: live")
        .tags([n.Tag.parse(["t", "sdk"])])
        .finalize(other_keys)
    )
    await asyncio.sleep(0.3)
    live_sent = await other.send_event(live)
    out["live_publish_failed"] = {str(k): v for k, v in live_sent.failed.items()}
    out["live_id"] = live.id().to_hex()
    seen: list[str] = []

    async def wait_live() -> None:
        while True:
            note = await stream.next()
            if note is None:
                return
            if note.is_new_event():
                seen.append(note.event.id().to_hex())
                if seen[-1] == out["live_id"]:
                    return

    await asyncio.wait_for(wait_live(), 10)
    out["live_seen"] = seen
    return out


if __name__ == "__main__":
    try:
        result = asyncio.run(main(sys.argv[1]))
    except Exception:
        result = {"errors": [traceback.format_exc()]}
    print(json.dumps(result), flush=True)
    os._exit(0)
