"""A running job's progress as 43003 (jobs spec §6.6 item 1), and its final text.

The agent's `session/update` notifications of the job's session come here: `plan` updates
become the plan (each entry's content as title), `tool_call` / `tool_call_update` titles the
message `Working: <title>`, and `agent_message_chunk` text streamed after the last tool call
is the final answer. Titles are redacted (`buzz.jobs.redact`); tool arguments, outputs and
error text never leave. At most one 43003 per `interval` seconds, only when something
changed, `seq` continuing from the job's last 43003 on the relay; `flush` sends the last
pending change before the result.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from buzz.agent.status import failure_level
from buzz.client import PublishResult
from buzz.core.event import Event
from buzz.jobs import build
from buzz.jobs import limits as L
from buzz.jobs.redact import redact_title

log = logging.getLogger(__name__)

RELAY_GAP_S = 1.2  # the relay takes one 43003 per second per job (measured at its end)
SEND_TIMEOUT_S = 10.0  # the relay link's publish timeout


class Progress:
    def __init__(
        self,
        publish: Callable[[Event], Awaitable[PublishResult]],
        secret: str,
        channel: str,
        job_id: str,
        *,
        interval: float = L.PROGRESS_MIN_INTERVAL_S,
        last_seq: int = 0,
    ) -> None:
        self._publish = publish
        self._secret = secret
        self.channel = channel
        self.job_id = job_id
        self.interval = interval
        self.seq = last_seq
        self.message: str | None = None
        self.plan: list[dict[str, str]] = []
        self.final: list[str] = []
        self._pending = False  # a change not yet published
        self._wake = asyncio.Event()  # set on a change, and to stop the loop
        self._stopping = False
        self._sent_at = 0.0
        self._task: asyncio.Task[None] | None = None
        self.sent = 0

    # -- updates (called from the ACP reader: never blocks) ------------------------------------
    def on_update(self, update: dict[str, Any]) -> None:
        kind = update.get("sessionUpdate")
        if kind == "plan":
            entries = update.get("entries")
            if isinstance(entries, list):
                plan = []
                for entry in entries[: L.PLAN_MAX_ITEMS]:
                    if not isinstance(entry, dict):
                        continue
                    title = redact_title(str(entry.get("content") or ""))
                    status = entry.get("status")
                    if title:
                        plan.append(
                            {"title": title, "status": status if status in L.PLAN_STATUSES else "pending"}
                        )
                if plan != self.plan:
                    self.plan = plan
                    self._changed()
        elif kind in ("tool_call", "tool_call_update"):
            self.final = []  # the answer is the text after the last tool call
            title = update.get("title")
            if isinstance(title, str) and title.strip():
                message = "Working: " + redact_title(title)
                if message != self.message:
                    self.message = message
                    self._changed()
        elif kind == "agent_message_chunk":
            content = update.get("content")
            if (
                isinstance(content, dict)
                and content.get("type") == "text"
                and isinstance(content.get("text"), str)
            ):
                self.final.append(content["text"])

    @property
    def final_text(self) -> str:
        return "".join(self.final).strip()

    # -- publishing ---------------------------------------------------------------------------
    def _changed(self) -> None:
        self._pending = True
        self._wake.set()

    def start(self) -> None:
        self._stopping = False
        self._task = asyncio.create_task(self._loop(), name=f"progress-{self.job_id[:8]}")

    async def stop(self) -> None:
        """End the pacing loop, letting a send in flight finish. The loop is told by a flag,
        not only by a cancel: a cancel that lands as the send's answer arrives can be lost
        (`asyncio.wait_for` in Python 3.11), and a loop that missed it would wait for ever."""
        task, self._task = self._task, None
        if task is None:
            return
        self._stopping = True
        self._wake.set()
        await asyncio.wait({task}, timeout=RELAY_GAP_S + SEND_TIMEOUT_S)
        if not task.done():
            task.cancel()

    async def _loop(self) -> None:
        while not self._stopping:
            await self._wake.wait()
            self._wake.clear()
            if self._stopping:
                return
            if not self._pending:
                continue
            wait = self._sent_at + self.interval - time.monotonic()
            if wait > 0:
                with contextlib.suppress(TimeoutError):  # a stop ends the wait early
                    await asyncio.wait_for(self._stop_or_never(), wait)
                if self._stopping:
                    return
            await self._send()

    async def _stop_or_never(self) -> None:
        while not self._stopping:
            self._wake.clear()
            await self._wake.wait()

    async def flush(self) -> None:
        """Send the pending change now (keeping the relay's one-per-second rule)."""
        await self.stop()
        if self._pending:
            wait = self._sent_at + RELAY_GAP_S - time.monotonic()
            if wait > 0:
                await asyncio.sleep(wait)
            await self._send()

    async def say(self, message: str) -> None:
        """One 43003 with `message` now (e.g. `retrying, attempt 2`)."""
        self.message = message
        self._changed()
        await self.flush()

    async def _send(self) -> None:
        self._pending = False
        message = self.message or next(
            (f"Working: {p['title']}" for p in self.plan if p["status"] == "in_progress"), "Working"
        )
        self.seq += 1
        try:
            template = build.progress(
                self.channel, self.job_id, seq=self.seq, message=message, plan=self.plan
            )
            event = Event.create(self._secret, template.kind, template.content, template.tags)
            result = await self._publish(event)
        except Exception as exc:  # progress never fails a job
            # `invalid: job is completed`: the job ended while this was on its way
            log.log(failure_level(exc), "job %s: progress not published: %s", self.job_id[:12], exc)
            return
        finally:
            self._sent_at = time.monotonic()
        if result.accepted:
            self.sent += 1
        else:
            self.seq -= 1  # not stored: the next one reuses the number
            log.info("job %s: progress refused: %s", self.job_id[:12], result.message)
