"""The pure media core: 24242 checks (media.md §3.2), Range (§7.3), imeta (§9), settings (§16),
upload slots (§11 item 4)."""

from __future__ import annotations

import functools
import time

import pytest

from buzz.core.blossom import auth_event, decode_token, encode_token, parse_blob_url
from buzz.core.event import Event
from buzz.core.imeta import imeta_tag, parse_imeta, valid_name
from buzz.media.auth import AuthFailure, check_claims, normalize_host, parse_authorization, token_of
from buzz.media.imeta import ImetaError, LocalRef, check_fields, local_imeta, profile_refs
from buzz.media.limits import MediaClass, settings_from_env
from buzz.media.ranges import Unsatisfiable, span
from buzz.media.rates import UploadSlots
from buzz.store.base import BlobRow
from tests.support.relay import Identity

H = "ab" * 32
HOSTS = frozenset({"127.0.0.1:3000"})
BASE = "http://127.0.0.1:3000/media"


def claims(event: Event, verb: str = "upload", sha: str | None = H, now: int | None = None) -> str | None:
    try:
        check_claims(event, verb, int(time.time()) if now is None else now, HOSTS, sha)
    except AuthFailure as exc:
        return exc.reason
    return None


def test_token_round_trip_in_both_alphabets() -> None:
    who = Identity.new()
    event = auth_event(who.secret, "upload", expiration=int(time.time()) + 60, hashes=[H])
    token = encode_token(event)
    assert parse_authorization(token) == event
    standard = token.replace("-", "+").replace("_", "/")
    assert parse_authorization(standard + "=" * (-len(standard) % 4)) == event
    with pytest.raises(ValueError):
        decode_token("A" * 30_000)  # over 16 KiB decoded


def test_transport_failures() -> None:
    with pytest.raises(AuthFailure, match="missing authorization"):
        token_of(None)
    with pytest.raises(AuthFailure, match="malformed authorization"):
        token_of("Bearer abc")
    with pytest.raises(AuthFailure, match="malformed authorization"):
        parse_authorization("not base64!")
    who = Identity.new()
    other = Event.create(who.secret, 27235, "x", [["t", "upload"]])
    with pytest.raises(AuthFailure, match="wrong authorization kind"):
        parse_authorization(encode_token(other))


def test_every_claim_check_in_order() -> None:
    """Checklist 3, 4, 5: each bad authorization gets its own reason."""
    who = Identity.new()
    now = int(time.time())
    check = functools.partial(claims, now=now)  # one clock for the events and the checks

    def make(tags: list[list[str]], content: str = "Upload", created_at: int = now) -> Event:
        return Event.create(who.secret, 24242, content, tags, created_at)

    good = [["t", "upload"], ["x", H], ["expiration", str(now + 60)]]
    assert check(make(good)) is None
    assert check(make(good, content="  ")) == "authorization content must not be empty"
    assert check(make([["t", "get"], *good[1:]])) == "authorization verb mismatch"
    assert check(make([["t", "upload"], ["t", "get"], *good[1:]])) == "authorization verb mismatch"
    assert check(make(good[:2])) == "missing expiration"
    assert check(make([*good[:2], ["expiration", "soon"]])) == "missing expiration"
    assert check(make([*good[:2], ["expiration", str(now - 1)]])) == "authorization expired"
    assert check(make(good, created_at=now - 601)) == "authorization timestamp out of window"
    assert check(make(good, created_at=now + 6)) == "authorization timestamp out of window"
    assert check(make([*good, ["server", "other.example"]])) == "authorization server mismatch"
    assert check(make([*good, ["server", "http://LOCALHOST:3000/upload"]])) is None
    assert check(make(good), sha="cd" * 32) == "authorization does not cover this blob"
    # get: 3600 s window; a host-wide token (server tag, no x) reads any blob
    get = [["t", "get"], ["expiration", str(now + 60)], ["server", "127.0.0.1:3000"]]
    assert check(make(get, created_at=now - 3599), "get") is None
    assert check(make(get, created_at=now - 3601), "get") == "authorization timestamp out of window"
    assert check(make(get[:2], created_at=now), "get") == "authorization does not cover this blob"


def test_host_normalization() -> None:
    assert normalize_host("https://Example.COM:443/media") == "example.com"
    assert normalize_host("localhost:3000") == "127.0.0.1:3000"
    assert normalize_host("[::1]:80") == "127.0.0.1"


def test_ranges() -> None:
    """Checklist 21 (pure part): one range 206, open ranges cut at 16 MiB, 416, several = whole."""
    assert span("bytes=0-99", 1000).content_range == "bytes 0-99/1000"
    assert span("bytes=-10", 1000).start == 990
    assert span("bytes=990-", 1000).length == 10
    big = span("bytes=0-", 40 << 20)
    assert (big.partial, big.length, big.content_range) == (
        True,
        16 << 20,
        f"bytes 0-{(16 << 20) - 1}/{40 << 20}",
    )
    with pytest.raises(Unsatisfiable):
        span("bytes=1000-", 1000)
    assert not span("bytes=0-1,5-6", 1000).partial
    assert not span("items=0-1", 1000).partial


