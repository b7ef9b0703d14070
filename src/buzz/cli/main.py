"""The `buzz` entry point (`[project.scripts]`): Ctrl-C handling first, then the command group.

This module imports only the standard library and `buzz.cli.interrupt`, so the Ctrl-C handler
is in place a few milliseconds after the interpreter starts, before click and the command
modules are loaded (`buzz.cli.root`; the groups themselves load when they run).
"""

from __future__ import annotations

import sys

from buzz.cli import interrupt


def main() -> None:
    interrupt.install()
    from buzz.cli.groups import report
    from buzz.cli.root import cli
    from buzz.client.errors import UserError

    try:
        cli(prog_name="buzz")
    except ModuleNotFoundError as exc:  # an optional extra is missing: say how to get it
        from buzz.cli.extras import install_hint

        command = next((a for a in sys.argv[1:] if not a.startswith("-")), None)
        report(UserError(install_hint(exc.name, command)))


def __getattr__(name: str) -> object:
    """`buzz.cli.main.cli`, the click group, for callers that drive it in-process (CliRunner)."""
    if name == "cli":
        from buzz.cli.root import cli

        return cli
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


if __name__ == "__main__":
    main()
