"""The import-layer rule of docs/architecture.md, checked on the source with `ast`.

core → store / client → relay / faces: every `buzz.<package>` may import only the packages of
its row in LAYERS (and the top-level `buzz` for `__version__`). Faces (cli, agent, mcp, voice)
never import each other; the one exception is a launcher — a `buzz` subcommand that starts
another face, or the operator commands that run the relay on its store — which may import only
the entry modules listed for it in LAUNCHERS. Every import counts, including the lazy ones
inside functions and those under `if TYPE_CHECKING:`. Runs in `make lint` and with the suite.

Two rules on the modules themselves (issue 30 item 5, docs/decisions.md 340): the imports a
module runs when it is imported form no cycle, and no source file is longer than MAX_LINES.
In buzz.relay no import at all forms a cycle, and its parts (subpackages) import only the
parts of their row in RELAY_PARTS (decision 341). `python -P tests/test_layers.py buzz.relay`
prints a package's whole import graph and its cycles.
"""

from __future__ import annotations

import ast
import graphlib
from collections.abc import Iterable, Iterator
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
    "buzz.cli.admin_backup": frozenset(
        {"buzz.relay.operator.relay_key", "buzz.store"}
    ),  # admin_cmd's backup, restore
}


def _module_name(path: Path) -> str:
    parts = path.relative_to(SRC).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _package(module: str) -> str:
    return ".".join(module.split(".")[:2])


def all_imports(source: str) -> Iterator[str]:
    """Every absolute module an import statement of `source` names."""
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            yield node.module


def imports(source: str) -> Iterator[str]:
    """Every absolute `buzz.…` module an import statement of `source` names."""
    return (name for name in all_imports(source) if name.startswith("buzz."))


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


# -- no import cycle -------------------------------------------------------------------------------
def _type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _import_time_nodes(body: list[ast.stmt]) -> Iterator[ast.Import | ast.ImportFrom]:
    """The import statements that run when the module is imported: at module level, also inside
    a top-level `if` / `try` / `with` / `match` and in class bodies; not inside a function
    (run when it is called, once every module is loaded) nor under `if TYPE_CHECKING:` (never
    run: a name for annotations only)."""
    for node in body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        elif isinstance(node, ast.If) and _type_checking(node.test):
            yield from _import_time_nodes(node.orelse)
        elif isinstance(node, ast.Match):
            for case in node.cases:
                yield from _import_time_nodes(case.body)
        else:
            for name in ("body", "orelse", "finalbody"):
                yield from _import_time_nodes(getattr(node, name, []))
            for handler in getattr(node, "handlers", []):
                yield from _import_time_nodes(handler.body)


def import_time_edges(module: str, source: str, modules: set[str]) -> set[str]:
    """The `buzz` modules `module` imports when it is imported. `from pkg import name` is an
    edge to `pkg.name` when that is a module, else to `pkg` (whose `__init__` then runs); the
    parent packages Python imports first are no edge of their own (a package's `__init__`
    importing its submodules is no cycle)."""
    return _edges(_import_time_nodes(ast.parse(source).body), module, modules)


def _edges(nodes: Iterable[ast.AST], module: str, modules: set[str]) -> set[str]:
    """The modules of `modules` (other than `module`) the imports among `nodes` name."""
    edges = set()
    for node in nodes:
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            targets = [
                f"{node.module}.{alias.name}" if f"{node.module}.{alias.name}" in modules else node.module
                for alias in node.names
            ]
        else:
            continue
        edges.update(t for t in targets if t in modules and t != module)
    return edges


def import_cycle(sources: dict[str, str]) -> list[str]:
    """One cycle of import-time imports among `sources` (module → source), [] when none."""
    modules = set(sources)
    graph = {m: import_time_edges(m, s, modules) for m, s in sources.items()}
    try:
        graphlib.TopologicalSorter(graph).prepare()
    except graphlib.CycleError as exc:
        return list(exc.args[1])
    return []


def test_no_import_cycle() -> None:
    assert import_cycle(dict(source_modules())) == []


def test_the_cycle_rule_counts_what_runs_at_import() -> None:
    a_imports_b = "from buzz.x.b import B\n"
    b_imports_a = "from buzz.x import a\n"
    cycle = import_cycle({"buzz.x.a": a_imports_b, "buzz.x.b": b_imports_a})
    assert set(cycle) == {"buzz.x.a", "buzz.x.b"}
    inside_try = "try:\n    from buzz.x import a\nexcept ImportError:\n    pass\n"
    assert import_cycle({"buzz.x.a": a_imports_b, "buzz.x.b": inside_try}) != []
    lazy = "def f():\n    from buzz.x import a\n"
    assert import_cycle({"buzz.x.a": a_imports_b, "buzz.x.b": lazy}) == []
    typing_only = "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from buzz.x.a import A\n"
    assert import_cycle({"buzz.x.a": a_imports_b, "buzz.x.b": typing_only}) == []
    # a package re-exporting its submodule, which imports a sibling: no cycle
    package = {"buzz.x": "from buzz.x.a import A\n", "buzz.x.a": a_imports_b, "buzz.x.b": ""}
    assert import_cycle(package) == []


