#!/usr/bin/env python3
"""What end-to-end encryption costs a client (issue 25, private DMs; docs/decisions.md 280).

Pure CPU, no relay: `buzz.core.nip59` sending one private DM (a rumor sealed and gift-wrapped
to the recipient and to the sender: two seals, two one-time keys, four NIP-44 encryptions, four
signatures) and opening one wrap (two NIP-44 decryptions, two signature checks, the rumor id),
for a short and a 4 KiB text. Yardstick, same run: signing and verifying one plain kind 14
event of the same text (what a channel DM costs its client). Every opened wrap is checked
against the text sent: a wrong answer fails the run.

Run: .venv/bin/python bench/private_dms.py [-n 2000] [--json OUT.json]
"""

from __future__ import annotations

import argparse
import json
import os
import time

from buzz.core import nip59
from buzz.core.event import Event, verify_event
from buzz.core.keys import generate_secret_key, public_key

TEXTS = {"short (40 B)": "the door code is 4711, see you at eight.", "4 KiB": "x" * 4096}


def per_op_us(fn, n: int) -> float:
    start = time.perf_counter()
    for _ in range(n):
        fn()
    return (time.perf_counter() - start) / n * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-n", type=int, default=2000, help="operations per figure")
    parser.add_argument("--json", help="write the figures here")
    args = parser.parse_args()
    alice, bob = generate_secret_key(), generate_secret_key()
    b = public_key(bob)
    out: dict[str, object] = {"load_avg_start": os.getloadavg(), "n": args.n, "rows": {}}
    print(f"private DMs (NIP-17) — {args.n} ops per figure, load avg {os.getloadavg()}")
    for name, text in TEXTS.items():
        rumor = nip59.make_rumor(alice, [b], text)
        wrap = nip59.wrap_message(alice, rumor, [b])[0]
        assert nip59.unwrap(bob, wrap).rumor.content == text
        plain = Event.create(alice, 14, text, [["p", b]])
        send = per_op_us(lambda r=rumor: nip59.wrap_message(alice, r, [b, public_key(alice)]), args.n)
        read = per_op_us(lambda w=wrap: nip59.unwrap(bob, w), args.n)
        sign = per_op_us(lambda t=text: Event.create(alice, 14, t, [["p", b]]), args.n)
        verify = per_op_us(lambda e=plain: verify_event(e), args.n)
        size = len(wrap.to_json())
        row = {
            "send_us": send,
            "open_us": read,
            "sign_plain_us": sign,
            "verify_plain_us": verify,
            "wrap_bytes": size,
        }
        out["rows"][name] = row  # type: ignore[index]
        print(
            f"  {name:12} send {send:7.0f} µs ({send / sign:4.1f}× signing a plain event)  "
            f"open {read:6.0f} µs ({read / verify:4.1f}× verifying one)  wrap {size} B for {len(text)} B"
        )
    out["load_avg_end"] = os.getloadavg()
    print(f"  load avg at end {os.getloadavg()}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
