"""Shared steps of the workflow engine's end-to-end tests (a real relay on a loopback port)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import uuid
from collections.abc import AsyncIterator, Callable, Sequence
from pathlib import Path
from typing import Any

from buzz.client import RelayClient
from buzz.core.event import Event
from buzz.workflows.host import Settings
from tests.support.relay import Identity, RunningRelay, relay_on

LIFECYCLE = list(range(46001, 46008))


def spy(
    store: Any, name: str, calls: list[Any], note: Callable[[tuple[Any, ...]], Any] = lambda args: args
) -> None:
    """Wrap `store.<name>` (the real method still runs) so that each call first appends
    `note(its positional arguments)` to `calls`."""
    real = getattr(store, name)

    async def recorded(*args: Any, **kwargs: Any) -> Any:
        calls.append(note(args))
        return await real(*args, **kwargs)

    setattr(store, name, recorded)


def new_id() -> str:
    return str(uuid.uuid4())


def definition_event(who: Identity, channel_id: str, yaml: str, workflow_id: str | None = None,
                     *extra: Sequence[str]) -> Event:  # fmt: skip
    wid = workflow_id or new_id()
    return Event.create(who.secret, 30620, yaml, [["d", wid], ["h", channel_id], *extra])


async def save(client: RelayClient, who: Identity, channel_id: str, yaml: str,
               workflow_id: str | None = None) -> tuple[str, dict[str, Any]]:  # fmt: skip
    """Publish a definition; returns (workflow id, the `response:` JSON)."""
    event = definition_event(who, channel_id, yaml, workflow_id)
    result = await client.publish(event)
    assert result.accepted, result.message
    assert result.message.startswith("response:"), result.message
    body = json.loads(result.message.removeprefix("response:"))
    return body["workflow_id"], body


async def trigger(
    client: RelayClient, who: Identity, workflow_id: str, inputs: dict[str, Any] | None = None
) -> str:
    content = json.dumps(inputs) if inputs is not None else ""
    result = await client.publish(Event.create(who.secret, 46020, content, [["d", workflow_id]]))
    assert result.accepted, result.message
    return json.loads(result.message.removeprefix("response:"))["run_id"]


def run_tag(event: Event) -> str | None:
    return next((t[1] for t in event.tags if t[0] == "run"), None)


async def wait_for(
    client: RelayClient, filters: list[dict[str, Any]], predicate: Any, timeout: float = 20.0
) -> list[Event]:
    """Query until `predicate(events)` holds (the engine works after the OK)."""
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout
    while True:
        events = await client.query(filters)
        if predicate(events):
            return events
        if loop.time() > end:
            raise AssertionError(f"timed out; last: {[(e.kind, e.content[:80]) for e in events]}")
        await asyncio.sleep(0.1)


async def run_end(client: RelayClient, channel_id: str, run_id: str, timeout: float = 20.0) -> Event:
    """The run's 46005/46006/46007 once it is there."""
    events = await wait_for(
        client, [{"kinds": [46005, 46006, 46007], "#h": [channel_id]}],
        lambda evs: any(run_tag(e) == run_id for e in evs), timeout,
    )  # fmt: skip
    return next(e for e in events if run_tag(e) == run_id)


@contextlib.asynccontextmanager
async def relay_with(backend: str, tmp_path: Path, settings: Settings) -> AsyncIterator[RunningRelay]:
    """A relay on `backend` ("sqlite" or "postgres") whose engine runs with `settings`."""
    if backend == "postgres":
        from tests.support.pg import temp_database

        async with temp_database() as dsn, relay_on(tmp_path, dsn, workflows=settings) as running:
            yield running
    else:
        async with relay_on(tmp_path, workflows=settings) as running:
            yield running
