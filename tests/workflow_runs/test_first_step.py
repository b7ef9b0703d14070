"""A door's run commits its first step with its creation (decision 328), and a `send_message`
step its message with its start (decision 383): between the trigger and the first message there
is one engine write — the run, its 46001, the first step's `running` record with its built
effect, its 46002 and the message. On the real relay and store; the store's methods are wrapped
to record calls in order, never replaced."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from buzz.client import RelayClient
from buzz.workflows.host import Settings
from tests.support.deadline import scaled
from tests.support.relay import Identity, RunningRelay
from tests.workflow_runs.support import relay_with, run_end, run_tag, save, spy, wait_for
from tests.workspace.helpers import create_channel, message

ON_MESSAGE = """name: Echo
trigger: {on: message_posted, filter: 'str_contains(trigger_text, "go")'}
steps:
  - {id: a, action: send_message, text: "first"}
  - {id: b, action: send_message, text: "second"}
"""

DELAY_FIRST = """name: Later
trigger: {on: message_posted, filter: 'str_contains(trigger_text, "later")'}
steps:
  - {id: nap, action: delay, duration: 1}
  - {id: b, action: send_message, text: "after"}
"""


async def _run_started(
    running: RunningRelay, client: RelayClient, owner: Identity, definition: str, text: str
) -> tuple[list[tuple[str, Any]], str, str | None]:
    """The store's writes, inserts and takes recorded in order (name, first argument) from now
    on, `definition` saved in a new channel and `text` posted there: the record, the channel and
    the id of the run the message started."""
    log: list[tuple[str, Any]] = []
    for name in ("workflow_write", "insert", "workflow_take_runs"):
        spy(running.relay.store, name, log, lambda args, name=name: (name, args[0] if args else None))
    channel = await create_channel(client, owner)
    await save(client, owner, channel, definition)
    await message(client, owner, channel, text)
    [created] = await wait_for(client, [{"kinds": [46001], "#h": [channel]}], lambda evs: len(evs) == 1)
    return log, channel, run_tag(created)


def _writes(log: list[tuple[str, Any]], run_id: str | None) -> list[Any]:
    """The recorded `workflow_write`s that touch run `run_id`, in order."""
    return [w for name, w in log if name == "workflow_write" and any(r.id == run_id for r in w.runs)]


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
async def test_the_first_message_is_stored_with_its_run(backend: str, tmp_path: Path) -> None:
    owner = Identity.new()
    async with relay_with(backend, tmp_path, Settings()) as running, running.client(owner) as client:
        log, channel, run_id = await _run_started(running, client, owner, ON_MESSAGE, "go now")
        assert run_id is not None
        assert (await run_end(client, channel, run_id, timeout=scaled(30))).kind == 46005
        writes = _writes(log, run_id)
        first = writes[0]
        # the run, its 46001 and the first step's start with its effect: one transaction
        assert [e.event.kind for e in first.events] == [46001, 46002]
        assert [s.idx for s in first.steps] == [0] and '"effect"' in first.steps[0].data
        assert first.take is not None and first.runs[0].status == "running"
        # the first message in the same transaction, as the relay's own path stores it
        assert [(s.event.content, s.channel_id) for s, _ in first.published] == [("first", channel)]
        assert [s.event.content for s, _ in writes[1].published] == ["second"]  # with b's start
        relay_messages = [a.event.content for n, a in log if n == "insert" and a.event.kind == 9
                          and a.event.pubkey == running.relay.pubkey]  # fmt: skip
        assert relay_messages == []  # neither was stored by an insert of its own
        assert not [a for n, a in log if n == "workflow_take_runs" and run_id in a]
        # the creation with step a; then a done, b started with its message, b done and the end
        # (the last step's outcome is known with its start, decision 383)
        assert len(writes) == 2
        msgs = await wait_for(client, [{"kinds": [9], "#h": [channel], "authors": [running.relay.pubkey]}],
                              lambda evs: len(evs) == 2)  # fmt: skip
        assert sorted(m.content for m in msgs) == ["first", "second"]
        life = await client.query([{"kinds": list(range(46001, 46008)), "#h": [channel]}])
        mine = sorted((e for e in life if run_tag(e) == run_id), key=lambda e: json.loads(e.content)["seq"])
        assert [e.kind for e in mine] == [46001, 46002, 46003, 46002, 46003, 46005]


async def test_a_first_step_that_waits_is_created_alone(tmp_path: Path) -> None:
    owner = Identity.new()
    async with relay_with("sqlite", tmp_path, Settings()) as running, running.client(owner) as client:
        log, channel, run_id = await _run_started(running, client, owner, DELAY_FIRST, "later please")
        assert (await run_end(client, channel, run_id, timeout=scaled(30))).kind == 46005
        writes = _writes(log, run_id)
        assert [e.event.kind for e in writes[0].events] == [46001] and writes[0].steps == ()
        assert [e.event.kind for e in writes[1].events] == [46002]
