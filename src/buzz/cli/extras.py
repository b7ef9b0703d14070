"""A missing optional dependency as one line that says how to get it (never a traceback).

`make run` installs every extra (`.[voice,agent]`), so this only shows on a bare `pip install
buzz` or a broken venv. Which extra a module belongs to comes from the installed package's own
metadata (the `extra == "…"` markers of pyproject.toml), so a dependency added to an extra
later (a speech model, another codec) is covered without editing this file. A module that is
only pulled in by one of them (anyio via mcp) falls back to the extra of the command that ran.
"""

from __future__ import annotations

import re
from importlib import metadata

DISTRIBUTION = "buzz"
COMMAND_EXTRAS = {"huddle": "voice", "mcp": "agent", "agent": "agent"}  # command group → extra
# Import names that differ from the distribution name of an extra's requirement.
IMPORT_NAMES = {"acp": "agent-client-protocol", "webrtcvad": "webrtcvad-wheels"}

_MARKER = re.compile(r"""extra\s*==\s*['"]([^'"]+)['"]""")
_NAME = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)")


def _normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def extras_by_requirement() -> dict[str, str]:
    """Normalized requirement name → the extra that lists it (the first one, `dev` last)."""
    try:
        requires = metadata.requires(DISTRIBUTION) or []
    except metadata.PackageNotFoundError:
        return {}
    found: dict[str, str] = {}
    for req in sorted(requires, key=lambda r: 'extra == "dev"' in r or "extra == 'dev'" in r):
        marker, name = _MARKER.search(req), _NAME.match(req)
        if marker and name:
            found.setdefault(_normalize(name.group(1)), marker.group(1))
    return found


def extra_for(module: str | None, command: str | None) -> str | None:
    """The extra that provides `module` (top-level import name), else the command's, else None."""
    if module:
        top = module.split(".", 1)[0]
        dist = _normalize(IMPORT_NAMES.get(top, top))
        extra = extras_by_requirement().get(dist)
        if extra and extra != "dev":
            return extra
    return COMMAND_EXTRAS.get(command or "")


def install_hint(module: str | None, command: str | None) -> str:
    """The message for a missing module: what is missing and the one command that installs it."""
    extra = extra_for(module, command)
    top = module.split(".", 1)[0] if module else None
    what = f"the optional dependency {top!r}" if top else "an optional dependency"
    target = f".[{extra}]" if extra else ".[voice,agent]"
    return (
        f"{what} is not installed; run `make run` once (it installs every extra) "
        f"or `.venv/bin/pip install -e '{target}'`"
    )
