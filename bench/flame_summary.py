#!/usr/bin/env python3
"""Summarise a py-spy folded-stack file (`--profile` of bench/ingest.py) as text: the share of
samples per function, self (innermost frame) and total (anywhere on the stack), top N each.

Usage: flame_summary.py FILE.collapsed [--top N] [--match SUBSTRING]
"""

from __future__ import annotations

import argparse
import re
from collections import Counter
from pathlib import Path

_LINE = re.compile(r"^(.*) (\d+)$")


def _frame(f: str) -> str:
    # "func (path/to/file.py:123)" → "func (file.py)"
    m = re.match(r"(.*?) \((.*?)(?::\d+)?\)$", f)
    if not m:
        return f
    return f"{m.group(1)} ({m.group(2).rsplit('/site-packages/', 1)[-1].rsplit('/src/', 1)[-1]})"


def summarise(path: Path, top: int) -> str:
    own: Counter[str] = Counter()
    total: Counter[str] = Counter()
    samples = 0
    for line in path.read_text().splitlines():
        m = _LINE.match(line)
        if not m:
            continue
        stack, n = m.group(1).split(";"), int(m.group(2))
        frames = [_frame(f) for f in stack]
        samples += n
        own[frames[-1]] += n
        for f in set(frames):
            total[f] += n
    lines = [f"{path.name}: {samples} samples"]
    lines.append(f"  self (top {top}):")
    lines += [f"    {n / samples:6.1%}  {f}" for f, n in own.most_common(top)]
    lines.append(f"  total (top {top}):")
    lines += [f"    {n / samples:6.1%}  {f}" for f, n in total.most_common(top)]
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("file", type=Path)
    ap.add_argument("--top", type=int, default=25)
    args = ap.parse_args()
    print(summarise(args.file, args.top))


if __name__ == "__main__":
    main()
