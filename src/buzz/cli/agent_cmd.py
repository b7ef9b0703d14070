"""`buzz agent run`: the ACP harness in the foreground (agents.md §4); `buzz agent status` and
`buzz agent usage`: the owner's view of their agents (issue 14 item 12, `buzz.agent.reports`).

Every option comes from the flag table of `buzz.agent.config` (agents.md §4.16): options are
declared as plain text or switches and resolved, with their environment variables and
defaults, by `load_config`, so a bad value exits 1 with a JSON error (never click's exit 2),
and a missing or invalid key or `BUZZ_AUTH_TAG` exits 3. SIGINT / SIGTERM stop it gracefully
(presence `offline`) with exit 0.
"""

from __future__ import annotations

import asyncio
import logging
import signal
import sys
from collections.abc import Callable
from typing import Any

import click
import orjson

from buzz.agent.config import FLAGS, ConfigError, load_config
from buzz.cli.output import Context

# Root options that `agent run` inherits when not given on the subcommand itself.
_INHERITED = {"private_key": "private_key", "relay": "relay_url", "auth_tag": "auth_tag"}


def _error(category: str, message: str, code: int) -> None:
    sys.stderr.write(
        orjson.dumps({"error": category, "message": message, "retryable": False}).decode() + "\n"
    )
    raise SystemExit(code)


def _with_flag_options(func: Callable[..., Any]) -> Callable[..., Any]:
    for flag in reversed(FLAGS):
        help_text = f"{flag.help} [env {flag.env}]"
        if flag.is_flag:
            func = click.option(flag.option, flag.name, is_flag=True, default=None, help=help_text)(func)
        else:
            func = click.option(flag.option, flag.name, default=None, metavar="TEXT", help=help_text)(func)
    return func


@click.group()
def agent() -> None:
    """Run an agent: the ACP harness (agents.md §4)."""


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
    for name, attr in _INHERITED.items():
        if given.get(name) is None and ctx is not None:
            given[name] = getattr(ctx, attr, None)
    for name in [k for k, v in given.items() if v is False]:
        given[name] = None  # an unset switch leaves the environment and default in charge
    try:
        import acp  # noqa: F401  (the `agent` extra)
    except ImportError:
        _error("user_error", "buzz agent run needs the agent extra: pip install 'buzz[agent]'", 1)
    try:
        config = load_config(given)
        from buzz.agent.identity import resolve_identity

        identity = resolve_identity(config)
    except ConfigError as exc:
        category = "auth_error" if exc.exit_code == 3 else "user_error"
        _error(category, exc.message, exc.exit_code)
    sys.exit(asyncio.run(_main(config, identity)))


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
    from buzz.agent.reports import STATUS_COLUMNS, agent_status, status_rows

    _report(
        ctx,
        out_fmt,
        lambda ws: agent_status(ws.query, ws.secret, ws.pubkey),
        lambda report: _render_table(STATUS_COLUMNS, status_rows(report)),
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

    from buzz.agent.reports import USAGE_COLUMNS, agent_usage, parse_since, usage_rows

    try:
        start = parse_since(since, int(time.time())) if since is not None else None
    except ValueError as exc:
        _error("user_error", str(exc), 1)
    _report(
        ctx,
        out_fmt,
        lambda ws: agent_usage(ws.query, ws.secret, ws.pubkey, start),
        lambda report: _render_table(USAGE_COLUMNS, usage_rows(report)),
    )


async def _main(config: Any, identity: Any) -> int:
    from buzz.agent.harness import Harness

    try:
        harness = Harness(config, identity)
    except ConfigError as exc:
        _error("user_error", exc.message, exc.exit_code)
    from buzz.agent.preflight import PreflightError

    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, lambda: asyncio.ensure_future(harness.request_shutdown()))
    try:
        return await harness.run()
    except PreflightError as exc:
        _error("user_error", str(exc), 1)
        return 1
