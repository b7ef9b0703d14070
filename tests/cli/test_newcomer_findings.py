"""A newcomer's CLI findings (docs/decisions.md 105), each against a real relay with the real
`buzz` executable: pubkeys that are not curve points, malformed relay URLs, where the private
key goes, and refusal categories named by the relay's NIP-01 prefix."""

from __future__ import annotations

from buzz.core import nip19
from buzz.core.keys import is_curve_pubkey
from tests.cli.helpers import buzz
from tests.support.relay import Identity, RunningRelay

# Two 64-hex strings no key pair has: x = 0 is not on secp256k1, and ff…ff is not below p.
NOT_ON_CURVE = ("0" * 64, "f" * 64)


async def _private_channel(url: str, owner: Identity) -> str:
    created = await buzz(url, owner, "channels", "create", "--name", "findings", "--visibility", "private")
    return str(created.json["channel_id"])


def test_the_off_curve_keys_here_are_not_curve_points_and_real_keys_are() -> None:
    assert not any(is_curve_pubkey(k) for k in NOT_ON_CURVE)
    assert is_curve_pubkey(Identity.new().pubkey)


async def test_add_member_and_dms_refuse_a_key_that_is_not_a_curve_point(
    sqlite_relay: RunningRelay, alice: Identity, bob: Identity
) -> None:
    url = sqlite_relay.url
    channel = await _private_channel(url, alice)
    for key in (*NOT_ON_CURVE, nip19.npub("f" * 64)):
        for args in (
            ("channels", "add-member", "--channel", channel, "--pubkey", key),
            ("dms", "open", "--pubkey", key),
            ("dms", "open", "--pubkey", bob.pubkey, "--pubkey", key),
        ):
            refused = await buzz(url, alice, *args)
            assert (refused.code, refused.error["error"], refused.error["retryable"]) == (
                1,
                "user_error",
                False,
            ), args
            assert "not a secp256k1 public key" in refused.error["message"], args
    members = (await buzz(url, alice, "channels", "members", "--channel", channel)).json["members"]
    assert [m["pubkey"] for m in members] == [alice.pubkey]  # nothing reached the relay
    assert (await buzz(url, alice, "dms", "list")).json["dms"] == []

    # a real key still goes through, and removing takes any 64 hex (undoing stays possible)
    added = await buzz(url, alice, "channels", "add-member", "--channel", channel, "--pubkey", bob.pubkey)
    assert added.json["pubkey"] == bob.pubkey
    removed = await buzz(url, alice, "channels", "remove-member", "--channel", channel, "--pubkey", "f" * 64)
    assert removed.json["pubkey"] == "f" * 64
