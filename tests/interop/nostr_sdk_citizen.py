"""nostr-sdk (rust-nostr's Python bindings) against our relay, through every relay item of issue
25: NIP-17 wraps (the sdk's `nip17_make_private_msg`, and one dated 36 h back from its seal and
NIP-44), kinds 10050 / 10063 / 1111 / 6 / 16 / 30024 / the ephemeral range, two AUTHs on one
socket (the second sent as a ClientMessage on the sdk's relay), filters without `kinds`, `OK
false` for what is never served, reactions matched by `#h`, a deletion of several targets, CLOSE
without CLOSED, NIP-11 read into the sdk's `RelayInformationDocument`.

Usage: python nostr_sdk_citizen.py <ws-url>. Prints one JSON object {checks, errors} and ends
with os._exit (the sdk's runtime can crash on interpreter teardown).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
import traceback
import urllib.request
import uuid
from collections import defaultdict
from datetime import timedelta
from typing import Any

import nostr_sdk as n

TIMEOUT = timedelta(seconds=5)


class Observed:
    """What the relay sent one client, read from the sdk's notification stream (made before
    connecting, so the AUTH challenge is in it)."""

    def __init__(self, client: n.Client) -> None:
        self.stream = client.notifications()
        self.challenges: list[str] = []
        self.oks: dict[str, tuple[bool, str]] = {}
        self.closed: list[tuple[str, str]] = []
        self.eose: set[str] = set()
        self.live: dict[str, list[str]] = defaultdict(list)
        self.changed = asyncio.Event()
        self.task = asyncio.create_task(self._read())

    async def _read(self) -> None:
        while True:
            note = await self.stream.next()
            if note is None:
                return
            if note.is_new_event():
                self.live[note.subscription_id].append(note.event.id().to_hex())
            elif note.is_message():
                msg = note.message.as_enum()
                if msg.is_auth():
                    self.challenges.append(msg.challenge)
                elif msg.is_ok():
                    self.oks[msg.event_id.to_hex()] = (msg.status, msg.message)
                elif msg.is_closed():
                    self.closed.append((msg.subscription_id, msg.message))
                elif msg.is_end_of_stored_events():
                    self.eose.add(msg.subscription_id)
            self.changed.set()

    async def until(self, done: Any, what: str) -> Any:
        async def wait() -> Any:
            while not (value := done()):
                self.changed.clear()
                await self.changed.wait()
            return value

        try:
            return await asyncio.wait_for(wait(), 5)
        except TimeoutError:
            raise TimeoutError(f"no {what} in 5 s; live {dict(self.live)}, closed {self.closed}") from None


async def connect(url: str, keys: n.Keys) -> tuple[n.Client, Observed]:
    client = n.ClientBuilder().authenticator(n.SignerAuthenticator(keys)).build()
    seen = Observed(client)
    await client.add_relay(n.RelayUrl.parse(url))
    await client.connect(and_wait=TIMEOUT)
    await seen.until(lambda: seen.challenges, "challenge")
    # The sdk answers the challenge on its own; its AUTH's OK is the first OK of the connection.
    await seen.until(lambda: any(ok for ok, _ in seen.oks.values()), "AUTH accepted")
    return client, seen


def event(
    keys: n.Keys, kind: int, content: str, tags: list[list[str]], created_at: int | None = None
) -> n.Event:
    builder = n.EventBuilder(n.Kind(kind), content).tags([n.Tag.parse(t) for t in tags])
    if created_at is not None:
        builder = builder.custom_created_at(n.Timestamp.from_secs(created_at))
    return builder.finalize(keys)


async def send(client: n.Client, ev: n.Event) -> str | None:
    """None when the relay stored it, else its refusal."""
    out = await client.send_event(ev)
    return next(iter(out.failed.values()), None) if out.failed else None


async def fetch(client: n.Client, flt: n.Filter) -> list[str]:
    found = await client.fetch_events(n.ReqTarget.auto([flt]), TIMEOUT)
    events = found.to_vec() if hasattr(found, "to_vec") else found
    return sorted(e.id().to_hex() for e in events)


async def main(url: str, out: dict[str, Any]) -> None:
    n.uniffi_set_event_loop(asyncio.get_running_loop())

    def check(name: str, ok: bool, detail: Any = None) -> None:
        out["checks"].append(name)
        if not ok:
            out["errors"].append(f"{name}: {detail!r}")

    ka, kb = n.Keys.generate(), n.Keys.generate()
    pka, pkb = ka.public_key(), kb.public_key()
    a, seen_a = await connect(url, ka)
    b, seen_b = await connect(url, kb)
    now = int(time.time())

    # -- item 8: NIP-11 -------------------------------------------------------------------------
    http = url.replace("ws://", "http://", 1)
    request = urllib.request.Request(http, headers={"Accept": "application/nostr+json"})
    raw = await asyncio.to_thread(lambda: urllib.request.urlopen(request, timeout=5).read().decode())
    doc = n.RelayInformationDocument.from_json(raw)
    check("nip11 has no null field", None not in json.loads(raw).values(), raw)
    check("nip11 parsed by the sdk", doc.self_pubkey() is not None and 42 in (doc.supported_nips() or []))
    limitation = json.loads(raw)["limitation"]
    check("nip11 clock window", limitation.get("created_at_lower_limit") == 900, limitation)

    # -- item 7: kinds --------------------------------------------------------------------------
    note = event(ka, 1, "a note", [])
    inbox_b = event(kb, 10050, "", [["relay", url]], now)
    blossom = event(ka, 10063, "", [["server", "https://blossom.example"]])
    comment = event(
        ka, 1111, "a comment", [["E", note.id().to_hex()], ["K", "1"], ["e", note.id().to_hex()], ["k", "1"]]
    )
    repost = event(ka, 6, note.as_json(), [["e", note.id().to_hex()], ["p", pka.to_hex()]])
    generic = event(ka, 16, blossom.as_json(), [["e", blossom.id().to_hex()], ["k", "10063"]])
    draft = event(ka, 30024, "unfinished", [["d", "essay"]])
    answers = [await send(a, e) for e in (note, blossom, comment, repost, generic, draft)] + [
        await send(b, inbox_b)
    ]
    check("new kinds stored", answers == [None] * 7, answers)
    check(
        "10050 served", await fetch(a, n.Filter().kind(n.Kind(10050)).author(pkb)) == [inbox_b.id().to_hex()]
    )

    # -- item 3: filters without kinds ----------------------------------------------------------
    expected = sorted(e.id().to_hex() for e in (note, blossom, comment, repost, generic))
    check("authors-only filter", await fetch(b, n.Filter().author(pka)) == expected)
    check("the author sees its draft", draft.id().to_hex() in await fetch(a, n.Filter().author(pka)))
    by_k = await fetch(b, n.Filter().custom_tag(n.SingleLetterTag.from_byte(ord("k")), "10063"))
    check("#k without kinds", by_k == [generic.id().to_hex()], by_k)
    sub = await b.subscribe(n.ReqTarget.auto([n.Filter().author(pka).limit(0)]))
    sub_id = sub.id if isinstance(sub.id, str) else str(sub.id)
    await seen_b.until(lambda: sub_id in seen_b.eose, "EOSE")  # live from here on
    fresh = event(ka, 1, "live for limit 0", [])
    await send(a, fresh)
    live = await seen_b.until(lambda: fresh.id().to_hex() in seen_b.live[sub_id], "live event")
    check("authors + limit 0 gets EOSE then live", live)
    await b.unsubscribe(sub_id)  # the sdk reports an event once per client: later ones go below
    gated = await b.subscribe(n.ReqTarget.auto([n.Filter().kind(n.Kind(30024))]))
    gated_id = gated.id if isinstance(gated.id, str) else str(gated.id)
    reason = await seen_b.until(lambda: next((m for i, m in seen_b.closed if i == gated_id), None), "CLOSED")
    check(
        "only-gated kinds are CLOSED",
        reason == "restricted: author-only kinds require authors=[self]",
        reason,
    )

    # -- item 7: the ephemeral range --------------------------------------------------------------
    signals = await b.subscribe(n.ReqTarget.auto([n.Filter().kind(n.Kind(24133)).pubkey(pkb)]))
    signals_id = signals.id if isinstance(signals.id, str) else str(signals.id)
    await seen_b.until(lambda: signals_id in seen_b.eose, "EOSE")
    signal = event(ka, 24133, "encrypted request", [["p", pkb.to_hex()]])
    await send(a, signal)
    relayed = await seen_b.until(lambda: signal.id().to_hex() in seen_b.live[signals_id], "ephemeral")
    check("24133 relayed live", relayed and await fetch(b, n.Filter().id(signal.id())) == [])

    # -- item 2: two AUTHs on one socket ----------------------------------------------------------
    relay = await a.relay(n.RelayUrl.parse(url))
    second = event(kb, 22242, "", [["relay", url], ["challenge", seen_a.challenges[0]]])
    await relay.send_msg(n.ClientMessage.auth(second))
    ok = await seen_a.until(lambda: seen_a.oks.get(second.id().to_hex()), "second AUTH")
    check("second AUTH accepted", ok == (True, ""), ok)
    check("writes as the second key", await send(a, event(kb, 1, "B over A's socket", [])) is None)

    # -- item 1: NIP-17 wraps -------------------------------------------------------------------
    helper_wrap = await n.nip17_make_private_msg_async(ka, pkb, "from the sdk's nip17")
    check("the sdk's wrap stored", await send(a, helper_wrap) is None)
    rumor = n.EventBuilder(n.Kind(14), "dated 36 h back").tags([n.Tag.public_key(pkb)]).finalize_unsigned(pka)
    seal = await n.nip59_make_seal_async(ka, pkb, rumor)
    wrapper = n.Keys.generate()
    content = n.nip44_encrypt(wrapper.secret_key(), pkb, seal.as_json(), n.Nip44Version.V2)
    old_wrap = (
        n.EventBuilder(n.Kind(1059), content)
        .tags([n.Tag.public_key(pkb)])
        .custom_created_at(n.Timestamp.from_secs(now - 36 * 3600))
        .finalize(wrapper)
    )
    check("a wrap 36 h old stored", await send(a, old_wrap) is None)
    found = await b.fetch_events(n.ReqTarget.auto([n.Filter().kind(n.Kind(1059)).pubkey(pkb)]), TIMEOUT)
    wraps = found.to_vec() if hasattr(found, "to_vec") else found
    texts = sorted([(await n.UnwrappedGift.from_gift_wrap_async(kb, w)).rumor().content() for w in wraps])
    check("NIP-17 wraps read by the recipient", texts == ["dated 36 h back", "from the sdk's nip17"], texts)
    c, seen_c = await connect(url, n.Keys.generate())  # neither A nor B
    other = await c.subscribe(n.ReqTarget.auto([n.Filter().kind(n.Kind(1059)).pubkey(pkb)]))
    other_id = other.id if isinstance(other.id, str) else str(other.id)
    reason = await seen_c.until(lambda: next((m for i, m in seen_c.closed if i == other_id), None), "CLOSED")
    check(
        "wraps gated to their p",
        reason == "restricted: p-gated events require #p matching your pubkey",
        reason,
    )
    both = await fetch(a, n.Filter().kind(n.Kind(1059)).pubkeys([pka, pkb]))
    check("reads with the union of both keys", both == sorted(w.id().to_hex() for w in wraps), both)

    # -- item 4: OK false for what is never served --------------------------------------------------
    stale = await send(b, event(kb, 10050, "", [["relay", "wss://old.example"]], now - 10))
    check("superseded version refused", stale == "duplicate: have a newer version", stale)

    # -- items 5, 6: reactions by #h, a deletion of several targets ----------------------------------
    channel = str(uuid.uuid4())
    await send(a, event(ka, 9007, "", [["h", channel], ["name", "sdk"], ["visibility", "open"]]))
    said = event(ka, 9, "react to me", [["h", channel]])
    await send(a, said)
    target = [["e", said.id().to_hex()], ["p", pka.to_hex()]]
    bare = await send(b, event(kb, 7, "-", target))
    check(
        "reaction without h refused with the fix",
        bare == f'invalid: reactions of a channel event must carry its channel: add ["h","{channel}"]',
        bare,
    )
    reaction = event(kb, 7, "+", [*target, ["h", channel]])
    check("reaction with h stored", await send(b, reaction) is None)
    by_h = await fetch(
        b, n.Filter().kind(n.Kind(7)).custom_tag(n.SingleLetterTag.from_byte(ord("h")), channel)
    )
    check("reaction matched by #h", by_h == [reaction.id().to_hex()], by_h)
    gone = [event(ka, 1, "one", []), event(ka, 1, "two", [])]
    for e in gone:
        await send(a, e)
    deletion = event(ka, 5, "", [["e", e.id().to_hex()] for e in gone])
    check(
        "deletion of two targets",
        await send(a, deletion) is None and await fetch(b, n.Filter().ids([e.id() for e in gone])) == [],
    )
    again = await send(a, gone[0])
    check("a deleted event is refused", again == "blocked: deleted", again)

    # -- item 8: CLOSE without CLOSED -------------------------------------------------------------
    closing = await a.subscribe(n.ReqTarget.auto([n.Filter().kind(n.Kind(1)).author(pka)]))
    closing_id = closing.id if isinstance(closing.id, str) else str(closing.id)
    await a.unsubscribe(closing_id)
    await fetch(a, n.Filter().kind(n.Kind(0)).author(pka))  # a round trip after the CLOSE
    check("no CLOSED after CLOSE", [c for c in seen_a.closed if c[0] == closing_id] == [], seen_a.closed)


if __name__ == "__main__":
    result: dict[str, Any] = {"checks": [], "errors": []}
    try:
        asyncio.run(main(sys.argv[1], result))
    except Exception:
        result["errors"].append(traceback.format_exc())  # the checks run so far stay
    print(json.dumps(result), flush=True)
    os._exit(0)
