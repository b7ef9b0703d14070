"""The import-layer rule of docs/architecture.md, checked on the source with `ast`.

core → store / client → relay / faces: every `buzz.<package>` may import only the packages of
its row in LAYERS (and the top-level `buzz` for `__version__`). Faces (cli, agent, mcp, voice)
never import each other; the one exception is a launcher — a `buzz` subcommand that starts
another face, or the operator commands that run the relay on its store — which may import only
the entry modules listed for it in LAUNCHERS. Every import counts, including the lazy ones
inside functions and those under `if TYPE_CHECKING:`. Runs in `make lint` and with the suite.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"

LAYERS: dict[str, frozenset[str]] = {
    "buzz.core": frozenset(),
    "buzz.store": frozenset({"buzz.core"}),
    "buzz.recall": frozenset({"buzz.core"}),  # client-side search over decrypted engrams
    "buzz.client": frozenset({"buzz.core", "buzz.recall", "buzz.jobs"}),
    # files (issue 26): pure checks over core, byte stores and metadata over the store's interface
    "buzz.media": frozenset({"buzz.core", "buzz.store"}),
    "buzz.relay": frozenset({"buzz.core", "buzz.store", "buzz.media", "buzz.jobs", "buzz.workflows"}),
    "buzz.jobs": frozenset({"buzz.core"}),  # the job protocol's pure core (issue 27)
    # the workflow engine (issue 28): a pure core over core, and its runner over the store's interface
    "buzz.workflows": frozenset({"buzz.core", "buzz.store"}),
    "buzz.agent": frozenset({"buzz.core", "buzz.client", "buzz.jobs"}),
    "buzz.mcp": frozenset({"buzz.core", "buzz.client", "buzz.jobs"}),
    "buzz.voice": frozenset({"buzz.core", "buzz.client"}),
    "buzz.cli": frozenset({"buzz.core", "buzz.client", "buzz.jobs"}),
}

# module → the modules (or whole packages) of other layers it may import to start them.
LAUNCHERS: dict[str, frozenset[str]] = {
    "buzz.cli.agent_cmd": frozenset({"buzz.agent.entry"}),
    "buzz.cli.mcp_cmd": frozenset({"buzz.mcp.server"}),
    # `buzz huddle` still reaches several voice modules (client, session, engines, models,
    # whisper, huddle_flow); a `buzz.voice.entry` would narrow this to one module.
    "buzz.cli.huddle_cmd": frozenset({"buzz.voice"}),
    "buzz.cli.relay_cmd": frozenset({"buzz.relay", "buzz.store"}),
    "buzz.cli.admin_cmd": frozenset({"buzz.relay", "buzz.store"}),
    "buzz.cli.admin_backup": frozenset({"buzz.relay.relay_key", "buzz.store"}),  # admin_cmd's backup, restore
}


def _module_name(path: Path) -> str:
    parts = path.relative_to(SRC).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _package(module: str) -> str:
    return ".".join(module.split(".")[:2])


def imports(source: str) -> Iterator[str]:
    """Every absolute `buzz.…` module an import statement of `source` names."""
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        else:
            continue
        yield from (n for n in names if n.startswith("buzz."))


def violations(module: str, source: str) -> list[str]:
    """`module imports target` for each import `module` may not make."""
    own = _package(module)
    allowed = LAYERS[own] | {own}
    entries = LAUNCHERS.get(module, frozenset())
    bad = []
    for target in imports(source):
        if _package(target) in allowed:
            continue
        if any(target == e or target.startswith(e + ".") for e in entries):
            continue
        bad.append(f"{module} imports {target}")
    return bad


def source_modules() -> Iterator[tuple[str, str]]:
    for path in sorted((SRC / "buzz").rglob("*.py")):
        module = _module_name(path)
        if module != "buzz":
            yield module, path.read_text(encoding="utf-8")


def test_every_package_has_a_layer() -> None:
    packages = {_package(m) for m, _ in source_modules()}
    assert packages == set(LAYERS), packages ^ set(LAYERS)


def test_no_import_crosses_its_layer() -> None:
    found = [v for module, source in source_modules() for v in violations(module, source)]
    assert found == []


def test_the_rule_catches_upward_and_sideways_imports() -> None:
    assert violations("buzz.core.event", "from buzz.store.base import StoreError") == [
        "buzz.core.event imports buzz.store.base"
    ]
    lazy = "def f():\n    import buzz.cli.main\n"
    assert violations("buzz.agent.harness", lazy) == ["buzz.agent.harness imports buzz.cli.main"]
    assert violations("buzz.mcp.server", "from buzz.agent.config import FLAGS") == [
        "buzz.mcp.server imports buzz.agent.config"
    ]
    # a launcher reaches only the entry module of the face it starts
    assert violations("buzz.cli.agent_cmd", "from buzz.agent.entry import run") == []
    assert violations("buzz.cli.agent_cmd", "from buzz.agent.harness import Harness") == [
        "buzz.cli.agent_cmd imports buzz.agent.harness"
    ]
    assert violations("buzz.client.session", "from buzz.client.errors import UserError") == []