def test_blob_urls_and_imeta_format() -> None:
    name = parse_blob_url(f"{BASE}/{H}.png?x=1")
    assert name is not None and (name.sha256, name.ext, name.thumb) == (H, "png", False)
    thumb = parse_blob_url(f"{BASE}/{H}.thumb.jpg")
    assert thumb is not None and thumb.thumb
    assert parse_blob_url(f"{BASE}/{H[:-1]}") is None
    tag = imeta_tag(
        {"url": f"{BASE}/{H}.png", "m": "image/png", "x": H, "size": 3, "dim": None, "name": "a b.png"}
    )
    assert tag == ["imeta", f"url {BASE}/{H}.png", "m image/png", f"x {H}", "size 3", "name a b.png"]
    assert parse_imeta(tag)["name"] == "a b.png"
    assert (
        valid_name("report.pdf")
        and not valid_name("a/b")
        and not valid_name("x\n")
        and not valid_name("é" * 200)
    )


def _event(*tags: list[str], kind: int = 9, content: str = "") -> Event:
    return Event.create(Identity.new().secret, kind, content, tags)


def test_imeta_ingest_checks() -> None:
    """Checklist 30, 31, 32, 51 (pure part)."""
    row = BlobRow(H, "image/png", "png", 100, 4, 3, "LEHV6nWB", True)
    ok = ["imeta", f"url {BASE}/{H}.png", "m image/png", f"x {H}", "size 100", "dim 4x3"]
    (ref,) = local_imeta(_event(ok), BASE)
    check_fields(ref, row, BASE)
    assert local_imeta(_event(["imeta", "url https://elsewhere/x.png"]), BASE) == []
    with pytest.raises(ImetaError, match="too many imeta tags"):
        local_imeta(_event(*[["imeta", "url https://e/x"]] * 21), BASE)
    with pytest.raises(ImetaError, match="x does not match url"):
        local_imeta(_event(["imeta", f"url {BASE}/{H}.png", "x " + "cd" * 32]), BASE)

    def refused(*fields: str) -> str:
        tag = ["imeta", *fields]
        try:
            check_fields(LocalRef(local_imeta(_event(tag), BASE)[0].blob, parse_imeta(tag)), row, BASE)
        except ImetaError as exc:
            return str(exc)
        return "accepted"

    url, x = f"url {BASE}/{H}.png", f"x {H}"
    assert refused(url, x, "size 100", "dim 4x3") == "imeta missing m"
    assert refused(url, x, "m image/png", "dim 4x3") == "imeta missing size"
    assert refused(url, x, "m image/png", "size 100") == "imeta missing dim"
    assert refused(url, x, "m image/jpeg", "size 100", "dim 4x3") == "imeta m does not match the stored blob"
    assert refused(url, x, "m image/png", "size 99", "dim 4x3") == "imeta size does not match the stored blob"
    assert refused(url, x, "m image/png", "size 100", "dim 3x4") == "imeta dim does not match the stored blob"
    assert refused(f"url {BASE}/{H}.jpg", x, "m image/png", "size 100", "dim 4x3") == (
        "imeta ext does not match the stored blob"
    )
    assert refused(url, x, "m image/png", "size 100", "dim 4x3", "thumb https://e/t.jpg") == (
        "imeta thumb does not match the stored blob"
    )


def test_profile_refs() -> None:
    body = f'{{"name":"a","picture":"{BASE}/{H}.png","banner":"https://elsewhere/b.png"}}'
    assert profile_refs(_event(kind=0, content=body), BASE) == [H]
    assert profile_refs(_event(kind=0, content="not json"), BASE) == []


def test_settings_from_env() -> None:
    """Checklist 42 and the §16 table."""
    s = settings_from_env({"BUZZ_MEDIA_QUOTA_BYTES": "0", "BUZZ_MEDIA_MAX_FILE_BYTES": "1000"})
    assert s.quota_bytes == 0 and s.caps[MediaClass.FILE] == 1000
    for env, message in (
        ({"BUZZ_MEDIA_BASE_URL": "https://h/media/"}, "must end with /media"),
        ({"BUZZ_MEDIA_BASE_URL": "https://h/files"}, "must end with /media"),
        ({"BUZZ_MEDIA_STORE": "s3"}, "auto, files or db"),
        ({"BUZZ_MEDIA_MAX_GIF_BYTES": str(60 << 20)}, "must not exceed"),
        ({"BUZZ_MEDIA_QUOTA_BYTES": "-1"}, "non-negative"),
        ({"BUZZ_MEDIA_ENABLED": "maybe"}, "true or false"),
    ):
        with pytest.raises(ValueError, match=message):
            settings_from_env(env)


def test_upload_slots() -> None:
    slots = UploadSlots(per_replica=3, per_pubkey=2, per_minute=3)
    assert slots.take("a", 10, 0.0) is None and slots.take("a", 20, 0.0) is None
    assert slots.take("a", 1, 0.0) == 1  # a third in progress of one pubkey
    assert slots.reserved("a") == 30
    assert slots.take("b", 1, 0.0) is None
    assert slots.take("c", 1, 0.0) == 1  # the replica is full
    slots.release("a", 10)
    slots.release("a", 20)
    assert slots.take("a", 1, 1.0) is None  # third start within the minute
    slots.release("a", 1)
    assert slots.take("a", 1, 2.0) == 58  # fourth: wait until the first start leaves the window
    assert slots.take("a", 1, 60.5) is None
