"""The light half of the CLI plumbing: command groups whose parser errors are JSON, the one
`report` of a failure, and the lazily loaded command table of `buzz` itself.

Nothing here imports a network, store or crypto library (only click, orjson and the API's
error tree), so `buzz --version`, `buzz --help` and a usage error stay fast: a command group's
module (and with it aiohttp, the store, coincurve…) is imported when that group runs.
"""

from __future__ import annotations

import contextlib
import importlib
import sys
from collections.abc import Iterator
from typing import Any, NoReturn

import click
import orjson

from buzz.cli import interrupt
from buzz.cli.output import EXIT_CODES
from buzz.client.errors import UserError, WorkspaceError


def report(failure: WorkspaceError) -> NoReturn:
    """One JSON line on stderr, then exit with the category's code (agents.md §2.1 item 2).
    After Ctrl-C its line is the one: exit 130 without another."""
    if interrupt.interrupted():
        raise SystemExit(interrupt.EXIT_INTERRUPTED)
    sys.stdout.flush()
    sys.stderr.write(orjson.dumps(failure.to_dict()).decode() + "\n")
    sys.stderr.flush()
    raise SystemExit(EXIT_CODES[failure.category])


# The options of `buzz` itself (cli/root.py): given after a command group, click refuses them.
GLOBAL_OPTIONS = ("--relay", "--private-key", "--auth-tag", "--format")


def usage_failure(exc: click.UsageError) -> UserError:
    """A click usage error as a `user_error` (exit 1). A global option given after the command
    group (`buzz channels list --private-key …`) says where it goes, not click's "No such option"."""
    if isinstance(exc, click.NoSuchOption) and exc.option_name in GLOBAL_OPTIONS:
        path = exc.ctx.command_path if exc.ctx is not None else "buzz <group> <command>"
        where = path.replace("buzz", f"buzz {exc.option_name} …", 1)
        return UserError(
            f"{exc.option_name} is an option of buzz itself: give it before the command group ({where})"
        )
    path = exc.ctx.command_path if exc.ctx is not None else "buzz"
    return UserError(f"{exc.format_message().rstrip('.')} (see {path} --help)")


@contextlib.contextmanager
def _parser_errors(group: str) -> Iterator[None]:
    try:
        yield
    except click.exceptions.NoArgsIsHelpError:
        where = "buzz" if group in ("", "buzz") else f"buzz {group}"
        report(UserError(f"missing command (see {where} --help)"))
    except click.UsageError as exc:
        report(usage_failure(exc))


class CommandGroup(click.Group):
    """A command group whose argument-parser errors are a JSON `user_error` with exit 1, never
    click's exit 2, which means "network" here (agents.md §2.1 item 2)."""

    def make_context(
        self, info_name: str | None, args: list[str], parent: click.Context | None = None, **extra: Any
    ) -> click.Context:
        with _parser_errors(self.name or ""):
            return super().make_context(info_name, args, parent, **extra)

    def invoke(self, ctx: click.Context) -> Any:
        with _parser_errors(self.name or ""):
            return super().invoke(ctx)


class LazyGroup(CommandGroup):
    """A CommandGroup whose subcommands are imported when one is run (click's lazy-loading
    pattern). `lazy` maps a name to `(module, attribute, summary)`; `summary` is what
    `--help` lists without importing the module (tests/cli/test_startup.py checks that it is
    the command's own short help)."""

    def __init__(self, *args: Any, lazy: dict[str, tuple[str, str, str]], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.lazy = lazy

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *self.lazy})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in self.lazy and cmd_name not in self.commands:
            module, attribute, _ = self.lazy[cmd_name]
            command = getattr(importlib.import_module(module), attribute)
            self.add_command(command, cmd_name)
        return super().get_command(ctx, cmd_name)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        names = self.list_commands(ctx)
        if not names:
            return
        limit = formatter.width - 6 - max(len(n) for n in names)
        rows = []
        for name in names:
            loaded = self.commands.get(name)
            if loaded is not None:
                if not loaded.hidden:
                    rows.append((name, loaded.get_short_help_str(limit)))
            else:
                stand_in = click.Command(name, help=self.lazy[name][2])  # shortened as click does
                rows.append((name, stand_in.get_short_help_str(limit)))
        with formatter.section("Commands"):
            formatter.write_dl(rows)
