"""Kinds where block/buzz's registry (`shared/vectors/kinds.json`) and relay.md §3.2 disagree.

relay.md wins; each entry keeps a kind out of the kinds.json agreement test with a one-line
reason. Scope: storage class and visibility sets of kinds present in both. Kinds that
kinds.json lists and relay.md does not register are not differences (they are unknown here).
"""

from __future__ import annotations

# kind -> why we deliberately differ from kinds.json (none today: all 96 shared kinds agree).
DELIBERATE_DIFFERENCES: dict[int, str] = {}
