"""Conditions: grammar, types, functions, limits (spec/workflows.md §4; checklist 13–18)."""

from __future__ import annotations

import builtins
import contextlib
import math
from collections.abc import Iterator

import pytest

from buzz.workflows.conditions import (
    Budget,
    Condition,
    ConditionError,
    ConditionSyntaxError,
    Value,
    compile_condition,
    evaluate_value,
)
from buzz.workflows.conditions import (
    evaluate as _evaluate,
)
from buzz.workflows.limits import CONDITION_MAX_DEPTH

ENV: dict[str, Value] = {"trigger_text": "hi", "trigger_is_reply": False, "n": 5, "big": "x" * 40_000}


@contextlib.contextmanager
def sealed() -> Iterator[None]:
    """Checklist 18: eval/exec/compile raise while the engine parses and evaluates."""
    saved = {name: getattr(builtins, name) for name in ("eval", "exec", "compile")}

    def forbidden(*_a: object, **_k: object) -> None:
        raise AssertionError("eval/exec/compile called on condition text")

    for name in saved:
        setattr(builtins, name, forbidden)
    try:
        yield
    finally:
        for name, fn in saved.items():
            setattr(builtins, name, fn)


def parse(text: str) -> Condition:
    with sealed():
        return compile_condition(text)


def evaluate(cond: Condition, env: dict[str, Value], budget: Budget | None = None) -> bool:
    with sealed():
        return _evaluate(cond, env, budget)


def value(text: str, env: dict[str, Value] | None = None) -> Value:
    with sealed():
        return evaluate_value(compile_condition(text), ENV if env is None else env)


def test_checklist_13_grammar_and_arithmetic() -> None:
    assert evaluate(parse('trigger_text == "hi" && !trigger_is_reply'), ENV) is True
    assert value("-2^2") == -4 and isinstance(value("-2^2"), float)
    assert value("7 / 2") == 3 and isinstance(value("7 / 2"), int)
    assert value("7.0 / 2") == 3.5


@pytest.mark.parametrize(
    ("text", "result"),
    [
        ("-7 / 2", -3),  # truncates toward zero
        ("-7 % 3", -1),  # remainder takes the dividend's sign
        ("2 ^ 3 ^ 2", 512.0),  # right-associative
        ("2 ^ -1", 0.5),
        ("1 + 2 * 3", 7),
        ("(1 + 2) * 3", 9),
        ("10 - 2 - 3", 5),
        ("1 < 2 && 2 <= 2 && 3 > 2 && 3 >= 3 && 1 != 2", True),
        ('"abc" < "abd"', True),
        ("1 == 1.0", True),
        ("true == true", True),
        ('"a" + "b" == "ab"', True),
        ("false || !false", True),
        ("1.5e2 == 150", True),
        ('"a\\"b\\\\c\\n\\t" == "a\\"b\\\\c\\n\\t"', True),
    ],
)
def test_operators(text: str, result: Value) -> None:
    assert value(text) == result


@pytest.mark.parametrize(
    ("text", "result"),
    [
        ('str_contains("hello", "ell")', True),
        ('str_starts_with("hello", "he")', True),
        ('str_ends_with("hello", "lo")', True),
        ('str_len("é")', 1),
        ('str_len("")', 0),
        ('str::to_lowercase("ÀB")', "àb"),
        ('str::to_uppercase("ab")', "AB"),
        ('str::trim("  a b \\n")', "a b"),
        ("min(3, 1, 2)", 1),
        ("max(3, 1.5)", 3.0),
        ('if(n > 3, "big", "small")', "big"),
        ("if(false, 1 / 0, 2)", 2),  # only the chosen branch runs
        ("false && 1 / 0 == 1", False),  # short-circuit
        ("true || 1 / 0 == 1", True),
    ],
)
def test_checklist_15_functions(text: str, result: Value) -> None:
    assert value(text) == result


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('1 < "a"', "cannot compare"),
        ('"a" + 1', "needs numbers"),
        ("1 / 0", "division by zero"),
        ("1 % 0", "division by zero"),
        ("9223372036854775807 + 1", "integer overflow"),
        ("-(-9223372036854775807 - 1)", "integer overflow"),
        ("3037000500 * 3037000500", "integer overflow"),
        ("1 && true", "needs booleans"),
        ("!1", "needs a boolean"),
        ("str_len(1)", "needs string arguments"),
        ('str_len("a", "b")', "takes 1 arguments"),
        ("min()", "at least one argument"),
        ('min("a")', "needs numbers"),
        ("if(1, 2, 3)", "boolean condition"),
        ("nope_var", "undefined variable nope_var"),
        ("big + big", "string exceeds 65536 bytes"),
    ],
)
def test_checklist_16_evaluation_errors(text: str, message: str) -> None:
    with pytest.raises(ConditionError, match=message):
        value(text)


