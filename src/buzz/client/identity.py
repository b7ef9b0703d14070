"""Who the workspace client acts as (agents.md §1.1 item 2, §1.3, §1.5).

- `parse_secret_key`: a secret key as 64 hex or `nsec1…` → 64 lowercase hex.
- `parse_pubkey`: a public key as 64 hex (any case) or `npub1…` → 64 lowercase hex that is a
  secp256k1 point (unless told otherwise, for removals).
- `resolve_auth_tag`: `BUZZ_AUTH_TAG` text → the verified NIP-OA tag (engram.md §14.6: normalize
  the shorthand, parse strictly, verify against the holder's own pubkey; no clause is evaluated
  here, time bounds are the relay's business at admission).
- `Identity`: a parsed key and its optional tag; `Identity.from_text` runs both parsers.

Errors are from `buzz.client.errors`: `AuthError` (missing key, bad tag), `InvalidKey` (a key that
does not parse or is not a valid secp256k1 secret), `UserError` (a bad pubkey). Messages never
contain the secret key.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from buzz.client.errors import AuthError, InvalidKey, UserError
from buzz.core import nip19
from buzz.core.keys import is_curve_pubkey, public_key
from buzz.core.nip_oa import InvalidAuthTag, normalize_auth_tag_input, parse_auth_tag, verify_auth_tag

# `--private-key` is an option of `buzz` itself, so it goes before the command group (decision
# 107): the hint says where, since `buzz channels list --private-key …` is refused.
NO_KEY = (
    "no private key: set BUZZ_PRIVATE_KEY, or give --private-key before the command group "
    "(buzz --private-key <nsec or hex> channels list)"
)
BAD_KEY_FORMAT = "invalid private key: expected 64 hex characters or nsec1… (buzz keys generate makes one)"
BAD_KEY_VALUE = "invalid private key: not a valid secp256k1 secret (zero or not below the curve order)"


def parse_secret_key(value: str | None) -> str:
    """A secret key as 64 hex or `nsec1…` → 64 lowercase hex.

    Raises AuthError when missing or blank, InvalidKey when it does not parse or is off-curve.
    """
    if value is None or not value.strip():
        raise AuthError(NO_KEY)
    try:
        secret = nip19.parse_key_text(value, "nsec")
    except ValueError:
        raise InvalidKey(BAD_KEY_FORMAT) from None
    try:
        public_key(secret)
    except ValueError:  # the library's own text names the curve order in decimal: not shown
        raise InvalidKey(BAD_KEY_VALUE) from None
    return secret


def parse_pubkey(value: str, what: str = "pubkey", *, on_curve: bool = True) -> str:
    """A public key as 64 hex (any case) or `npub1…` → 64 lowercase hex. Raises UserError
    naming `what` for text that does not parse and, with `on_curve`, for a key that is not a
    secp256k1 x-only point (`00…00`, `ff…ff`: nobody holds it). `on_curve=False` is for reads and
    undoing: removing or unbanning a key that an older client let in must stay possible."""
    try:
        key = nip19.parse_key_text(value, "npub")
    except ValueError as exc:
        raise UserError(f"invalid {what}: {exc}") from None
    if on_curve and not is_curve_pubkey(key):
        raise UserError(
            f"invalid {what}: {key} is not a secp256k1 public key (no point has this x coordinate)"
        )
    return key


def resolve_auth_tag(raw: str | None, secret_key: str, source: str = "BUZZ_AUTH_TAG") -> list[str] | None:
    """The verified NIP-OA tag for the holder of `secret_key`, or None when `raw` is unset/blank.

    Steps of engram.md §14.6: trim, rewrite the unquoted shorthand, `parse_auth_tag`, then
    `verify_auth_tag(tag, own pubkey)`. Raises AuthError for a value that fails either step,
    naming `source`, where the text came from (`--auth-tag` or `BUZZ_AUTH_TAG`).
    """
    if raw is None or not raw.strip():
        return None
    own = public_key(secret_key)
    try:
        tag = parse_auth_tag(normalize_auth_tag_input(raw))
        verify_auth_tag(tag.to_list(), own)
    except InvalidAuthTag as exc:
        raise AuthError(f"invalid {source}: {exc.reason}{self_attested_hint(raw, own, source)}") from None
    return tag.to_list()


def self_attested_hint(raw: str, own_pubkey: str, source: str = "BUZZ_AUTH_TAG") -> str:
    """The fix to append when the tag names `own_pubkey` as its owner: the usual cause is the
    agent's tag still exported in a shell that now holds the owner's key. "" otherwise.
    `source` is where the tag came from: a variable to unset, or a flag to leave out."""
    try:
        owner = parse_auth_tag(normalize_auth_tag_input(raw)).owner
    except InvalidAuthTag:
        return ""
    if owner != own_pubkey:
        return ""
    fix = f"leave out {source}" if source.startswith("-") else f"unset {source}"
    return f"; this key is the tag's owner: {fix} when acting as the owner"


@dataclass(frozen=True)
class Identity:
    """A secret key (64 lowercase hex) and, for an agent, its verified NIP-OA tag
    `["auth", owner, conditions, sig]`."""

    secret: str = field(repr=False)
    auth_tag: list[str] | None = None

    @classmethod
    def from_text(
        cls, private_key: str | None, auth_tag: str | None = None, auth_tag_source: str = "BUZZ_AUTH_TAG"
    ) -> Identity:
        """Parse `--private-key` / `BUZZ_PRIVATE_KEY` and `--auth-tag` / `BUZZ_AUTH_TAG` text.
        Raises AuthError / InvalidKey as `parse_secret_key` and `resolve_auth_tag`."""
        secret = parse_secret_key(private_key)
        return cls(secret, resolve_auth_tag(auth_tag, secret, auth_tag_source))

    @property
    def pubkey(self) -> str:
        return public_key(self.secret)

    @property
    def owner(self) -> str | None:
        """The owner named by the tag (element 1), None without a tag."""
        return self.auth_tag[1] if self.auth_tag is not None else None

    @property
    def auth_tags(self) -> list[list[str]]:
        """The `auth_tags=` of a `RelayClient` (NIP-42 AUTH carries exactly this tag, §1.5)."""
        return [list(self.auth_tag)] if self.auth_tag is not None else []
