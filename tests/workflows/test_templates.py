"""Template fields (spec/workflows.md §5; checklist items 21 and 22)."""

from __future__ import annotations

import pytest

from buzz.core.nip19 import npub
from buzz.workflows.templates import Scope, TemplateError, check, is_literal, render
from tests.workflows.support import ALICE

SCOPE = Scope(
    {"text": "héllo {{trigger.author}}", "author": ALICE, "n": "3", "is_reply": False, "with-dash": "d"},
    {
        "a": {"event_id": "e1", "count": 2, "ok": True, "none": None, "ratio": 0.5},
        "w": {"json": {"items": [{"id": 7}, {"id": 8}]}, "body": "x" * 2000},
    },
)


@pytest.mark.parametrize(
    ("text", "out"),
    [
        ("{{trigger.text}}", "héllo {{trigger.author}}"),  # substituted text is not re-expanded
        ("{{ steps.a.output.event_id }}", "e1"),
        ("{{steps.w.output.json.items.0.id}}", "7"),
        ("{{steps.w.output.json.items.1}}", '{"id":8}'),
        ("{{steps.w.output.json}}", '{"items":[{"id":7},{"id":8}]}'),
        ("{{steps.a.output.count}}/{{steps.a.output.ok}}/{{steps.a.output.ratio}}", "2/true/0.5"),
        ("[{{steps.a.output.none}}]", "[]"),
        ("{{trigger.is_reply}}", "false"),
        ("{{trigger.with-dash}}", "d"),
        ("{{trigger.nope}}", "{{trigger.nope}}"),
        ("{{steps.zz.output.x}}", "{{steps.zz.output.x}}"),
        ("{{steps.w.output.json.items.9.id}}", "{{steps.w.output.json.items.9.id}}"),
        ("a {{trigger.text", "a {{trigger.text"),
        ("{{trigger.n}} and {{trigger.n", "3 and {{trigger.n"),
        ("{{ hello }} {{trigger.n}}", "{{ hello }} 3"),
        ("{{ foo | shout }}", "{{ foo | shout }}"),  # not a path: literal, filters unread
        ("no braces", "no braces"),
        ("", ""),
    ],
)
def test_checklist_21_paths(text: str, out: str) -> None:
    assert render(text, SCOPE) == out


def test_checklist_22_filters() -> None:
    assert render("{{trigger.author | npub}}", SCOPE) == npub(ALICE)
    assert render("{{trigger.author|truncate_pubkey}}", SCOPE) == npub(ALICE)
    assert render("{{trigger.text | truncate(3)}}", SCOPE) == "hél"  # code points
    assert render("{{ trigger.text | truncate( 0 ) }}", SCOPE) == ""
    assert render("{{trigger.author | truncate(64) | npub | truncate(9)}}", SCOPE) == npub(ALICE)[:9]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{{trigger.text | shout}}", "unknown template filter 'shout'"),
        ("{{trigger.text | truncate(x)}}", "malformed truncate filter"),
        ("{{trigger.text | truncate(-1)}}", "malformed truncate filter"),
        ("{{trigger.text | truncate(100001)}}", "exceeds 100000"),
        ("{{trigger.text | npub}}", "npub needs a 64-hex public key"),
        (
            "{{trigger.nope | shout}}",
            "unknown template filter",
        ),  # a path, even unresolved: filters are checked
    ],
)
def test_checklist_22_filter_errors(text: str, message: str) -> None:
    with pytest.raises(TemplateError, match=message):
        render(text, SCOPE)


def test_save_time_check_and_literal_detection() -> None:
    check("{{trigger.text | truncate(3)}} {{ not a path }}")
    with pytest.raises(TemplateError):
        check("{{steps.a.output.x | upper}}")
    assert is_literal("plain {{ not a path }}") and not is_literal("{{trigger.text}}")


def test_output_is_capped() -> None:
    text = "{{steps.w.output.body}}" * 10
    assert len(render(text, SCOPE)) == 20_000
    with pytest.raises(TemplateError, match="exceeds 19999 bytes"):
        render(text, SCOPE, max_bytes=19_999)
