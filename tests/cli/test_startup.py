"""Start-up of `buzz` (issue 24 item 7): `--version`, `--help` and the entry import load no
network, store or crypto library; a command group is imported when it runs."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import click
import pytest

import buzz
from buzz.cli import interrupt
from buzz.cli.output import EXIT_CODES
from buzz.cli.root import COMMANDS, cli

# What the entry may load of buzz itself: the entry, the Ctrl-C handler, the root group and
# the light plumbing (output, groups, the API's error tree). No command module.
ENTRY_MODULES = {
    "buzz",
    "buzz.cli",
    "buzz.cli.main",
    "buzz.cli.interrupt",
    "buzz.cli.root",
    "buzz.cli.groups",
    "buzz.cli.output",
    "buzz.client",
    "buzz.client.errors",
}
# Network, store and crypto libraries (and the metadata lookup that loads email/zipfile/csv).
HEAVY = {
    "aiohttp",
    "yarl",
    "multidict",
    "asyncio",
    "socket",
    "ssl",
    "sqlite3",
    "asyncpg",
    "redis",
    "coincurve",
    "cryptography",
    "_cffi_backend",
    "bech32",
    "unidiff",
    "importlib.metadata",
}

# Runs the real entry point (the `buzz` script's own two lines) and writes the loaded modules
# to the file named by argv[1] when the process exits.
PROBE = """
import atexit, json, sys
out = sys.argv.pop(1)
atexit.register(lambda: open(out, "w").write(json.dumps(sorted(sys.modules))))
sys.argv[0] = "buzz"
from buzz.cli.main import main
main()
"""


def _loaded(tmp_path: Path, *args: str) -> tuple[subprocess.CompletedProcess[str], set[str]]:
    out = tmp_path / "modules.json"
    done = subprocess.run(
        [sys.executable, "-c", PROBE, str(out), *args], capture_output=True, text=True, timeout=60
    )
    return done, set(json.loads(out.read_text()))


@pytest.mark.parametrize("args", [("--version",), ("--help",), ("-h",)])
def test_version_and_help_load_no_network_store_or_crypto_library(
    tmp_path: Path, args: tuple[str, ...]
) -> None:
    done, modules = _loaded(tmp_path, *args)
    assert done.returncode == 0, done.stderr
    assert {m for m in modules if m.split(".")[0] == "buzz"} <= ENTRY_MODULES
    assert {m for m in modules if m in HEAVY or m.split(".")[0] in HEAVY} == set()
    if args == ("--version",):
        assert done.stdout == f"buzz {buzz.__version__}\n"
    else:
        assert all(name in done.stdout for name in COMMANDS)


def test_a_command_loads_its_own_group_only(tmp_path: Path) -> None:
    done, modules = _loaded(tmp_path, "keys", "generate")
    assert done.returncode == 0, done.stderr
    loaded_groups = {m for m in modules if m.startswith("buzz.cli.") and m.endswith("_cmd")}
    assert loaded_groups == {"buzz.cli.keys_cmd"}
    # no transport, store, relay or other face for a key pair
    assert not {m for m in modules if m.split(".")[0] in {"aiohttp", "sqlite3", "asyncpg", "redis"}}
    assert not {m for m in modules if m.startswith(("buzz.relay", "buzz.store", "buzz.agent", "buzz.voice"))}


def test_the_help_summaries_are_the_groups_own() -> None:
    # `buzz --help` lists COMMANDS' summaries without importing the groups: they must say what
    # each group's own help says (its short help, as click would shorten it).
    for name, (module, attribute, summary) in COMMANDS.items():
        group = getattr(importlib.import_module(module), attribute)
        assert group.name == name
        assert click.Command(name, help=summary).get_short_help_str(1000) == group.get_short_help_str(1000)
    ctx = click.Context(cli)
    assert cli.list_commands(ctx) == sorted(COMMANDS)


def test_the_version_is_the_installed_packages() -> None:
    assert buzz.__version__ == metadata.version("buzz")


def test_interrupted_has_its_exit_code_in_the_table() -> None:
    assert EXIT_CODES["interrupted"] == interrupt.EXIT_INTERRUPTED == 130
    line = json.loads(interrupt.LINE)
    assert (line["error"], line["retryable"]) == ("interrupted", False)
