"""NIP-17 private direct messages in NIP-59 gift wraps, pure (no I/O).

    rumor  kind 14, unsigned: the message (sender's pubkey, real `created_at`, `p` recipients)
    seal   kind 13, signed by the sender: NIP-44 v2 of the rumor to one recipient, no tags
    wrap   kind 1059, signed by a one-time key: NIP-44 v2 of the seal, `["p", recipient]`

The relay sees only wraps: a random author, a time up to two days in the past (NIP-59: so a
wrap's time says nothing of when the message was written) and the recipient. `wrap_message`
makes one wrap per receiver — the recipient, and a copy to the sender so the sender's other
devices show what was sent (NIP-17). `unwrap` opens a wrap with the receiver's key and checks
every layer: the wrap's and the seal's signatures, the kinds, the rumor's id, and that the
rumor's author is the seal's signer (NIP-17: otherwise anyone could seal a rumor in another
person's name).

    UnwrapError (ValueError)   any wrap that does not open into a valid kind 14; `.reason`

`Rumor` is an `Event` with an empty `sig` (a rumor is never signed: a leaked rumor cannot be
proven to be its author's).
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import orjson

from buzz.core import nip44
from buzz.core.errors import InvalidId, InvalidSignature, MalformedEvent
from buzz.core.event import Event, compute_id, parse_tags, verify_event
from buzz.core.keys import generate_secret_key, is_curve_pubkey, is_hex, public_key
from buzz.core.kinds import GIFT_WRAP_KIND

SEAL_KIND = 13
CHAT_KIND = 14  # NIP-17 chat message (the rumor)
INBOX_RELAYS_KIND = 10050  # NIP-17: the relays a person receives private DMs on
RANDOM_PAST_S = 2 * 86_400  # NIP-59: wrap and seal times are up to two days in the past
# The rumor JSON is encrypted into the seal, the seal JSON (with the rumor's base64 inside)
# into the wrap: both must fit NIP-44's 65535 bytes. 30000 bytes of content always do.
MAX_CONTENT_BYTES = 30_000

Rumor = Event


class UnwrapError(ValueError):
    """A wrap that is not a valid NIP-17 message for this key; `reason` says which layer."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True, slots=True)
class Opened:
    """An unwrapped message: the rumor, and the wrap that carried it."""

    rumor: Rumor
    wrap: Event

    @property
    def sender(self) -> str:
        return self.rumor.pubkey


def random_past(now: int, rand: bytes | None = None) -> int:
    """`now` minus a uniformly random 0 … `RANDOM_PAST_S` seconds (NIP-59)."""
    r = int.from_bytes(rand if rand is not None else os.urandom(4), "big") / 2**32
    return now - int(r * RANDOM_PAST_S)


def make_rumor(
    sender_secret: str,
    recipients: Sequence[str],
    content: str,
    extra_tags: Iterable[Sequence[str]] = (),
    created_at: int | None = None,
) -> Rumor:
    """The kind 14 rumor from the sender to `recipients` (64-hex keys): `["p", …]` each, then
    `extra_tags` (e.g. `["e", <rumor id>]` of the message answered). Raises ValueError for a
    recipient that is not a secp256k1 key, no recipient, or content over MAX_CONTENT_BYTES."""
    if not recipients:
        raise ValueError("a private message needs at least one recipient")
    for pk in recipients:
        if not is_curve_pubkey(pk):
            raise ValueError(f"recipient {pk!r} is not a secp256k1 public key (64 hex)")
    size = len(content.encode("utf-8", "surrogatepass"))
    if not 1 <= size <= MAX_CONTENT_BYTES:
        raise ValueError(f"a private message holds 1-{MAX_CONTENT_BYTES} bytes, got {size}")
    sender = public_key(sender_secret)
    ts = int(time.time()) if created_at is None else created_at
    tags = (*(("p", pk) for pk in dict.fromkeys(recipients)), *(tuple(t) for t in extra_tags))
    return Event(compute_id(sender, ts, CHAT_KIND, tags, content), sender, ts, CHAT_KIND, tags, content, "")


def rumor_dict(rumor: Rumor) -> dict[str, object]:
    """The rumor as NIP-59 carries it: the event without `sig`."""
    out = rumor.to_dict()
    del out["sig"]
    return out


def seal(sender_secret: str, rumor: Rumor, receiver: str, now: int | None = None) -> Event:
    """Kind 13: the rumor encrypted from the sender to `receiver`, signed, time randomised."""
    now = int(time.time()) if now is None else now
    key = nip44.get_conversation_key(sender_secret, receiver)
    content = nip44.encrypt(orjson.dumps(rumor_dict(rumor)).decode(), key)
    return Event.create(sender_secret, SEAL_KIND, content, (), random_past(now))


