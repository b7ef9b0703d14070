"""The pure policies behind issue 14: members mode and not-admitted notices, solo queue items and
the retry schedule, the steer limit, prompt verdicts, claim states and the stderr levels."""

from __future__ import annotations

import logging

from buzz.agent.acp_pool import stderr_level
from buzz.agent.claims import CLAIMED, DONE, RELEASED, claim_event, claim_state, next_claim_at
from buzz.agent.event_view import is_notice
from buzz.agent.gates import (
    ADMITTED,
    Decision,
    NoticeLimiter,
    author_decision,
    describe_policy,
    grant_command,
    not_admitted_text,
)
from buzz.agent.queue import Item, WorkQueue, backoff_s
from buzz.agent.sessions import Verdict, prompt_verdict, steer_allowed
from buzz.agent.status import notice
from buzz.core.event import Event
from buzz.core.keys import generate_secret_key, public_key

SK = generate_secret_key()
A, OWN, X = public_key(SK), "0" * 64, "1" * 64
C = "11111111-1111-4111-8111-111111111111"


def test_members_mode_asks_for_membership_but_never_in_dms() -> None:
    assert author_decision("members", "stream", OWN, A, OWN) is Decision.ADMIT
    assert author_decision("members", "stream", X, A, OWN) is Decision.CHECK_MEMBER
    assert author_decision("members", "dm", X, A, OWN) is Decision.CHECK_SIBLING  # the DM rule
    assert author_decision("owner-only", "stream", X, A, OWN) is Decision.CHECK_SIBLING
    assert author_decision("nobody", "stream", OWN, A, OWN) is Decision.DROP


def test_policy_texts_and_the_hourly_notice_limit() -> None:
    assert describe_policy("owner-only", "Olivia") == "my owner (Olivia) and agents they own"
    text = not_admitted_text("owner-only", "Olivia", "npub1agent", "npub1asker")
    assert "my owner (Olivia)" in text and "Ask my owner Olivia for access" in text
    assert "`buzz agents managed set --agent npub1agent --respond-to allowlist --allow npub1asker`" in text
    # in `members` an allowlist would shut the members out: `anyone` is the way in
    members = not_admitted_text("members", "Olivia", "npub1agent", "npub1asker")
    assert "`buzz agents managed set --agent npub1agent --respond-to anyone`" in members
    limiter = NoticeLimiter(window_s=3600, capacity=2)
    assert limiter.allow(X, C, 0.0) and not limiter.allow(X, C, 3599.0) and limiter.allow(X, C, 3600.0)
    assert limiter.allow(OWN, C, 0.0) and limiter.allow(A, C, 0.0)  # capacity 2: the oldest pair goes
    assert limiter.allow(X, C, 3601.0)


def _item(content: str, solo: bool = False) -> Item:
    return Item(Event.create(SK, 9, content, [["h", C]]), C, 0.0, solo=solo)


def test_solo_items_are_batches_of_their_own_and_never_steered_in() -> None:
    queue = WorkQueue()
    for item in (_item("a"), _item("b", solo=True), _item("c", solo=True), _item("d"), _item("e")):
        queue.push(item)
    first = queue.take(C)
    assert [i.event.content for i in first.items] == ["a"]
    assert queue.take_pending(C) == []  # a solo item at the head is not taken by steering
    queue.finish(C)
    assert [[i.event.content for i in queue.take(C).items] for _ in range(1)] == [["b"]]
    queue.finish(C)
    assert [i.event.content for i in queue.take(C).items] == ["c"]
    queue.finish(C)
    assert [i.event.content for i in queue.take(C).items] == ["d", "e"]


def test_retry_schedule_follows_the_flags() -> None:
    assert [backoff_s(n, 0.5) for n in (1, 2, 3)] == [0.5, 1.0, 2.0]
    assert backoff_s(20) == 300.0
    queue = WorkQueue(max_attempts=2, backoff_base=0.5)
    queue.push(_item("x"))
    queue.take(C)
    assert queue.fail(C, 0.0).delay_s == 0.5  # type: ignore[union-attr]
    queue.take(C)
    assert type(queue.fail(C, 1.0)).__name__ == "DeadLetter"


def test_steer_limit() -> None:
    assert [steer_allowed(n, 2) for n in range(4)] == [True, True, False, False]
    assert not steer_allowed(0, 0)


