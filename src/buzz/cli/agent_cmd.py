"""`buzz agent run`: the ACP harness in the foreground (agents.md §4); `buzz agent status` and
`buzz agent usage`: the owner's view of their agents (issue 14 item 12, `buzz.agent.reports`).
The harness and the reports are reached through the agent face's public entry point
`buzz.agent.entry`, the only agent module the CLI imports.

Every option comes from the agent's flag table (agents.md §4.16): options are
declared as plain text or switches and resolved, with their environment variables and
defaults, by `load_config`, so a bad value exits 1 with a JSON error (never click's exit 2),
and a missing or invalid key or `BUZZ_AUTH_TAG` exits 3. SIGINT / SIGTERM stop it gracefully
(presence `offline`) with exit 0.
"""

from __future__ import annotations

import asyncio
import logging
import sys
from collections.abc import Callable
from typing import Any, NoReturn

import click

import buzz.agent.entry as entry
from buzz.agent.entry import FLAGS, ConfigError
from buzz.cli import interrupt
from buzz.cli.output import Context, fail

# Root options that `agent run` inherits when not given on the subcommand itself.
_INHERITED = {"private_key": "private_key", "relay": "relay_url", "auth_tag": "auth_tag"}


def _config_failure(exc: ConfigError) -> NoReturn:
    """A refused configuration: exit 3 (`auth_error`, `key_error` for an invalid key) for a
    key or tag, else 1 (`user_error`)."""
    fail(exc.message, exc.category or ("auth_error" if exc.exit_code == 3 else "user_error"))


def _shown_default(default: Any) -> str:
    """`default: X; ` for the help of a valued flag with a default, else ``."""
    if default is None or default == "" or default == ():
        return ""
    shown = ",".join(map(str, default)) if isinstance(default, tuple) else str(default)
    return f"default: {shown}; "


def _with_flag_options(func: Callable[..., Any]) -> Callable[..., Any]:
    for flag in reversed(FLAGS):
        shown = "" if flag.is_flag else _shown_default(flag.default)
        help_text = f"{flag.help} [{shown}env {flag.env}]"
        if flag.is_flag:
            func = click.option(flag.option, flag.name, is_flag=True, default=None, help=help_text)(func)
        else:
            func = click.option(flag.option, flag.name, default=None, metavar="TEXT", help=help_text)(func)
    return func


@click.group()
def agent() -> None:
    """Run an agent: the ACP harness, and your agents' status and usage.

    \b
    Example:
      buzz agent run --agent-command python3 --agent-args examples/rules_agent.py
    """


@agent.command(context_settings={"max_content_width": 110})
@_with_flag_options
@click.option("--log-level", default="INFO", show_default=True, help="Harness log level (stderr).")
@click.pass_obj
def run(ctx: Context, log_level: str, **given: Any) -> None:
    """Run the harness: subscribe to the agent's channels and drive ACP agent subprocesses.

    \b
    Example:
      BUZZ_PRIVATE_KEY=<agent nsec> BUZZ_AUTH_TAG='["auth",…]' \\
        buzz agent run --agent-command python --agent-args examples/rules_agent.py
    """
    logging.basicConfig(level=log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    # A root value click read from the environment is left to the harness, which reads the
    # same variable and so names it (not --relay / --auth-tag) when the value is bad.
    from_env = {
        "relay": ctx.relay_source == "BUZZ_RELAY_URL",
        "auth_tag": ctx.auth_tag_source == "BUZZ_AUTH_TAG",
    }
    for name, attr in _INHERITED.items():
        if given.get(name) is None and ctx is not None and not from_env.get(name, False):
            given[name] = getattr(ctx, attr, None)
    for name in [k for k, v in given.items() if v is False]:
        given[name] = None  # an unset switch leaves the environment and default in charge
    try:
        import acp  # noqa: F401  (the `agent` extra)
    except ImportError:
        fail("buzz agent run needs the agent extra: pip install 'buzz[agent]'", "user_error")
    try:
        prepared = entry.prepare(given)
    except ConfigError as exc:
        _config_failure(exc)
    try:
        with interrupt.kept():  # the harness takes SIGINT over while it runs
            code = asyncio.run(entry.run(prepared))
    except ConfigError as exc:  # refused by the harness itself
        _config_failure(exc)
    except entry.PreflightError as exc:  # the agent or MCP command does not start
        fail(str(exc), "user_error")
    sys.exit(code)


def _render_table(columns: tuple[str, ...], rows: list[list[str]]) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(*columns, box=None, pad_edge=False)
    for row in rows:
        table.add_row(*row)
    Console(width=200).print(table)


def _format_option(func: Callable[..., Any]) -> Callable[..., Any]:
    return click.option(
        "--format",
        "out_fmt",
        type=click.Choice(["json", "compact", "table"]),
        default=None,
        help="Output: JSON (default, or the root --format), compact JSON, or a table.",
    )(func)


def _report(
    ctx: Context, out_fmt: str | None, fetch: Callable[[Any], Any], table: Callable[[Any], None]
) -> None:
    from buzz.cli.common import run as run_body

    if out_fmt in ("json", "compact"):
        ctx.fmt = out_fmt
    run_body(ctx, fetch, render=table if out_fmt == "table" else None)


@agent.command()
@_format_option
@click.pass_obj
def status(ctx: Context, out_fmt: str | None) -> None:
    """My running agents: channels, queue depth, last turn, failures (from their snapshots).

    \b
    Example:
      buzz agent status --format table
    """
    _report(
        ctx,
        out_fmt,
        lambda ws: entry.agent_status(ws.session.query, ws.identity.secret, ws.pubkey),
        lambda report: _render_table(entry.STATUS_COLUMNS, entry.status_rows(report)),
    )


@agent.command()
@click.option(
    "--since", default=None, help="Unix seconds or a duration back from now (24h, 7d); default: all."
)
@_format_option
@click.pass_obj
def usage(ctx: Context, since: str | None, out_fmt: str | None) -> None:
    """My agents' turn metrics (44200), decrypted: tokens, turns, errors, per channel.

    \b
    Example:
      buzz agent usage --since 7d --format table
    """
    import time

    try:
        start = entry.parse_since(since, int(time.time())) if since is not None else None
    except ValueError as exc:
        fail(str(exc), "user_error")
    _report(
        ctx,
        out_fmt,
        lambda ws: entry.agent_usage(ws.session.query, ws.identity.secret, ws.pubkey, start),
        lambda report: _render_table(entry.USAGE_COLUMNS, entry.usage_rows(report)),
    )