# -- the whole import graph of a package ---------------------------------------------------------
def all_edges(module: str, source: str, modules: set[str]) -> set[str]:
    """Every `buzz` module `module` names in an import, wherever the import stands: at module
    level, inside functions, under `if TYPE_CHECKING:` (the design's dependencies, not only what
    runs at import). `from pkg import name` is an edge to `pkg.name` when that is a module."""
    return _edges(ast.walk(ast.parse(source)), module, modules)


def package_graph(package: str, sources: dict[str, str] | None = None) -> dict[str, set[str]]:
    """module → the modules of `package` it imports (every import counts), for `package`'s modules."""
    sources = dict(source_modules()) if sources is None else sources
    inside = {m for m in sources if m == package or m.startswith(package + ".")}
    return {m: all_edges(m, sources[m], inside) for m in sorted(inside)}


def strong_components(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative): each an
    import cycle, or several cycles sharing modules."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return sorted(found)


def describe_graph(package: str) -> str:
    """The import graph of `package` as text: modules, edges, then the cycles (SCCs).
    `python tests/test_layers.py buzz.relay` prints it."""
    graph = package_graph(package)
    lines = [f"{package}: {len(graph)} modules, {sum(map(len, graph.values()))} edges (every import counts)"]
    components = strong_components(graph)
    lines.append(f"strongly connected components (import cycles): {len(components)}")
    for component in components:
        lines.append(f"  {len(component)} modules: {' '.join(component)}")
    lines.append("edges:")
    for module, targets in graph.items():
        lines.append(f"  {module} -> {' '.join(sorted(targets)) or '-'}")
    return "\n".join(lines)


def test_the_graph_finds_cycles_through_annotation_imports() -> None:
    a_imports_b = "from buzz.x.b import B\n"
    typing_only = "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from buzz.x.a import A\n"
    lazy = "def f():\n    from buzz.x import a\n"
    for b in (typing_only, lazy):
        graph = package_graph("buzz.x", {"buzz.x.a": a_imports_b, "buzz.x.b": b, "buzz.y": ""})
        assert strong_components(graph) == [["buzz.x.a", "buzz.x.b"]]
    graph = package_graph("buzz.x", {"buzz.x.a": a_imports_b, "buzz.x.b": ""})
    assert strong_components(graph) == []


# -- buzz.relay: no cycle counting every import, and its parts in layers ----------------------
# Issue 30 item 5 (docs/decisions.md 341): handlers name narrow Protocols of what they use
# (`ConnectionHost`, `HuddleHost`, `HuddleParts`, `HttpHost`, `FrameSink`), so not even an
# annotation leads back to the module that builds them.
COMPOSITION = frozenset({"relay", "app", "server", "banner"})  # the root: may import every part
# part of buzz.relay (a subpackage, or a module left at its top) → the parts it may import.
RELAY_PARTS: dict[str, frozenset[str]] = {
    "": frozenset(),  # buzz.relay's __init__
    "config": frozenset(),
    "operator": frozenset(),
    "transport": frozenset({"operator"}),
    "auth": frozenset(),
    "delivery": frozenset({"auth", "transport", "operator"}),
    "ingestion": frozenset({"auth", "delivery", "operator"}),
    "replicas": frozenset({"auth", "delivery", "operator"}),
    "connection": frozenset({"config", "auth", "transport", "delivery", "ingestion", "replicas", "operator"}),
    "huddle": frozenset({"config", "auth", "transport", "delivery", "ingestion"}),
    "http": frozenset({"config", "auth", "transport", "delivery", "ingestion", "operator"}),
}


def relay_part(module: str) -> str:
    return module.split(".")[2] if module.count(".") >= 2 else ""


def part_violations(graph: dict[str, set[str]]) -> list[str]:
    """`module imports target` for each import crossing RELAY_PARTS' table."""
    bad = []
    for module, targets in graph.items():
        own = relay_part(module)
        if own in COMPOSITION:
            continue
        allowed = RELAY_PARTS[own] | {own}
        bad.extend(f"{module} imports {t}" for t in sorted(targets) if relay_part(t) not in allowed)
    return bad


def test_buzz_relay_has_no_import_cycle_counting_every_import() -> None:
    assert strong_components(package_graph("buzz.relay")) == []


def test_every_relay_part_has_a_row() -> None:
    parts = {relay_part(m) for m in package_graph("buzz.relay")}
    assert parts - COMPOSITION == set(RELAY_PARTS), parts ^ (set(RELAY_PARTS) | COMPOSITION)


def test_relay_parts_import_only_their_row() -> None:
    assert part_violations(package_graph("buzz.relay")) == []


