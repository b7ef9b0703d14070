"""rust-nostr's (nostr-sdk) own NIP-17 encoding, for tests/interop/test_private_dms.py; run in a
process of its own (the bindings bring their own runtime).

    python nostr_sdk_nip17.py wrap <secret-hex> <recipient-hex> <text>
        prints the gift wrap `nip17_make_private_msg` makes, as one JSON line
    python nostr_sdk_nip17.py unwrap <secret-hex>
        reads wrap JSON lines on stdin, opens each with `UnwrappedGift.from_gift_wrap`, prints
        {"messages": [{"id", "pubkey", "content", "tags", "sender"}], "unreadable": n}
"""

from __future__ import annotations

import asyncio
import json
import sys

import nostr_sdk as n


async def main() -> None:
    mode, secret = sys.argv[1], sys.argv[2]
    keys = n.Keys.parse(secret)
    if mode == "wrap":
        recipient, text = n.PublicKey.parse(sys.argv[3]), sys.argv[4]
        wrap = await n.nip17_make_private_msg_async(keys, recipient, text)
        print(wrap.as_json())
        return
    messages, unreadable = [], 0
    for line in sys.stdin.read().splitlines():
        if not line.strip():
            continue
        try:
            gift = await n.UnwrappedGift.from_gift_wrap_async(keys, n.Event.from_json(line))
        except Exception:
            unreadable += 1
            continue
        rumor = gift.rumor()
        messages.append(
            {
                "id": rumor.id().to_hex() if rumor.id() else None,
                "pubkey": rumor.author().to_hex(),
                "content": rumor.content(),
                "tags": [t.to_vec() for t in rumor.tags()],
                "sender": gift.sender().to_hex(),
            }
        )
    print(json.dumps({"messages": messages, "unreadable": unreadable}))


asyncio.run(main())
