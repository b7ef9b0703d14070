"""Conditions (`trigger.filter`, a step's `if`): parse once, evaluate many (spec/workflows.md §4).

`compile_condition(text)` parses with lark's LALR parser over our own grammar
(`condition.lark`) straight into a small closed set of AST nodes: nothing here calls
`eval`, `exec` or `compile`, and no Python object is ever reached by name. The parse is
refused at save time for a syntax error, an unknown function, more than
`CONDITION_MAX_BYTES` of text or nesting deeper than `CONDITION_MAX_DEPTH` (which bounds the
evaluator's recursion). `evaluate(condition, variables)` walks the tree under a `Budget` of
evaluated nodes and wall time, and with every string it makes capped in size, so a hostile
expression ends with a `ConditionError`, never a hang.

Values are Python `bool`, `int` (kept inside 64 bits), `float` and `str`; `bool` is never
taken for an `int`.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from importlib.resources import files
from typing import Union

from lark import Lark, Token, Transformer
from lark.exceptions import LarkError, UnexpectedCharacters, UnexpectedEOF, UnexpectedInput, VisitError

from buzz.workflows.limits import (
    CONDITION_MAX_BYTES,
    CONDITION_MAX_DEPTH,
    CONDITION_MAX_NODES,
    CONDITION_MAX_STRING_BYTES,
    CONDITION_TIMEOUT_MS,
    INT64_MAX,
    INT64_MIN,
)

Value = Union[bool, int, float, str]  # noqa: UP007 (a runtime alias)


class ConditionSyntaxError(ValueError):
    """The text is not a condition (§4.1, §4.4): refused at save time. `column` is 1-based."""

    def __init__(self, message: str, column: int | None = None) -> None:
        super().__init__(f"{message} at column {column}" if column else message)
        self.message = message
        self.column = column


class ConditionError(ValueError):
    """Evaluation failed (§4.2–§4.5): a filter does not match, an `if` fails the run."""


# -- the AST ---------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Lit:
    value: Value
    depth: int = 1


@dataclass(frozen=True, slots=True)
class Var:
    name: str
    depth: int = 1


@dataclass(frozen=True, slots=True)
class Unary:
    op: str  # "-" or "!"
    operand: Node
    depth: int


@dataclass(frozen=True, slots=True)
class Binary:
    op: str  # + - * / % ^ == != < <= > >=
    left: Node
    right: Node
    depth: int


@dataclass(frozen=True, slots=True)
class Logic:
    op: str  # "&&" or "||"
    left: Node
    right: Node
    depth: int


@dataclass(frozen=True, slots=True)
class Call:
    name: str
    args: tuple[Node, ...]
    depth: int


Node = Union[Lit, Var, Unary, Binary, Logic, Call]  # noqa: UP007


@dataclass(frozen=True)
class Condition:
    """A parsed condition: its source text and its tree."""

    source: str
    root: Node
    variables: frozenset[str]  # every variable it names (for the editor and the validator)


# -- parsing ---------------------------------------------------------------------------------
def _deeper(*children: Node) -> int:
    depth = 1 + max(c.depth for c in children)
    if depth > CONDITION_MAX_DEPTH:
        raise ConditionSyntaxError(f"condition nests deeper than {CONDITION_MAX_DEPTH} levels")
    return depth


def _unescape(token: str) -> str:
    out, i, body = [], 0, token[1:-1]
    while i < len(body):
        ch = body[i]
        if ch == "\\":
            out.append({"n": "\n", "t": "\t"}.get(body[i + 1], body[i + 1]))
            i += 2
        else:
            out.append(ch)
            i += 1
    return "".join(out)


class _Build(Transformer):
    """Runs inside the LALR parser at each reduction (no parse tree is ever built)."""

    def int_lit(self, c: list[Token]) -> Lit:
        value = int(c[0])
        if value > INT64_MAX:
            raise ConditionSyntaxError("integer literal outside 64 bits", c[0].column)
        return Lit(value)

    def float_lit(self, c: list[Token]) -> Lit:
        value = float(c[0])
        if math.isinf(value):
            raise ConditionSyntaxError("float literal out of range", c[0].column)
        return Lit(value)

    def str_lit(self, c: list[Token]) -> Lit:
        return Lit(_unescape(str(c[0])))

    def true_lit(self, _c: list[Token]) -> Lit:
        return Lit(True)

    def false_lit(self, _c: list[Token]) -> Lit:
        return Lit(False)

    def var(self, c: list[Token]) -> Var:
        if "::" in c[0]:
            raise ConditionSyntaxError(f"unknown variable {c[0]}", c[0].column)
        return Var(str(c[0]))

    def args(self, c: list[Node]) -> tuple[Node, ...]:
        return tuple(c)

    def call(self, c: list) -> Call:
        name, args = str(c[0]), (c[1] if len(c) > 1 and c[1] is not None else ())
        if name not in FUNCTIONS:
            raise ConditionSyntaxError(f"unknown function {name}", c[0].column)
        return Call(name, args, _deeper(Lit(0), *args))

    def unary(self, c: list) -> Unary:
        return Unary(str(c[0]), c[1], _deeper(c[1]))

    def power(self, c: list) -> Binary:
        return Binary("^", c[0], c[1], _deeper(c[0], c[1]))

    def binary(self, c: list) -> Binary:
        return Binary(str(c[1]), c[0], c[2], _deeper(c[0], c[2]))

    compare = binary

    def and_op(self, c: list) -> Logic:
        return Logic("&&", c[0], c[1], _deeper(c[0], c[1]))

    def or_op(self, c: list) -> Logic:
        return Logic("||", c[0], c[1], _deeper(c[0], c[1]))


_GRAMMAR = files("buzz.workflows").joinpath("condition.lark").read_text(encoding="utf-8")
_PARSER = Lark(_GRAMMAR, parser="lalr", transformer=_Build(), maybe_placeholders=False)


def _variables(root: Node) -> frozenset[str]:
    names, todo = set(), [root]
    while todo:
        node = todo.pop()
        if isinstance(node, Var):
            names.add(node.name)
        elif isinstance(node, Unary):
            todo.append(node.operand)
        elif isinstance(node, Binary | Logic):
            todo += (node.left, node.right)
        elif isinstance(node, Call):
            todo += node.args
    return frozenset(names)


def _paren_depth(text: str) -> int:
    """The deepest parenthesis nesting outside string literals (a linear pre-scan: deep
    parentheses cost the parser eight reductions a level and add no node, so they are
    bounded before lark sees them)."""
    depth = deepest = 0
    in_string = escaped = False
    for ch in text:
        if in_string:
            escaped, in_string = (False, True) if escaped else (ch == "\\", ch != '"')
        elif ch == '"':
            in_string = True
        elif ch == "(":
            depth += 1
            deepest = max(deepest, depth)
        elif ch == ")":
            depth -= 1
    return deepest


def compile_condition(text: str) -> Condition:
    """Parse a condition. Raises ConditionSyntaxError (the save-time refusal of §3.8 item 2)."""
    if len(text.encode("utf-8", "surrogatepass")) > CONDITION_MAX_BYTES:
        raise ConditionSyntaxError(f"condition exceeds {CONDITION_MAX_BYTES} bytes")
    if _paren_depth(text) > CONDITION_MAX_DEPTH:
        raise ConditionSyntaxError(f"condition nests deeper than {CONDITION_MAX_DEPTH} levels")
    try:
        root = _PARSER.parse(text)
    except ConditionSyntaxError:
        raise
    except VisitError as exc:  # an error raised by a reduction, wrapped by lark
        if isinstance(exc.orig_exc, ConditionSyntaxError):
            raise exc.orig_exc from None
        raise ConditionSyntaxError("malformed condition") from None
    except UnexpectedCharacters as exc:
        raise ConditionSyntaxError(f"unexpected character {text[exc.pos_in_stream]!r}", exc.column) from None
    except UnexpectedEOF:
        raise ConditionSyntaxError("condition ends too early") from None
    except UnexpectedInput as exc:
        token = getattr(exc, "token", None)
        if token is not None and token.type == "$END":
            raise ConditionSyntaxError("condition ends too early") from None
        raise ConditionSyntaxError(f"unexpected {token!s}" if token else "syntax error", exc.column) from None
    except LarkError:
        raise ConditionSyntaxError("malformed condition") from None
    except RecursionError:  # unreachable with the depth bound; kept as a last fence
        raise ConditionSyntaxError("condition nests too deeply") from None
    return Condition(text, root, _variables(root))


# -- evaluation ------------------------------------------------------------------------------
@dataclass
class Budget:
    """What one evaluation may spend (§4.5 item 2); `steps` is read by tests and logs."""

    max_steps: int = CONDITION_MAX_NODES
    timeout_s: float = CONDITION_TIMEOUT_MS / 1000
    clock: Callable[[], float] = time.monotonic
    steps: int = 0
    deadline: float = field(default=0.0, repr=False)

    def start(self) -> None:
        self.steps = 0
        self.deadline = self.clock() + self.timeout_s

    def tick(self) -> None:
        self.steps += 1
        if self.steps > self.max_steps:
            raise ConditionError(f"condition evaluated more than {self.max_steps} nodes")
        if self.steps % 64 == 0 and self.clock() > self.deadline:
            raise ConditionError(f"condition took longer than {round(self.timeout_s * 1000)} ms")


def _kind(v: Value) -> str:
    t = type(v)
    return "boolean" if t is bool else "int" if t is int else "float" if t is float else "string"


def _int(v: int) -> int:
    if not INT64_MIN <= v <= INT64_MAX:
        raise ConditionError("integer overflow")
    return v


def _string(v: str) -> str:
    if (
        len(v) * 4 > CONDITION_MAX_STRING_BYTES
        and len(v.encode("utf-8", "surrogatepass")) > CONDITION_MAX_STRING_BYTES
    ):
        raise ConditionError(f"string exceeds {CONDITION_MAX_STRING_BYTES} bytes")
    return v


def _number(v: Value, op: str) -> int | float:
    if type(v) not in (int, float):
        raise ConditionError(f"{op} needs numbers, got {_kind(v)}")
    return v  # type: ignore[return-value]


def _float_div(a: float, b: float) -> float:
    if b == 0:
        return math.nan if a == 0 or math.isnan(a) else math.copysign(math.inf, a) * math.copysign(1.0, b)
    return a / b


def _arith(op: str, a: Value, b: Value) -> Value:
    if op == "+" and type(a) is str and type(b) is str:
        return _string(a + b)
    x, y = _number(a, op), _number(b, op)
    if op == "^":
        try:
            return math.pow(x, y)
        except OverflowError:
            odd = float(y).is_integer() and int(y) % 2 == 1
            return -math.inf if x < 0 and odd else math.inf
        except ValueError:  # a negative base with a fractional exponent
            return math.nan
    if type(x) is int and type(y) is int:
        if op in "/%" and y == 0:
            raise ConditionError("integer division by zero")
        if op == "/":
            q = abs(x) // abs(y)  # truncates toward zero, as Rust's i64 does
            return _int(q if (x < 0) == (y < 0) else -q)
        if op == "%":
            r = abs(x) % abs(y)
            return r if x >= 0 else -r
        return _int(x + y if op == "+" else x - y if op == "-" else x * y)
    fx, fy = float(x), float(y)
    if op == "/":
        return _float_div(fx, fy)
    if op == "%":
        return math.fmod(fx, fy) if fy != 0 else math.nan
    return fx + fy if op == "+" else fx - fy if op == "-" else fx * fy


def _equal(a: Value, b: Value) -> bool:
    ka, kb = _kind(a), _kind(b)
    if ka == kb or (ka in ("int", "float") and kb in ("int", "float")):
        return a == b
    return False


def _compare(op: str, a: Value, b: Value) -> bool:
    if op == "==":
        return _equal(a, b)
    if op == "!=":
        return not _equal(a, b)
    ka, kb = _kind(a), _kind(b)
    numeric = ka in ("int", "float") and kb in ("int", "float")
    if not numeric and not (ka == kb == "string"):
        raise ConditionError(f"cannot compare {ka} {op} {kb}")
    if op == "<":
        return a < b  # type: ignore[operator]
    if op == "<=":
        return a <= b  # type: ignore[operator]
    if op == ">":
        return a > b  # type: ignore[operator]
    return a >= b  # type: ignore[operator]


def _str_arg(name: str, v: Value) -> str:
    if type(v) is not str:
        raise ConditionError(f"{name} needs string arguments, got {_kind(v)}")
    return v  # type: ignore[return-value]


def _extreme(name: str, args: list[Value]) -> Value:
    if not args:
        raise ConditionError(f"{name} needs at least one argument")
    nums = [_number(a, name) for a in args]
    best = min(nums) if name == "min" else max(nums)
    return float(best) if any(type(n) is float for n in nums) else best


# name → (argument count, or None for one or more; the function of evaluated arguments)
FUNCTIONS: dict[str, tuple[int | None, Callable[[list[Value]], Value] | None]] = {
    "str_contains": (2, lambda a: _str_arg("str_contains", a[1]) in _str_arg("str_contains", a[0])),
    "str_starts_with": (
        2,
        lambda a: _str_arg("str_starts_with", a[0]).startswith(_str_arg("str_starts_with", a[1])),
    ),
    "str_ends_with": (2, lambda a: _str_arg("str_ends_with", a[0]).endswith(_str_arg("str_ends_with", a[1]))),
    "str_len": (1, lambda a: len(_str_arg("str_len", a[0]))),
    "str::to_lowercase": (1, lambda a: _string(_str_arg("str::to_lowercase", a[0]).lower())),
    "str::to_uppercase": (1, lambda a: _string(_str_arg("str::to_uppercase", a[0]).upper())),
    "str::trim": (1, lambda a: _str_arg("str::trim", a[0]).strip()),
    "min": (None, lambda a: _extreme("min", a)),
    "max": (None, lambda a: _extreme("max", a)),
    "if": (3, None),  # lazy: only the chosen branch is evaluated
}


def _eval(node: Node, env: Mapping[str, Value], budget: Budget) -> Value:
    budget.tick()
    if isinstance(node, Lit):
        return node.value
    if isinstance(node, Var):
        try:
            return env[node.name]
        except KeyError:
            raise ConditionError(f"undefined variable {node.name}") from None
    if isinstance(node, Logic):
        left = _eval(node.left, env, budget)
        if type(left) is not bool:
            raise ConditionError(f"{node.op} needs booleans, got {_kind(left)}")
        if left is (node.op == "||"):
            return left
        right = _eval(node.right, env, budget)
        if type(right) is not bool:
            raise ConditionError(f"{node.op} needs booleans, got {_kind(right)}")
        return right
    if isinstance(node, Unary):
        v = _eval(node.operand, env, budget)
        if node.op == "!":
            if type(v) is not bool:
                raise ConditionError(f"! needs a boolean, got {_kind(v)}")
            return not v
        n = _number(v, "-")
        return _int(-n) if type(n) is int else -n
    if isinstance(node, Binary):
        a = _eval(node.left, env, budget)
        b = _eval(node.right, env, budget)
        if node.op in ("==", "!=", "<", "<=", ">", ">="):
            return _compare(node.op, a, b)
        return _arith(node.op, a, b)
    arity, fn = FUNCTIONS[node.name]
    if arity is not None and len(node.args) != arity:
        raise ConditionError(f"{node.name} takes {arity} arguments, got {len(node.args)}")
    if fn is None:  # if(c, a, b)
        chosen = _eval(node.args[0], env, budget)
        if type(chosen) is not bool:
            raise ConditionError(f"if needs a boolean condition, got {_kind(chosen)}")
        return _eval(node.args[1] if chosen else node.args[2], env, budget)
    return fn([_eval(a, env, budget) for a in node.args])


def evaluate_value(
    condition: Condition, variables: Mapping[str, Value], budget: Budget | None = None
) -> Value:
    """The value of the expression, whatever its type (the editor's preview and the tests)."""
    budget = budget or Budget()
    budget.start()
    try:
        return _eval(condition.root, variables, budget)
    except ConditionError:
        raise
    except (OverflowError, ValueError, ZeroDivisionError) as exc:  # a float corner not mapped above
        raise ConditionError(f"arithmetic error: {exc}") from None


def evaluate(condition: Condition, variables: Mapping[str, Value], budget: Budget | None = None) -> bool:
    """Evaluate a condition to a boolean (§4.2 item 4). Raises ConditionError."""
    value = evaluate_value(condition, variables, budget)
    if type(value) is not bool:
        raise ConditionError(f"condition must be a boolean, got {_kind(value)}")
    return value  # type: ignore[return-value]
