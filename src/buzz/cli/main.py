"""The `buzz` command (agents.md §2): global options, then one group per area."""

from __future__ import annotations

import sys

import click

from buzz.cli import (
    admin_cmd,
    agent_cmd,
    channels_cmd,
    dms_cmd,
    files_cmd,
    keys_cmd,
    messages_cmd,
    reactions_cmd,
    relay_cmd,
    users_cmd,
)
from buzz.cli.common import CommandGroup, report
from buzz.cli.extras import install_hint
from buzz.cli.huddle_cmd import huddle
from buzz.cli.mcp_cmd import mcp
from buzz.cli.mem_cmd import mem
from buzz.cli.output import Context
from buzz.client.errors import UserError


@click.group(
    name="buzz",
    cls=CommandGroup,
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
)
@click.option(
    "--relay",
    envvar="BUZZ_RELAY_URL",
    default="ws://localhost:3000",
    show_default=True,
    help="Relay WebSocket URL (env BUZZ_RELAY_URL).",
)
@click.option(
    "--private-key",
    envvar="BUZZ_PRIVATE_KEY",
    default=None,
    help="Your secret key, hex or nsec (env BUZZ_PRIVATE_KEY).",
)
@click.option(
    "--auth-tag",
    envvar="BUZZ_AUTH_TAG",
    default=None,
    help="The agent's NIP-OA tag, JSON or [auth,…] shorthand (env BUZZ_AUTH_TAG; unset for humans).",
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["json", "compact"]),
    default="json",
    show_default=True,
    help="Output format on stdout.",
)
@click.version_option(package_name="buzz", prog_name="buzz", message="%(prog)s %(version)s")
@click.pass_context
def cli(ctx: click.Context, relay: str, private_key: str | None, auth_tag: str | None, fmt: str) -> None:
    """buzz: a workspace where humans and agents share channels on a Nostr relay you own.

    \b
    Example:
      buzz keys generate
      buzz relay serve --bind 127.0.0.1:3000
    """
    from_env = ctx.get_parameter_source("relay") is click.core.ParameterSource.ENVIRONMENT
    ctx.obj = Context(
        relay_url=relay,
        private_key=private_key,
        fmt=fmt,
        auth_tag=auth_tag,
        relay_source="BUZZ_RELAY_URL" if from_env else "--relay",
    )


cli.add_command(relay_cmd.relay)
cli.add_command(keys_cmd.keys)
cli.add_command(mem)
cli.add_command(channels_cmd.channels)
cli.add_command(messages_cmd.messages)
cli.add_command(reactions_cmd.reactions)
cli.add_command(dms_cmd.dms)
cli.add_command(files_cmd.files)
cli.add_command(users_cmd.users)
cli.add_command(huddle)
cli.add_command(agent_cmd.agent)
cli.add_command(mcp)
cli.add_command(admin_cmd.admin)


def main() -> None:
    try:
        cli(prog_name="buzz")
    except ModuleNotFoundError as exc:  # an optional extra is missing: say how to get it
        command = next((a for a in sys.argv[1:] if not a.startswith("-")), None)
        report(UserError(install_hint(exc.name, command)))


if __name__ == "__main__":
    main()
