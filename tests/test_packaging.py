"""pyproject.toml builds without setuptools' deprecation warnings: `project.license` is an SPDX
expression string (PEP 639), which needs setuptools ≥ 77 in the build requirements."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

PYPROJECT = Path(__file__).resolve().parents[1] / "pyproject.toml"


def test_license_is_an_spdx_string_and_the_build_pins_a_setuptools_that_reads_it() -> None:
    data = tomllib.loads(PYPROJECT.read_text(encoding="utf-8"))
    assert data["project"]["license"] == "Apache-2.0"  # not the deprecated {text = …} table
    (pin,) = [r for r in data["build-system"]["requires"] if r.startswith("setuptools")]
    floor = re.fullmatch(r"setuptools>=(\d+)(?:\.\d+)*", pin)
    assert floor is not None and int(floor.group(1)) >= 77, pin
    classifiers = data["project"].get("classifiers", [])
    assert not [c for c in classifiers if c.startswith("License ::")]  # PEP 639 forbids both