def test_the_part_rule_catches_an_upward_import() -> None:
    graph = {"buzz.relay.auth.access": {"buzz.relay.delivery.fanout"}, "buzz.relay.app": {"buzz.relay.auth"}}
    assert part_violations(graph) == ["buzz.relay.auth.access imports buzz.relay.delivery.fanout"]


# -- pure cores --------------------------------------------------------------------------------
# Each subsystem of the work on top (jobs, workflows, media) is a pure core and a runner beside it
# (docs/architecture.md). The core modules do no I/O: they import none of the libraries that
# reach a file, socket, process, clock loop or database, and no runner module; the runner is
# what the relay, the harness and the CLI drive. Rows the store hands back may be named as types.
PURE_CORES: dict[str, frozenset[str]] = {
    "buzz.jobs": frozenset(
        {"limits", "wire", "result", "machine", "build", "records", "redact", "text", "work_status"}
    ),
    "buzz.workflows": frozenset(
        {
            "limits",
            "yaml_tree",
            "validate",
            "definition",
            "conditions",
            "templates",
            "schedule",
            "context",
            "resolve",
            "machine",
            "approvals",
            "events",
            "capacity",
            "mentions",
            "authority",
        }
    ),  # runner: rows, host, actions, drive, engine, scheduler, commands, webhook_call
    "buzz.media": frozenset({"auth", "sniff", "imeta", "limits", "ranges", "rates"}),
    # runner: receive, images, blobs, service
}
IO_LIBRARIES = frozenset(
    {
        "asyncio",
        "aiohttp",
        "asyncpg",
        "redis",
        "sqlite3",
        "socket",
        "ssl",
        "subprocess",
        "os",
        "pathlib",
        "shutil",
        "tempfile",
        "threading",
        "io",
        "logging",
        "urllib.request",
        "http",
        "PIL",
        "av",
    }
)
STORE_ROW_TYPES = frozenset({"buzz.store.base", "buzz.store.workflow_rows"})


def impurities(module: str, source: str) -> list[str]:
    """`module imports target` for each import a pure-core `module` may not make."""
    package = _package(module)
    core = {f"{package}.{name}" for name in PURE_CORES[package]} | {package}
    bad = []
    for name in all_imports(source):
        if name.startswith("buzz."):
            ok = _package(name) == "buzz.core" or name in core or name in STORE_ROW_TYPES
        else:
            ok = not any(name == lib or name.startswith(lib + ".") for lib in IO_LIBRARIES)
        if not ok:
            bad.append(f"{module} imports {name}")
    return bad


def test_subsystem_cores_do_no_io() -> None:
    modules = dict(source_modules())
    cores = [f"{pkg}.{name}" for pkg, names in PURE_CORES.items() for name in sorted(names)]
    assert [m for m in cores if m not in modules] == []
    assert [v for m in cores for v in impurities(m, modules[m])] == []


def test_the_core_rule_catches_io_and_runner_imports() -> None:
    assert impurities("buzz.workflows.machine", "import asyncio\n") == [
        "buzz.workflows.machine imports asyncio"
    ]
    assert impurities("buzz.workflows.machine", "from buzz.workflows.engine import E\n") == [
        "buzz.workflows.machine imports buzz.workflows.engine"
    ]
    assert impurities("buzz.media.imeta", "from buzz.store.base import BlobRow\n") == []


# -- file length -----------------------------------------------------------------------------------
MAX_LINES = 600
# path under src/buzz (or web/src/…) → why splitting it would be worse than its length. Empty: keep it so.
LONG_FILES: dict[str, str] = {}


WEB = SRC.parent / "web"


def source_lengths() -> dict[str, int]:
    """Lines of each Python file under src/buzz and each TypeScript file of the browser
    workspace (web/src, named `web/src/...`): the same rule for both faces of the code."""
    root = SRC / "buzz"
    lengths = {
        str(path.relative_to(root)): len(path.read_text(encoding="utf-8").splitlines())
        for path in sorted(root.rglob("*.py"))
    }
    for path in sorted([*(WEB / "src").rglob("*.ts"), *(WEB / "src").rglob("*.tsx")]):
        lengths[str(path.relative_to(WEB.parent))] = len(path.read_text(encoding="utf-8").splitlines())
    return lengths


def test_no_source_file_is_longer_than_max_lines() -> None:
    lengths = source_lengths()
    too_long = {p: n for p, n in lengths.items() if n > MAX_LINES and p not in LONG_FILES}
    assert too_long == {}, (
        f"split these along their jobs (or list one in LONG_FILES with a reason): {too_long}"
    )
    stale = [p for p in LONG_FILES if lengths.get(p, 0) <= MAX_LINES]
    assert stale == [], f"no longer long (or gone): drop them from LONG_FILES: {stale}"


if __name__ == "__main__":
    import sys

    print(describe_graph(sys.argv[1] if len(sys.argv) > 1 else "buzz.relay"))
