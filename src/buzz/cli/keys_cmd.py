"""`buzz keys`: generate a key pair, show a public key (never the secret)."""

from __future__ import annotations

import click

from buzz.cli.output import Context, emit, fail
from buzz.core import nip19
from buzz.core.keys import generate_secret_key, is_hex, public_key


def parse_secret(value: str) -> str:
    """A secret key given as 64 hex or `nsec1…` → 64 hex. Raises click.BadParameter."""
    value = value.strip()
    if value.startswith("nsec1"):
        try:
            hrp, data = nip19.decode(value)
        except ValueError as exc:
            raise click.BadParameter(f"invalid nsec: {exc}") from None
        if hrp != "nsec":
            raise click.BadParameter("expected an nsec")
        return str(data)
    if is_hex(value.lower(), 64):
        return value.lower()
    raise click.BadParameter("secret key must be 64 hex characters or an nsec1… string")


@click.group()
def keys() -> None:
    """Key pairs (secp256k1, NIP-19 forms)."""


@keys.command()
@click.pass_obj
def generate(ctx: Context) -> None:
    """Generate a new key pair and print secret and public key, hex and nsec/npub.

    \b
    Example:
      buzz keys generate
    """
    secret = generate_secret_key()
    pub = public_key(secret)
    emit(ctx, {"secret_key": secret, "nsec": nip19.nsec(secret), "public_key": pub, "npub": nip19.npub(pub)})


@keys.command()
@click.pass_obj
def show(ctx: Context) -> None:
    """Print the public key (hex and npub) of --private-key / BUZZ_PRIVATE_KEY.

    \b
    Example:
      BUZZ_PRIVATE_KEY=nsec1... buzz keys show
    """
    if not ctx.private_key:
        fail("no private key: pass --private-key or set BUZZ_PRIVATE_KEY", 2)
    try:
        secret = parse_secret(ctx.private_key)
        pub = public_key(secret)
    except (click.BadParameter, ValueError) as exc:
        fail(f"invalid private key: {exc}", 2)
    emit(ctx, {"public_key": pub, "npub": nip19.npub(pub)})
