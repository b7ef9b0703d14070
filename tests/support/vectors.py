"""Where the published test vectors live: `tests/vectors/` (see its README for sources)."""

from __future__ import annotations

from pathlib import Path

VECTORS_DIR = Path(__file__).resolve().parents[1] / "vectors"
