"""`Turn`: the store-queue order of pipelined events on one connection (decisions 2a, 74)."""

from __future__ import annotations

import asyncio

from buzz.relay.turns import Turn


async def test_a_turn_waits_for_the_previous_release_only() -> None:
    first = Turn(None)
    second = Turn(first)
    third = Turn(second)
    order: list[str] = []

    async def queue(name: str, turn: Turn) -> None:
        await turn.wait()
        order.append(name)
        turn.release()

    tasks = [asyncio.create_task(queue("third", third)), asyncio.create_task(queue("second", second))]
    await asyncio.sleep(0)
    assert order == []  # nobody ahead of `first` has been released
    first.release()
    await asyncio.gather(*tasks)
    assert order == ["second", "third"]


async def test_a_released_turn_lets_the_next_pass_at_once_and_release_is_idempotent() -> None:
    first = Turn(None)
    first.release()
    first.release()
    second = Turn(first)
    await asyncio.wait_for(second.wait(), timeout=5)
    assert second._prev is None  # the chain behind it is dropped


async def test_a_cancelled_wait_does_not_break_a_later_one() -> None:
    first = Turn(None)
    second = Turn(first)
    waiting = asyncio.create_task(second.wait())
    await asyncio.sleep(0)
    waiting.cancel()
    await asyncio.gather(waiting, return_exceptions=True)
    assert waiting.cancelled()
    again = asyncio.create_task(second.wait())
    await asyncio.sleep(0)
    assert not again.done()
    first.release()
    await asyncio.wait_for(again, timeout=5)
    assert again.done() and again.exception() is None
