"""Model-bundle check run before an engine loads model files (huddle.md §10.4 "Model files")."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path


class IncompleteModelBundle(RuntimeError):
    """A file an engine needs is missing; the message names it. Never a silent fallback."""

    def __init__(self, path: Path) -> None:
        super().__init__(f"incomplete model bundle: {path}")
        self.path = path


def check_model_bundle(root: str | Path, required: Iterable[str]) -> Path:
    """Return `root` as a Path after checking each relative path in `required` exists under it.

    Raises IncompleteModelBundle naming the first missing file. (Neither bundled model ships a
    manifest of sizes or digests, so presence is what can be checked.)
    """
    base = Path(root)
    for name in required:
        path = base / name
        if not path.exists():
            raise IncompleteModelBundle(path)
    return base
