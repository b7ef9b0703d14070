"""The README and everything `buzz` prints cite only files of this repository (issue 24 item 8):
the specifications the code comments cite (`relay.md`, `agents.md`, …; docs/specs.md) are not
in it, so a user who follows such a citation finds nothing."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import click
from click.testing import CliRunner

from buzz.cli.main import cli

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "src" / "buzz"
# The specifications (docs/specs.md), by name, and any docs/ page: the citations a reader follows.
SPECS = re.compile(r"\b(?:agents|relay|huddle|engram|jobs|media|workflows)\.md\b")
DOCS = re.compile(r"\bdocs/[A-Za-z0-9_./-]+\.md\b")
# SQL text of the schema: its `--` comments stay inside the database, no one is shown them.
NOT_OUTPUT = {SRC / "store" / "schema.py"}


def _missing(text: str) -> list[str]:
    """The citations of `text` that lead nowhere: a specification's name (not in this
    repository), or a docs/ page that does not exist."""
    return SPECS.findall(text) + [page for page in DOCS.findall(text) if not (ROOT / page).is_file()]


def _help_texts() -> dict[tuple[str, ...], str]:
    texts: dict[tuple[str, ...], str] = {}
    runner = CliRunner()

    def walk(group: click.Group, prefix: tuple[str, ...]) -> None:
        texts[prefix] = runner.invoke(cli, [*prefix, "--help"], prog_name="buzz").output
        ctx = click.Context(group)
        for name in group.list_commands(ctx):
            command = group.get_command(ctx, name)
            assert command is not None
            if isinstance(command, click.Group):
                walk(command, (*prefix, name))
            else:
                texts[(*prefix, name)] = runner.invoke(
                    cli, [*prefix, name, "--help"], prog_name="buzz"
                ).output

    walk(cli, ())
    return texts


def test_every_help_text_cites_only_files_that_exist() -> None:
    texts = _help_texts()
    assert ("keys", "attest") in texts and ("admin", "members") in texts
    bad = {" ".join(path) or "buzz": _missing(text) for path, text in texts.items() if _missing(text)}
    assert bad == {}


def test_the_readme_cites_only_files_that_exist() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    # links in Markdown are URLs relative to the README; code spans and prose name paths
    assert _missing(readme) == []
    assert (ROOT / "docs" / "specs.md").is_file()


def _output_strings(path: Path) -> list[tuple[int, str]]:
    """The string constants of a module that can reach a user: all but docstrings (those of
    click commands are help texts, checked above through click itself)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docstrings = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                docstrings.add(id(first.value))
    return [
        (node.lineno, node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings
    ]


def test_no_message_in_the_source_cites_a_file_that_is_not_here() -> None:
    bad = [
        f"{path.relative_to(ROOT)}:{line}: {_missing(text)}"
        for path in sorted(SRC.rglob("*.py"))
        if path not in NOT_OUTPUT
        for line, text in _output_strings(path)
        if _missing(text)
    ]
    assert bad == []