def test_prompt_verdicts_match_a_result_to_its_prompt() -> None:
    def verdict(**kw: object) -> Verdict:
        args = {"failed": False, "alive": True, "stop_reason": "end_turn", "cancel_sent": False}
        return prompt_verdict(**{**args, "updates": 1, "after_cancel": False, **kw})  # type: ignore[arg-type]

    assert verdict() is Verdict.ANSWERED
    assert verdict(cancel_sent=True, stop_reason="cancelled") is Verdict.INTERRUPTED
    assert verdict(cancel_sent=True, failed=True, stop_reason=None) is Verdict.INTERRUPTED  # item 8
    assert verdict(cancel_sent=True, failed=True, alive=False) is Verdict.FAILED  # timeouts kill
    assert verdict(cancel_sent=True) is Verdict.ANSWERED  # it finished before the cancel
    assert verdict(stop_reason="cancelled") is Verdict.STALE  # a cancel nobody sent (item 9)
    assert verdict(after_cancel=True, updates=0) is Verdict.STALE  # item 11
    assert verdict(after_cancel=True, updates=2) is Verdict.ANSWERED
    assert verdict(failed=True, stop_reason=None) is Verdict.FAILED


def test_claims_are_deterministic_and_build_on_releases() -> None:
    target = "ab" * 32
    one, two = claim_event(SK, target, 100, "claimed"), claim_event(SK, target, 100, "claimed")
    assert one.id == two.id  # two processes build the same event: the relay keeps one
    assert next_claim_at(None, 100) == 100
    assert next_claim_at(claim_state([one]), 100) is None
    released = claim_event(SK, target, 101, RELEASED)
    assert next_claim_at(claim_state([one, released]), 100) == 102


def test_a_claim_that_did_not_move_for_a_lease_is_taken_over_and_done_is_final() -> None:
    target = "ab" * 32
    beat = claim_state([claim_event(SK, target, 100, CLAIMED), claim_event(SK, target, 130, CLAIMED)])
    assert next_claim_at(beat, 100) is None  # alive as far as anyone knows
    assert next_claim_at(beat, 100, stale=(CLAIMED, 120)) is None  # it moved since the last look
    assert next_claim_at(beat, 100, stale=beat) == 131  # it did not: one id for every watcher
    done = claim_state([claim_event(SK, target, 131, DONE)])
    assert next_claim_at(done, 100, stale=done) is None


def test_notices_carry_the_marker() -> None:
    event = notice(SK, C, "cd" * 32, "retrying")
    assert is_notice(event) and ["buzz:agent-notice", "retrying"] in [list(t) for t in event.tags]
    assert not is_notice(Event.create(SK, 9, "hi", [["h", C]]))


def test_agent_tracebacks_are_debug_lines() -> None:
    lines = [
        "Error handling request",
        "Traceback (most recent call last):",
        '  File "x.py", line 1, in <module>',
        "    boom()",
        "",
        "During handling of the above exception, another exception occurred:",
        "ConnectionRefusedError: [Errno 111] Connect call failed",
        "next line",
    ]
    state, levels = False, []
    for line in lines:
        level, state = stderr_level(line, state)
        levels.append(level)
    assert levels == [logging.INFO] + [logging.DEBUG] * 6 + [logging.INFO]


def test_a_cancel_of_the_harness_is_never_an_unasked_one() -> None:
    """Issue 24 item 2: a prompt the harness cancelled itself, or one that a cancel of the
    harness held from the previous prompt ended, is interrupted (never stale, never failed)."""

    def verdict(**kw: object) -> Verdict:
        args = {"failed": False, "alive": True, "stop_reason": "end_turn", "cancel_sent": False}
        return prompt_verdict(**{**args, "updates": 1, "after_cancel": False, **kw})  # type: ignore[arg-type]

    # a cancel held from the previous prompt (it crossed that answer) ended this one
    assert verdict(cancel_held=True, stop_reason="cancelled") is Verdict.INTERRUPTED
    assert verdict(cancel_held=True, failed=True, stop_reason=None) is Verdict.INTERRUPTED
    assert verdict(cancel_held=True, failed=True, alive=False) is Verdict.FAILED
    assert verdict(cancel_held=True) is Verdict.ANSWERED
    # our cancel of this very prompt: an end_turn with no update is an answer, not a stale one
    assert verdict(cancel_sent=True, updates=0) is Verdict.ANSWERED
    # ... unless the agent's previous answer was `cancelled` (a stale answer): fold it
    assert verdict(cancel_sent=True, updates=0, after_cancel=True) is Verdict.INTERRUPTED


def test_the_grant_command_names_only_a_mode_that_admits_the_asker() -> None:
    """Decision 373: the hint never lists modes (`owner-only`, `nobody`) that would still refuse."""
    for mode in ADMITTED:
        command = grant_command(mode, "npub1agent", X).split()
        suggested = command[command.index("--respond-to") + 1]
        allow = [command[command.index("--allow") + 1]] if "--allow" in command else []
        assert suggested in ADMITTED, (mode, command)  # one mode, not a list
        assert author_decision(suggested, "stream", X, A, OWN, allow) is Decision.ADMIT, (mode, command)
