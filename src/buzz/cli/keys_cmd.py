"""`buzz keys`: generate a key pair, show a public key (never the secret)."""

from __future__ import annotations

import click
import orjson

from buzz.cli.groups import CommandGroup
from buzz.cli.output import Context, emit
from buzz.core import nip19
from buzz.core.keys import generate_secret_key, public_key


@click.group(cls=CommandGroup)
def keys() -> None:
    """Key pairs (secp256k1, NIP-19 forms).

    \b
    Example:
      buzz keys generate
      BUZZ_PRIVATE_KEY=nsec1... buzz keys show --npub
    """


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
    emit(ctx, {"secret_hex": secret, "nsec": nip19.nsec(secret), "pubkey": pub, "npub": nip19.npub(pub)})


@keys.command()
@click.option(
    "--npub", "only", flag_value="npub", default=None, help="Print only the npub, as a JSON string."
)
@click.option("--hex", "only", flag_value="hex", help="Print only the hex public key, as a JSON string.")
@click.pass_obj
def show(ctx: Context, only: str | None) -> None:
    """Print the public key (hex and npub) of --private-key / BUZZ_PRIVATE_KEY; never the secret.

    \b
    Example:
      BUZZ_PRIVATE_KEY=nsec1... buzz keys show
      BUZZ_PRIVATE_KEY=nsec1... buzz keys show --npub
    """
    from buzz.cli.identity import IdentityError, fail_identity, parse_secret_key

    try:
        pub = public_key(parse_secret_key(ctx.private_key))
    except IdentityError as exc:
        fail_identity(exc)
    shown = {"pubkey": pub, "npub": nip19.npub(pub)}
    emit(ctx, shown if only is None else shown["pubkey" if only == "hex" else "npub"])


@keys.command()
@click.option("--agent", "agent", required=True, help="The agent's public key, hex or npub.")
@click.option(
    "--conditions",
    default="",
    show_default=True,
    help="NIP-OA conditions, e.g. 'created_at<1767225600' (valid until then); empty = unconditional.",
)
@click.pass_obj
def attest(ctx: Context, agent: str, conditions: str) -> None:
    """Sign a NIP-OA attestation for an agent key, as its owner (README: Add an agent to your workspace).

    Signs with --private-key / BUZZ_PRIVATE_KEY (the owner) and prints
    {"auth_tag": [...], "owner", "agent"}; how to export it as BUZZ_AUTH_TAG goes to stderr.

    \b
    Example:
      BUZZ_PRIVATE_KEY=<owner nsec> buzz keys attest --agent npub1...
    """
    from buzz.cli.identity import IdentityError, cli_error, fail_identity, parse_pubkey, parse_secret_key
    from buzz.core.nip_oa import InvalidAuthTag, build_auth_tag, verify_auth_tag

    try:
        owner_secret = parse_secret_key(ctx.private_key)
        agent_pub = parse_pubkey(agent, "--agent")
    except IdentityError as exc:
        fail_identity(exc)
    owner = public_key(owner_secret)
    if agent_pub == owner:
        cli_error("user_error", "--agent must differ from the owner key (self-attestation)")
    try:
        tag = build_auth_tag(owner_secret, agent_pub, conditions)
        verify_auth_tag(tag, agent_pub)  # self-check (agents.md §9.2 item 3)
    except InvalidAuthTag as exc:
        cli_error("user_error", f"cannot attest: {exc.reason}")
    emit(ctx, {"auth_tag": tag, "owner": owner, "agent": agent_pub})
    compact = orjson.dumps(tag).decode()
    click.echo(
        f"# give the agent this tag as its BUZZ_AUTH_TAG:\nexport BUZZ_AUTH_TAG='{compact}'",
        err=True,
    )