def gift_wrap(sealed: Event, receiver: str, now: int | None = None) -> Event:
    """Kind 1059: the seal encrypted with a fresh one-time key to `receiver`, `["p", receiver]`."""
    now = int(time.time()) if now is None else now
    one_time = generate_secret_key()
    key = nip44.get_conversation_key(one_time, receiver)
    content = nip44.encrypt(sealed.to_json(), key)
    return Event.create(one_time, GIFT_WRAP_KIND, content, [["p", receiver]], random_past(now))


def wrap_message(sender_secret: str, rumor: Rumor, receivers: Iterable[str]) -> list[Event]:
    """One wrap per receiver (each with its own seal and one-time key), in order."""
    return [gift_wrap(seal(sender_secret, rumor, r), r) for r in dict.fromkeys(receivers)]


def _parse_json(text: str, what: str) -> dict[str, object]:
    try:
        obj = orjson.loads(text)
    except orjson.JSONDecodeError:
        raise UnwrapError(f"{what} is not JSON") from None
    if not isinstance(obj, dict):
        raise UnwrapError(f"{what} is not a JSON object")
    return obj


def parse_rumor(obj: dict[str, object]) -> Rumor:
    """A rumor from its JSON object: the NIP-01 fields but `sig`, its id recomputed and checked."""
    pubkey, created_at = obj.get("pubkey"), obj.get("created_at")
    kind, content = obj.get("kind"), obj.get("content")
    if not is_hex(pubkey, 64):
        raise UnwrapError("rumor pubkey must be 64 lowercase hex characters")
    if type(created_at) is not int or created_at < 0:
        raise UnwrapError("rumor created_at must be a non-negative integer")
    if type(kind) is not int or not isinstance(content, str):
        raise UnwrapError("rumor kind must be an integer and content a string")
    try:
        tags = parse_tags(obj.get("tags"))
    except MalformedEvent as exc:
        raise UnwrapError(f"rumor {exc.reason}") from None
    eid = compute_id(pubkey, created_at, kind, tags, content)
    if obj.get("id", eid) != eid:
        raise UnwrapError("rumor id does not match its content")
    return Event(eid, pubkey, created_at, kind, tags, content, "")


def unwrap(receiver_secret: str, wrap: Event) -> Opened:
    """Open `wrap` with the receiver's key into a kind 14 rumor. Raises UnwrapError naming the
    layer that fails: not a 1059, a bad signature, a payload that does not decrypt (not for this
    key), a seal that is not a signed kind 13, a rumor that is not kind 14 or whose author is
    not the seal's signer."""
    if wrap.kind != GIFT_WRAP_KIND:
        raise UnwrapError(f"kind {wrap.kind} is not a gift wrap (1059)")
    try:
        verify_event(wrap)
        key = nip44.get_conversation_key(receiver_secret, wrap.pubkey)
        sealed = Event.from_json(_parse_json(nip44.decrypt(wrap.content, key), "seal"))
        verify_event(sealed)
    except nip44.Nip44Error as exc:
        raise UnwrapError(f"the wrap does not open with this key: {exc.reason}") from None
    except MalformedEvent as exc:
        raise UnwrapError(f"seal: {exc.reason}") from None
    except (InvalidId, InvalidSignature) as exc:  # of the wrap or the seal
        raise UnwrapError(f"bad signature or id: {exc.reason}") from None
    if sealed.kind != SEAL_KIND:
        raise UnwrapError(f"the wrap holds a kind {sealed.kind}, not a seal (13)")
    try:
        key = nip44.get_conversation_key(receiver_secret, sealed.pubkey)
        rumor = parse_rumor(_parse_json(nip44.decrypt(sealed.content, key), "rumor"))
    except nip44.Nip44Error as exc:
        raise UnwrapError(f"the seal does not open with this key: {exc.reason}") from None
    if rumor.pubkey != sealed.pubkey:
        raise UnwrapError("the rumor's author is not the seal's signer (impersonation)")
    if rumor.kind != CHAT_KIND:
        raise UnwrapError(f"the rumor is a kind {rumor.kind}, not a chat message (14)")
    return Opened(rumor, wrap)


def conversation_of(rumor: Rumor, me: str) -> tuple[str, ...]:
    """The other people of the rumor's conversation, sorted: its author and `p` keys but me
    (NIP-17: the set of pubkeys is the room). A note to myself has none."""
    people = {rumor.pubkey, *rumor.tag_values("p")}
    people.discard(me)
    return tuple(sorted(people))


def inbox_relays(event: Event) -> list[str]:
    """The relay URLs of a kind 10050 (`["relay", url]` tags), in order, without repeats."""
    return list(dict.fromkeys(u for u in event.tag_values("relay") if u))
