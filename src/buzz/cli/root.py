"""The `buzz` command group (agents.md §2): the global options and the table of command groups,
each imported only when it runs (`buzz.cli.groups.LazyGroup`), so `buzz --version` and
`buzz --help` load no network, store or crypto library."""

from __future__ import annotations

import click

from buzz import __version__
from buzz.cli.groups import LazyGroup
from buzz.cli.output import Context

# name → (module, attribute, the summary `buzz --help` lists without importing the module)
COMMANDS: dict[str, tuple[str, str, str]] = {
    "admin": (
        "buzz.cli.admin_cmd",
        "admin",
        "Operate a relay: members, open/closed workspace, bans, backup and restore, stats.",
    ),
    "agent": (
        "buzz.cli.agent_cmd",
        "agent",
        "Run an agent: the ACP harness, and your agents' status and usage.",
    ),
    "agents": (
        "buzz.cli.agents_cmd",
        "agents",
        "Agent directory: who the agents are and what they do, personas, teams and the "
        "managed-agent policy owners set.",
    ),
    "channels": (
        "buzz.cli.channels_cmd",
        "channels",
        "Channels: create, list, inspect, join, manage members, rename, archive and delete.",
    ),
    "dms": ("buzz.cli.dms_cmd", "dms", "Direct messages."),
    "files": ("buzz.cli.files_cmd", "files", "Files on the relay: upload one, or get one by URL or hash."),
    "huddle": (
        "buzz.cli.huddle_cmd",
        "huddle",
        "Voice huddles: start, join, leave, list and inspect a channel's audio room.",
    ),
    "jobs": (
        "buzz.cli.jobs_cmd",
        "jobs",
        "Jobs for agents: request one, follow it, cancel it, hand off its result.",
    ),
    "keys": ("buzz.cli.keys_cmd", "keys", "Key pairs (secp256k1, NIP-19 forms)."),
    "mcp": (
        "buzz.cli.mcp_cmd",
        "mcp",
        "Serve the workspace to an MCP client over stdio (tools: send_message, get_messages, "
        "get_thread, search, list_channels, join_channel, add_reaction, mem_get, mem_set, "
        "mem_ls, mem_search, upload_file, get_file, request_job, list_jobs, get_job, cancel_job, "
        "submit_job_result, and the twelve workflow tools).",
    ),
    "mem": (
        "buzz.cli.mem_cmd",
        "mem",
        "Agent memory: encrypted engrams shared by an agent and its owner.",
    ),
    "messages": (
        "buzz.cli.messages_cmd",
        "messages",
        "Channel messages: send, read, thread, edit, delete, search.",
    ),
    "reactions": ("buzz.cli.reactions_cmd", "reactions", "Reactions on messages."),
    "relay": ("buzz.cli.relay_cmd", "relay", "Run and inspect the relay."),
    "users": ("buzz.cli.users_cmd", "users", "Profiles and presence."),
    "workflows": (
        "buzz.cli.workflows_cmd",
        "workflows",
        "Workflows: YAML automations bound to a channel.",
    ),
}


@click.group(
    name="buzz",
    cls=LazyGroup,
    lazy=COMMANDS,
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
# The version of the package itself (tests/cli/test_startup.py checks it against the installed
# metadata), not importlib.metadata's lookup, which loads email, zipfile and csv on every run.
@click.version_option(__version__, prog_name="buzz", message="%(prog)s %(version)s")
@click.pass_context
def cli(ctx: click.Context, relay: str, private_key: str | None, auth_tag: str | None, fmt: str) -> None:
    """buzz: a workspace where humans and agents share channels on a Nostr relay you own.

    \b
    Example:
      buzz keys generate
      buzz relay serve --bind 127.0.0.1:3000
    """

    def from_env(param: str) -> bool:
        return ctx.get_parameter_source(param) is click.core.ParameterSource.ENVIRONMENT

    # A message about a bad value names what the user typed: the flag, or its variable.
    ctx.obj = Context(
        relay_url=relay,
        private_key=private_key,
        fmt=fmt,
        auth_tag=auth_tag,
        relay_source="BUZZ_RELAY_URL" if from_env("relay") else "--relay",
        auth_tag_source="BUZZ_AUTH_TAG" if from_env("auth_tag") else "--auth-tag",
    )
