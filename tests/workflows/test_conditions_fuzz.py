"""10^4 hostile and random conditions: each ends in a value or an error, within the node budget.

Issue 28 item 8 / checklist 17. A seeded generator (reproducible) mixes grammar-shaped
expressions (deep nesting, huge numbers, long strings, `^` towers, wrong arities, unknown
names), mutations of them, Python injection attempts and raw junk. No wall-clock threshold is
asserted: the budget is counted in evaluated nodes; the slowest case is printed (`-s`).
"""

from __future__ import annotations

import random
import time

from buzz.workflows.conditions import (
    Budget,
    ConditionError,
    ConditionSyntaxError,
    Value,
    compile_condition,
    evaluate,
)
from buzz.workflows.limits import CONDITION_MAX_NODES

SEED = 28_2024
COUNT = 10_000
ENV: dict[str, Value] = {
    "trigger_text": "x" * 60_000,
    "trigger_author": "a" * 64,
    "trigger_is_reply": True,
    "steps_a_output_n": 9_223_372_036_854_775_807,
    "steps_a_output_f": 1e308,
}
NAMES = [*ENV, "undefined_var", "trigger_nope"]
FUNCS = ["str_contains", "str_starts_with", "str_ends_with", "str_len", "str::to_lowercase", "str::to_uppercase",
         "str::trim", "min", "max", "if", "nope", "str::nope", "__import__", "eval", "open"]  # fmt: skip
BINARY = ["+", "-", "*", "/", "%", "^", "==", "!=", "<", "<=", ">", ">=", "&&", "||"]
HOSTILE = [
    "__import__('os').system('id')", "open('/etc/passwd').read()", "().__class__.__bases__[0].__subclasses__()",
    "eval('1')", "exec('x=1')", "lambda: 0", "[x for x in range(10**9)]", "'a' * 10**9", "9 ** 9 ** 9",
    "f'{1}'", "import os", "x := 1", "a = b", "a; b", "{{trigger.text}}", "${jndi:ldap://x}", "\\x00", "\u202e",
]  # fmt: skip


def _leaf(rng: random.Random) -> str:
    pick = rng.random()
    if pick < 0.25:
        return str(rng.choice([0, 1, 2, 7, 10**18, 2**63 - 1, 2**63, 10**30]))
    if pick < 0.4:
        return f"{rng.uniform(0, 9):.3f}" + (f"e{rng.randint(-400, 400)}" if rng.random() < 0.5 else "")
    if pick < 0.6:
        return '"' + 'ab\\n\\"é'[: rng.randint(0, 6)] * rng.randint(0, 300) + '"'
    if pick < 0.7:
        return rng.choice(["true", "false"])
    return rng.choice(NAMES)


def _expr(rng: random.Random, depth: int) -> str:
    if depth <= 0 or rng.random() < 0.2:
        return _leaf(rng)
    pick = rng.random()
    if pick < 0.45:
        return f"{_expr(rng, depth - 1)} {rng.choice(BINARY)} {_expr(rng, depth - 1)}"
    if pick < 0.6:
        return rng.choice(["-", "!"]) * rng.randint(1, 130) + _expr(rng, depth - 1)
    if pick < 0.75:
        args = ", ".join(_expr(rng, depth - 1) for _ in range(rng.randint(0, 4)))
        return f"{rng.choice(FUNCS)}({args})"
    if pick < 0.85:
        return "(" * rng.randint(1, 300) + _expr(rng, depth - 1) + ")" * rng.randint(0, 300)
    return " ^ ".join(_leaf(rng) for _ in range(rng.randint(2, 120)))


def _mutate(rng: random.Random, text: str) -> str:
    chars = list(text)
    for _ in range(rng.randint(1, 8)):
        pos = rng.randint(0, len(chars))
        if rng.random() < 0.5 and chars:
            del chars[min(pos, len(chars) - 1)]
        else:
            chars.insert(pos, rng.choice('()!&|=<>^+-*/%,":;.\\ \n\tx1é{}[]'))
    return "".join(chars)


def _junk(rng: random.Random) -> str:
    alphabet = '()!&|=<>^+-*/%,":;. x1_a\\é\x00\U0001f600'
    return "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 5000)))


def cases(rng: random.Random) -> list[str]:
    out = []
    for i in range(COUNT):
        kind = i % 5
        if kind in (0, 1):
            out.append(_expr(rng, rng.randint(1, 12)))
        elif kind == 2:
            out.append(_mutate(rng, _expr(rng, rng.randint(1, 8))))
        elif kind == 3:
            out.append(rng.choice(HOSTILE) * rng.randint(1, 3))
        else:
            out.append(_junk(rng))
    return out


def test_ten_thousand_hostile_conditions_end_within_the_budget() -> None:
    rng = random.Random(SEED)
    outcomes = {"value": 0, "syntax": 0, "evaluation": 0}
    most_steps, slowest, slowest_text = 0, 0.0, ""
    for text in cases(rng):
        budget = Budget()
        started = time.perf_counter()
        try:
            result = evaluate(compile_condition(text), ENV, budget)
            assert type(result) is bool
            outcomes["value"] += 1
        except ConditionSyntaxError:
            outcomes["syntax"] += 1
        except ConditionError:
            outcomes["evaluation"] += 1
        elapsed = time.perf_counter() - started
        assert budget.steps <= CONDITION_MAX_NODES + 1, text[:200]
        most_steps = max(most_steps, budget.steps)
        if elapsed > slowest:
            slowest, slowest_text = elapsed, text
    assert sum(outcomes.values()) == COUNT
    assert min(outcomes.values()) > 100, outcomes  # every outcome is exercised
    print(f"\nfuzz: {outcomes}; most nodes evaluated {most_steps}; slowest parse+evaluate "
          f"{slowest * 1000:.2f} ms ({len(slowest_text)} bytes: {slowest_text[:60]!r}…)")  # fmt: skip
