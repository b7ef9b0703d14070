"""The YAML 1.2 core-schema loader (spec/workflows.md §3.2; checklist items 1 and 2)."""

from __future__ import annotations

import pytest

from buzz.workflows.yaml_tree import Mark, YamlError, load


def test_on_and_yes_are_strings_and_only_true_false_are_booleans() -> None:
    doc = load("trigger:\n  on: message_posted\na: yes\nb: off\nc: TRUE\nd: False\ne: y\n")
    assert doc.value == {
        "trigger": {"on": "message_posted"},
        "a": "yes",
        "b": "off",
        "c": True,
        "d": False,
        "e": "y",
    }


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("v: 0x1F", 31),
        ("v: 0o17", 15),
        ("v: -12", -12),
        ("v: 1.5e3", 1500.0),
        ("v: 1_000", "1_000"),  # YAML 1.1 only
        ("v: 2024-01-01", "2024-01-01"),  # no timestamps in the core schema
        ("v: ~", None),
        ("v:", None),
        ("v: 'true'", "true"),
        ('v: "12"', "12"),
        ("v: |\n  a\n  b\n", "a\nb\n"),
        ("v: 9223372036854775807", 2**63 - 1),
    ],
)
def test_plain_scalars_resolve_by_the_core_schema(text: str, value: object) -> None:
    assert load(text).value["v"] == value


@pytest.mark.parametrize(
    ("text", "message", "mark"),
    [
        ("a: &x 1\nb: *x\n", "anchors are not allowed", Mark(1, 4)),
        ("a: 1\nb: !!python/object:os.system x\n", "explicit tags are not allowed", Mark(2, 4)),
        ("a: !custom 1\n", "explicit tags are not allowed", Mark(1, 4)),
        ("a: 1\nb:\n  c: 1\n  c: 2\n", "duplicate key 'c'", Mark(4, 3)),
        ("a: 1\n---\nb: 2\n", "more than one YAML document", Mark(2, 1)),
        ("- a\n", "the document must be a mapping", Mark(1, 1)),
        ("1: a\n", "mapping keys must be strings", Mark(1, 1)),
        ("? [a]\n: b\n", "mapping keys must be strings", Mark(1, 3)),
        ("a: 9223372036854775808\n", "integer outside the signed 64-bit range", Mark(1, 4)),
        ("a: .inf\n", ".inf is not a JSON number", Mark(1, 4)),
        ("a: b: c\n", "mapping values are not allowed here", Mark(1, 5)),
        ("a:\n\tb: 1\n", "cannot start any token", Mark(2, 1)),
        ("x: " + "[" * 40 + "]" * 40, "nesting deeper than 32 levels", None),
    ],
)
def test_refusals_name_line_and_column(text: str, message: str, mark: Mark | None) -> None:
    with pytest.raises(YamlError) as err:
        load(text)
    assert message in err.value.message
    if mark is not None:
        assert err.value.mark == mark
        assert str(mark) in str(err.value)


def test_every_node_has_a_position() -> None:
    doc = load("name: x\nsteps:\n  - id: a\n    action: delay\n")
    assert doc.marks[("steps", 0, "action")] == Mark(4, 13)
    assert doc.key_marks[("steps", 0, "action")] == Mark(4, 5)
    assert doc.mark(("steps", 0, "missing")) == Mark(3, 5)  # the nearest existing ancestor