def test_checklist_16_different_types_are_unequal() -> None:
    assert value('1 == "1"') is False
    assert value('true != "true"') is True
    assert value("1 == true") is False


def test_float_corners_follow_ieee() -> None:
    assert value("1.0 / 0") == math.inf
    assert math.isnan(value("0.0 / 0"))  # type: ignore[arg-type]
    assert value("2.0 ^ 5000") == math.inf
    assert math.isnan(value("(0 - 8) ^ 0.5"))  # type: ignore[arg-type]


def balanced(depth: int) -> str:
    return "1" if depth == 0 else f"({balanced(depth - 1)} + {balanced(depth - 1)})"


def test_checklist_17_non_boolean_result_and_node_budget() -> None:
    with pytest.raises(ConditionError, match="must be a boolean"):
        evaluate(parse("1 + 1"), ENV)
    cond = parse(balanced(9) + " > 0")  # 1,025 nodes, 11 deep, 3 KB
    budget = Budget(max_steps=1000)
    with pytest.raises(ConditionError, match="more than 1000 nodes"):
        evaluate(cond, ENV, budget)
    assert budget.steps == 1001
    ticks = iter(range(10**6))
    slow = Budget(timeout_s=0.1, clock=lambda: next(ticks) * 0.01)  # each reading 10 ms later
    with pytest.raises(ConditionError, match="longer than 100 ms"):
        evaluate(cond, ENV, slow)


@pytest.mark.parametrize(
    "text",
    [
        "a = 1", "a += 1", "a; b", "()", "(1, 2)", "f x", "nope(1)", "str::nope(1)", "1 < 2 < 3", "",
        "1.", "1e5", "'single'", '"unterminated', '"\\q"', "a.b", "x[0]", "lambda: 1",
        "__import__('os').system('id')", "open('/etc/passwd')", "str::trim::x", "true()",
        "9223372036854775808", "a::b",
    ],
)  # fmt: skip
def test_checklist_14_parse_errors(text: str) -> None:
    with pytest.raises(ConditionSyntaxError):
        parse(text)


def test_size_and_depth_bounds() -> None:
    with pytest.raises(ConditionSyntaxError, match="exceeds 4096 bytes"):
        parse("x" * 4097)
    assert parse("x" * 4096).variables == {"x" * 4096}
    deep = "!" * CONDITION_MAX_DEPTH + "true"
    with pytest.raises(ConditionSyntaxError, match="nests deeper than 100"):
        parse(deep)
    assert value("!" * (CONDITION_MAX_DEPTH - 1) + "true") is False
    assert value("(" * 100 + "1" + ")" * 100) == 1  # parentheses are not nodes, but count as nesting
    with pytest.raises(ConditionSyntaxError, match="nests deeper"):
        parse("(" * 101 + "1" + ")" * 101)
    assert parse('"((((" == ")"').variables == frozenset()  # inside strings they do not count


def test_positions_in_parse_errors() -> None:
    with pytest.raises(ConditionSyntaxError) as err:
        parse("a == = 1")
    assert err.value.column == 6
