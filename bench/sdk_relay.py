#!/usr/bin/env python3
"""nostr-sdk's in-process Rust relay (`LocalRelay`) as a bench peer: one child process.

Usage: sdk_relay.py PORT DATA_DIR — serves ws://127.0.0.1:PORT with LMDB storage in DATA_DIR
(`NostrLmdb`; `--memory` keeps events in memory instead), prints `listening on <url>` once
it accepts connections, and runs until SIGTERM/SIGINT. No AUTH, no rate limits beyond the
rate limit lifted. Ends with `os._exit`: the uniffi runtime can crash on interpreter teardown.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal


async def serve(port: int, data_dir: str, memory: bool) -> None:
    import nostr_sdk as ns

    ns.uniffi_set_event_loop(asyncio.get_running_loop())
    # Its default rate limit refuses the bench's REQ polling and bursts; lift it (a yardstick
    # for speed, as nostr-relay's is run without its throttles).
    limit = ns.RateLimit(max_reqs=10_000, notes_per_minute=100_000_000)
    builder = ns.LocalRelayBuilder().addr("127.0.0.1").port(port).rate_limit(limit)
    if not memory:
        builder = builder.database(await ns.NostrLmdb.open(data_dir))
    relay = builder.build()
    await relay.run()
    print(f"listening on {await relay.url()}", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    relay.shutdown()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("port", type=int)
    ap.add_argument("data_dir")
    ap.add_argument("--memory", action="store_true", help="in-memory database instead of LMDB")
    args = ap.parse_args()
    code = 0
    try:
        asyncio.run(serve(args.port, args.data_dir, args.memory))
    except Exception as exc:
        print(f"sdk relay failed: {exc!r}", flush=True)
        code = 1
    os._exit(code)


if __name__ == "__main__":
    main()
