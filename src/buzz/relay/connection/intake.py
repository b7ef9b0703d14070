"""Frame intake of a `Connection`: each frame read is parsed, holds a handler slot and its
bytes of the inbound budget, and joins the connection's ordered lane, whose worker hands
each message on in arrival order (EVENTs that may be pipelined to `publish`, the rest to
`Connection._dispatch`). Source rules: relay.md §7.1 items 1 and 6 (text frames, handler
saturation)."""

from __future__ import annotations

import asyncio
import logging
import sys
from collections import deque
from collections.abc import Awaitable
from typing import TYPE_CHECKING, Any

from buzz.core import messages
from buzz.core.errors import BuzzError
from buzz.core.messages import AuthMessage, EventMessage, ProtocolViolation, parse_client_message
from buzz.core.stored import StoredEvent
from buzz.relay.auth.session import Session
from buzz.relay.connection.publish import (
    INDEPENDENT_CHANNEL_KINDS,
    PIPELINABLE_KINDS,
    forget,
    reads_of,
    writes_of,
)

if TYPE_CHECKING:
    from buzz.relay.connection.host import ConnectionHost

log = logging.getLogger(__name__)

TEXT_FRAMES = "send NIP-01 messages as JSON in text frames"  # ends a refused binary frame's NOTICE
INBOUND_BUFFER_BYTES = 8 << 20  # frames read ahead of their handling, per connection


class Intake:
    """The lane and the budgets of frames read but not yet handled (state in `Connection`)."""

    __slots__ = ()
    relay: ConnectionHost
    _loop: asyncio.AbstractEventLoop
    _lane: deque[tuple[Any, Any, int, Any]] | None
    _lane_task: asyncio.Task[None] | None
    _inbound_bytes: int
    _inbound_room: asyncio.Future[None] | None
    _slots: int
    _auth_handling: int

    async def _inbound_budget(self) -> None:
        """Stop reading while the frames read but not handled hold INBOUND_BUFFER_BYTES: the
        client's own TCP window then holds the rest (backpressure, nothing dropped)."""
        while self._inbound_bytes > INBOUND_BUFFER_BYTES:
            if self._inbound_room is None:
                self._inbound_room = self._loop.create_future()
            await self._inbound_room

    def _on_frame(self, frame: str, binary: bool = False) -> None:
        """Parse one frame and queue it on the lane; `binary` when it came as a binary frame
        (then a refusal says so: a client that sends binary may not know NIP-01 is text)."""
        if not self._acquire_slot():
            self.send(messages.notice("rate-limited: too many concurrent requests"))
            return
        try:
            msg = parse_client_message(frame)
        except ProtocolViolation as exc:
            self._release_slot()
            if binary and type(exc) is ProtocolViolation:
                self.send(messages.notice(f"invalid message: binary frame: {exc.args[0]}; {TEXT_FRAMES}"))
            else:
                self.send(messages.notice(str(exc)))
            return
        except Exception:  # never let odd input kill the connection or leak its slot
            log.exception("unexpected failure parsing a frame")
            self._release_slot()
            self.send(messages.notice("invalid message: could not be parsed"))
            return
        early: Any = None
        checked: tuple[Session, int] | None = None
        if isinstance(msg, EventMessage):
            early, checked = self._start_verify(msg)
        elif isinstance(msg, AuthMessage):
            self._auth_handling += 1  # read: in time for the AUTH deadline (`_auth_answered`)
        size = sys.getsizeof(frame)
        self._inbound_bytes += size
        if self._lane is None:
            self._lane = deque()
        self._lane.append((msg, early, size, checked))
        if self._lane_task is None:
            self._lane_task = self._loop.create_task(self._lane_worker())

    # Handler slots (relay.md §7.1 item 6) are counted per connection as well, so whatever a
    # connection still holds when it closes (queued or in-flight messages) goes back at once.
    def _acquire_slot(self) -> bool:
        if not self.relay.try_acquire_handler():
            return False
        self._slots += 1
        return True

    def _release_slot(self) -> None:
        if self._slots > 0:
            self._slots -= 1
            self.relay.release_handler()

    def _release_all_slots(self) -> None:
        while self._slots > 0:
            self._release_slot()

    def _start_verify(
        self, msg: EventMessage
    ) -> tuple[Awaitable[StoredEvent] | BuzzError, tuple[Session, int] | None]:
        """Run the cheap prechecks now and start verification in the pool (pipelining). Also
        returns the session and clock second they passed with."""
        session = self.session
        try:
            second = self.relay.ingest.precheck(msg.event, session)
        except BuzzError as exc:
            # Kept in the lane for its text only. Its traceback would hold this frame and so
            # `_on_frame`'s, whose `early` is this exception: a cycle that keeps the whole frame
            # (up to the frame limit) alive until a full garbage collection (soak: +70 MB).
            return exc.with_traceback(None), None
        return self.relay.ingest.verify_soon(msg.event, self._loop), (session, second)

    async def _lane_worker(self) -> None:
        """Handles the lane's frames in order; started by `_on_frame`, ends when the lane is
        empty (the check and the end are one synchronous step: no frame is left behind)."""
        try:
            await self._run_lane()
        finally:
            self._lane_task = None
            if not self._lane:
                self._lane = None

    async def _run_lane(self) -> None:
        while self._lane:
            msg, early, size, checked = self._lane.popleft()
            try:
                if isinstance(msg, EventMessage) and not isinstance(early, BuzzError):
                    kind = msg.event.kind
                    if kind in PIPELINABLE_KINDS:
                        await self._pipeline(msg, early, size, checked, writes_of(msg.event))
                        continue
                    if kind in INDEPENDENT_CHANNEL_KINDS:
                        # It reads what an event still in flight writes: that one commits first
                        # (and every event before it: commits keep arrival order).
                        reads = reads_of(msg.event)
                        while self._writes_inflight(reads):
                            await self._settled_once()
                        await self._pipeline(msg, early, size, checked, writes_of(msg.event))
                        continue
                if self._inflight:
                    # Anything else may read what those events write: let them commit first.
                    await self._inflight_at_most(0)
                await self._handle(msg, early, size)
            except BaseException:  # cancelled at close, maybe before its check was awaited
                forget(early)
                raise

    async def _handle(self, msg: Any, early: Any, size: int) -> None:
        try:
            await self._dispatch(msg, early)
        except Exception:
            log.exception("handler failed")
            if isinstance(msg, EventMessage):
                self.send(messages.ok(msg.event.id, False, "error: internal server error"))
        finally:
            self._frame_done(size)

    def _frame_done(self, size: int) -> None:
        """A frame is handled: its handler slot and its bytes of the inbound budget go back."""
        self._release_slot()
        self._inbound_bytes -= size
        room, self._inbound_room = self._inbound_room, None
        if room is not None and not room.done():
            room.set_result(None)
