"""`buzz mcp`: run the MCP stdio server (agents.md §7; the server is `buzz.mcp.server`, a face
started here through its one entry point `serve`).

The identity comes from the global options (`buzz --private-key … mcp`) and their environment
variables (`BUZZ_PRIVATE_KEY`, `BUZZ_RELAY_URL`, `BUZZ_AUTH_TAG`); the same three options are
also accepted after `mcp`, where they win, so an MCP client config can pass them as arguments.
They are resolved here, before serving (a failure is the CLI error object and its exit code).
stdout is the protocol: nothing else is ever written there.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import click

from buzz.cli.common import identity_of, open_workspace
from buzz.cli.groups import report, usage_failure
from buzz.cli.output import Context
from buzz.client.errors import WorkspaceError


class _McpCommand(click.Command):
    """Argument-parser errors are a JSON `user_error` with exit 1, never click's 2 (§2.1 item 2)."""

    def make_context(
        self, info_name: str | None, args: list[str], parent: click.Context | None = None, **extra: Any
    ) -> click.Context:
        try:
            return super().make_context(info_name, args, parent, **extra)
        except click.UsageError as exc:
            report(usage_failure(exc))


@click.command("mcp", cls=_McpCommand)
@click.option("--relay", default=None, help="Relay URL (overrides the global --relay / BUZZ_RELAY_URL).")
@click.option(
    "--private-key", default=None, help="Agent secret key, hex or nsec (overrides BUZZ_PRIVATE_KEY)."
)
@click.option("--auth-tag", default=None, help="The agent's NIP-OA tag (overrides BUZZ_AUTH_TAG).")
@click.pass_obj
def mcp(ctx: Context, relay: str | None, private_key: str | None, auth_tag: str | None) -> None:
    """Serve the workspace to an MCP client over stdio (tools: send_message, get_messages,
    get_thread, search, list_channels, join_channel, add_reaction, mem_get, mem_set, mem_ls, mem_search,
    upload_file, get_file, request_job, list_jobs, get_job, cancel_job, submit_job_result, and the twelve
    workflow tools).

    A missing or invalid key or BUZZ_AUTH_TAG exits 3 before serving. Logs go to stderr.

    \b
    Example (MCP client config: command "buzz", args ["mcp"], with the env below):
      BUZZ_RELAY_URL=ws://localhost:3000 BUZZ_PRIVATE_KEY=<agent nsec> BUZZ_AUTH_TAG='["auth",…]' buzz mcp
    """
    overrides = {"relay_url": relay, "private_key": private_key, "auth_tag": auth_tag}
    ctx = dataclasses.replace(ctx, **{k: v for k, v in overrides.items() if v is not None})
    if relay is not None:
        ctx = dataclasses.replace(ctx, relay_source="buzz mcp --relay")
    if auth_tag is not None:
        ctx = dataclasses.replace(ctx, auth_tag_source="buzz mcp --auth-tag")
    try:
        ws = open_workspace(ctx, identity_of(ctx))
    except WorkspaceError as exc:
        report(exc)
    from buzz.mcp.server import serve  # the MCP SDK loads only for this command

    serve(ws)
