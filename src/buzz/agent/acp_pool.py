"""The pool of ACP agent subprocesses (agents.md §4.1, §4.14).

`AgentProcess` is one subprocess spoken to over ACP (JSON-RPC 2.0, one object per line on
stdin/stdout) through the `agent-client-protocol` package's client side: its `Connection` and
client router (`HarnessClient` answers the agent's requests). Requests are sent as plain
JSON params rather than through the package's typed wrappers, because `session/new` must be
able to carry a top-level `systemPrompt` (§4.10 item 4, `field` transport) that the package's
`NewSessionRequest` model has no field for. The subprocess's stderr is logged, never parsed.

Traps handled here: the package's spawn helper trims the environment to a few variables (the
harness must pass its whole environment plus the `BUZZ_*` identity, §4.14 item 2); an unread
stderr pipe would block the agent once full; the default 64 KiB line limit is too small.

`prompt` enforces the idle timeout (no output line for `idle_timeout` s; every stdout or stderr
line resets it) and the absolute `max_turn_duration`; on either it sends `session/cancel`,
waits `CANCEL_GRACE_S` (10 s) for the answer, then kills the subprocess (the pool respawns it
with backoff and re-initializes it). A requested cancel (owner command, steering) gets the same
grace before the kill.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from acp.client.router import build_client_router
from acp.connection import Connection, StreamEvent
from acp.exceptions import RequestError

from buzz.agent.acp_client import HarnessClient

log = logging.getLogger(__name__)

PROTOCOL_VERSION = 1
CANCEL_GRACE_S = 10.0
INIT_TIMEOUT_S = 60.0
REQUEST_TIMEOUT_S = 60.0
STDIO_LIMIT = 50 * 1024 * 1024
RESPAWN_BACKOFF_S = (1.0, 2.0, 4.0, 8.0, 16.0, 30.0)
CLIENT_NAME = "buzz-agent-harness"


Block = str | dict[str, Any]
"""One ACP prompt content block: text, or a ready block (`resource_link`, `image`, `resource`)."""


class AgentGone(Exception):
    """The subprocess is not running (never started, exited, or killed)."""


@dataclass
class PromptOutcome:
    """How one `session/prompt` ended. `stop_reason` is the agent's answer (None when it gave
    none); `failure` names an error, crash or timeout (the turn then counts as failed)."""

    stop_reason: str | None = None
    usage: dict[str, Any] | None = None
    failure: str | None = None
    cancel_requested: bool = False
    updates: int = 0  # `session/update` notifications for this session while it was pending

    @property
    def failed(self) -> bool:
        return self.failure is not None


@dataclass
class _PromptWatch:
    cancel: asyncio.Event = field(default_factory=asyncio.Event)


class AgentProcess:
    """One agent subprocess and its ACP connection."""

    def __init__(
        self,
        index: int,
        command: str,
        args: Sequence[str],
        env: Mapping[str, str],
        cwd: str,
        permission_mode: str,
        on_update: Callable[[int, str, dict[str, Any]], None],
    ) -> None:
        self.index = index
        self.command = command
        self.args = list(args)
        self.env = dict(env)
        self.cwd = cwd
        self.client = HarnessClient(permission_mode, lambda sid, upd: on_update(index, sid, upd))
        self.proc: asyncio.subprocess.Process | None = None
        self.conn: Connection | None = None
        self.init_result: dict[str, Any] = {}
        self.last_activity = time.monotonic()
        self._tasks: list[asyncio.Task[Any]] = []
        self._watches: dict[str, _PromptWatch] = {}
        self._updates: dict[str, int] = {}
        self._in_traceback = False
        self.heartbeat_session: Any = None  # SessionState of this subprocess's heartbeat session

    # -- lifecycle -------------------------------------------------------------------------
    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.returncode is None and self.conn is not None

    @property
    def supports_close(self) -> bool:
        """`initialize` advertised `agentCapabilities.sessionCapabilities.close` (ACP
        `session/close`, unstable in agent-client-protocol 0.12)."""
        caps = self.init_result.get("agentCapabilities")
        sessions = caps.get("sessionCapabilities") if isinstance(caps, dict) else None
        return isinstance(sessions, dict) and sessions.get("close") is not None

    @property
    def prompt_capabilities(self) -> dict[str, Any]:
        """`agentCapabilities.promptCapabilities` of the `initialize` answer (`image`,
        `embeddedContext`, …), {} when not given."""
        caps = self.init_result.get("agentCapabilities")
        prompt = caps.get("promptCapabilities") if isinstance(caps, dict) else None
        return prompt if isinstance(prompt, dict) else {}

    @property
    def protocol_version(self) -> int:
        value = self.init_result.get("protocolVersion")
        return value if isinstance(value, int) else 0

    async def start(self) -> None:
        """Spawn the subprocess and send `initialize`. Raises AgentGone on failure."""
        try:
            self.proc = await asyncio.create_subprocess_exec(
                self.command,
                *self.args,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                env=self.env,
                cwd=self.cwd,
                limit=STDIO_LIMIT,
            )
        except OSError as exc:
            raise AgentGone(f"cannot start {self.command!r}: {exc}") from None
        assert self.proc.stdin is not None and self.proc.stdout is not None
        router = build_client_router(self.client)  # type: ignore[arg-type]
        self.conn = Connection(router, self.proc.stdin, self.proc.stdout, observers=[self._observe])
        self._tasks = [asyncio.create_task(self._log_stderr(), name=f"acp-stderr-{self.index}")]
        self.touch()
        params = {
            "protocolVersion": PROTOCOL_VERSION,
            "clientCapabilities": {},
            "clientInfo": {"name": CLIENT_NAME, "version": _version()},
        }
        try:
            result = await self.request("initialize", params, timeout=INIT_TIMEOUT_S)
        except (AgentGone, RequestError, TimeoutError) as exc:
            await self.kill()
            raise AgentGone(f"initialize failed: {exc}") from None
        self.init_result = result if isinstance(result, dict) else {}
        log.info("agent[%d] initialized (protocolVersion %s)", self.index, self.protocol_version)

    def touch(self) -> None:
        self.last_activity = time.monotonic()

    def _observe(self, event: StreamEvent) -> None:
        if event.direction.value != "incoming":
            return
        self.touch()
        # Counted here, in read order, so a prompt's result is never judged before the updates
        # that preceded it on the wire (the router handles notifications in tasks).
        msg = event.message
        if msg.get("method") == "session/update":
            params = msg.get("params")
            sid = params.get("sessionId") if isinstance(params, dict) else None
            if isinstance(sid, str):
                self._updates[sid] = self._updates.get(sid, 0) + 1

    async def _log_stderr(self) -> None:
        assert self.proc is not None and self.proc.stderr is not None
        while True:
            try:
                line = await self.proc.stderr.readline()
            except (ValueError, OSError):
                continue
            if not line:
                return
            self.touch()
            text = line.decode("utf-8", "replace").rstrip()
            level, self._in_traceback = stderr_level(text, self._in_traceback)
            log.log(level, "agent[%d] stderr: %s", self.index, text)

    async def kill(self) -> None:
        """Stop the subprocess (close stdin, wait 2 s, terminate, kill) and drop the connection."""
        conn, proc = self.conn, self.proc
        self.conn = None
        for watch in self._watches.values():
            watch.cancel.set()
        if conn is not None:
            with contextlib.suppress(Exception):
                await conn.close()
        if proc is not None and proc.returncode is None:
            with contextlib.suppress(Exception):
                if proc.stdin is not None:
                    proc.stdin.close()
            for step in (proc.terminate, proc.kill):
                try:
                    await asyncio.wait_for(proc.wait(), 2.0)
                    break
                except TimeoutError:
                    with contextlib.suppress(ProcessLookupError):
                        step()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(proc.wait(), 2.0)
        for task in self._tasks:
            task.cancel()
            with contextlib.suppress(BaseException):
                await task
        self._tasks = []

    # -- JSON-RPC --------------------------------------------------------------------------
    async def request(
        self, method: str, params: dict[str, Any], timeout: float | None = REQUEST_TIMEOUT_S
    ) -> Any:
        """Send one request and return its `result`. Raises RequestError (error answer),
        AgentGone (no subprocess / connection lost) or TimeoutError."""
        if not self.alive or self.conn is None:
            raise AgentGone(f"agent[{self.index}] is not running")
        try:
            return await asyncio.wait_for(self.conn.send_request(method, params), timeout)
        except ConnectionError as exc:
            raise AgentGone(f"agent[{self.index}] connection lost: {exc}") from None

    async def notify(self, method: str, params: dict[str, Any]) -> None:
        if self.conn is None:
            return
        with contextlib.suppress(ConnectionError, OSError):
            await self.conn.send_notification(method, params)

    def prompting(self, session_id: str) -> bool:
        """True while a `session/prompt` of `session_id` is pending."""
        return session_id in self._watches

    async def cancel(self, session_id: str) -> bool:
        """Ask the agent to finish `session_id`'s pending prompt (`session/cancel`), and start
        the grace period after which `prompt` kills the subprocess. Only a pending prompt is
        cancelled: an idle session gets nothing (an agent may keep a stray cancel and abort its
        next prompt, issue 14 item 9). Returns whether a prompt was pending."""
        watch = self._watches.get(session_id)
        if watch is None:
            return False
        watch.cancel.set()
        return True

    async def close_session(self, session_id: str) -> bool:
        """`session/close` when the agent advertised it (issue 14 item 10); False when it did
        not or the request failed (the caller then restarts the subprocess)."""
        if not self.supports_close or not self.alive:
            return False
        try:
            await self.request("session/close", {"sessionId": session_id}, timeout=10.0)
        except (AgentGone, RequestError, TimeoutError) as exc:
            log.warning("agent[%d]: session/close failed: %s", self.index, exc)
            return False
        self._updates.pop(session_id, None)
        return True

    async def prompt(
        self, session_id: str, blocks: Sequence[Block], idle_timeout: float, max_duration: float
    ) -> PromptOutcome:
        """`session/prompt` with the content blocks (a string is a text block), enforcing the
        idle timeout and max duration."""
        content = [{"type": "text", "text": b} if isinstance(b, str) else b for b in blocks]
        params = {"sessionId": session_id, "prompt": content}
        if not self.alive or self.conn is None:
            return PromptOutcome(failure=f"agent[{self.index}] is not running")
        watch = _PromptWatch()
        self._watches[session_id] = watch
        updates_before = self._updates.get(session_id, 0)
        task = asyncio.create_task(self.conn.send_request("session/prompt", params))
        started = time.monotonic()
        self.touch()
        cancel_sent_at: float | None = None
        timed_out = False
        outcome = PromptOutcome()
        try:
            while True:
                now = time.monotonic()
                if watch.cancel.is_set() and cancel_sent_at is None:
                    cancel_sent_at = now
                    outcome.cancel_requested = True
                    log.debug("agent[%d]: session/cancel %s", self.index, session_id)
                    await self.notify("session/cancel", {"sessionId": session_id})
                if cancel_sent_at is None:
                    deadline = min(self.last_activity + idle_timeout, started + max_duration)
                    waiter = asyncio.create_task(watch.cancel.wait())
                    waiting = {task, waiter}
                else:
                    deadline = cancel_sent_at + CANCEL_GRACE_S
                    waiter, waiting = None, {task}
                wait_s = max(deadline - now, 0.0)
                done, _ = await asyncio.wait(waiting, timeout=wait_s, return_when=asyncio.FIRST_COMPLETED)
                if waiter is not None:
                    waiter.cancel()
                if task in done:
                    finished = self._finish(task, outcome)
                    if timed_out:  # §4.14 item 3: a timed-out subprocess is replaced either way
                        log.warning("agent[%d]: %s; killing the subprocess", self.index, outcome.failure)
                        await self.kill()
                    return finished
                if watch.cancel.is_set() and cancel_sent_at is None:
                    continue
                now = time.monotonic()
                if cancel_sent_at is not None and now >= cancel_sent_at + CANCEL_GRACE_S:
                    reason = outcome.failure or "no answer to session/cancel within 10 s"
                    return await self._abandon(task, outcome, reason)
                if cancel_sent_at is None and now >= started + max_duration:
                    outcome.failure = f"max turn duration ({max_duration:g} s) reached"
                    timed_out = True
                    watch.cancel.set()
                elif cancel_sent_at is None and now >= self.last_activity + idle_timeout:
                    outcome.failure = f"idle timeout ({idle_timeout:g} s without agent output)"
                    timed_out = True
                    watch.cancel.set()
        finally:
            outcome.updates = self._updates.get(session_id, 0) - updates_before
            self._watches.pop(session_id, None)
            if not task.done():
                task.cancel()

    def _finish(self, task: asyncio.Task[Any], outcome: PromptOutcome) -> PromptOutcome:
        try:
            result = task.result()
        except RequestError as exc:
            outcome.failure = outcome.failure or f"agent error {exc.code}: {exc}"
            return outcome
        except (ConnectionError, asyncio.CancelledError) as exc:
            outcome.failure = outcome.failure or f"agent[{self.index}] exited during the turn ({exc})"
            return outcome
        if isinstance(result, dict):
            reason = result.get("stopReason")
            outcome.stop_reason = reason if isinstance(reason, str) else None
            usage = result.get("usage")
            outcome.usage = usage if isinstance(usage, dict) else None
        if outcome.stop_reason is None and outcome.failure is None:
            outcome.failure = "malformed session/prompt result"
        return outcome

    async def _abandon(self, task: asyncio.Task[Any], outcome: PromptOutcome, reason: str) -> PromptOutcome:
        outcome.failure = reason
        log.warning("agent[%d]: %s; killing the subprocess", self.index, reason)
        task.cancel()
        await self.kill()
        return outcome


TRACEBACK_HEAD = "Traceback (most recent call last):"
CHAINED_TRACEBACK = ("During handling of the above exception", "The above exception was the direct cause")


def stderr_level(line: str, in_traceback: bool) -> tuple[int, bool]:
    """The log level of one agent stderr line and whether a traceback continues after it:
    a Python traceback (its head, indented frames and the closing exception line) is logged
    at DEBUG so a failing backend costs one log line per attempt, not sixty (issue 14 item 2);
    every other line at INFO."""
    if line.startswith(TRACEBACK_HEAD) or line.startswith(CHAINED_TRACEBACK):
        return logging.DEBUG, True
    if in_traceback:
        return logging.DEBUG, line[:1].isspace() or not line
    return logging.INFO, False


def _version() -> str:
    try:
        from importlib.metadata import version

        return version("buzz")
    except Exception:
        return "0"


class AgentPool:
    """`size` subprocesses (1–32) with the same command and environment (§4.14 item 1).

    Workers are started eagerly by `start_all` or on first use by `ensure` (lazy pool). A dead
    worker is respawned by `ensure` after a backoff of 1, 2, 4, 8, 16, then 30 s.
    """

    def __init__(self, size: int, factory: Callable[[int], AgentProcess]) -> None:
        self.factory = factory
        self.processes: list[AgentProcess | None] = [None] * size
        self.busy: list[bool] = [False] * size
        self._failures: list[int] = [0] * size
        self._not_before: list[float] = [0.0] * size
        self._locks = [asyncio.Lock() for _ in range(size)]
        self.limit = size  # workers in use; the owner's 30177 moves it live (jobs spec §10.1)

    @property
    def size(self) -> int:
        return self.limit

    def free(self) -> list[int]:
        return [i for i in range(self.limit) if not self.busy[i]]

    def resize(self, size: int) -> None:
        """Use `size` workers from now on: growing adds workers (started on first use),
        shrinking stops offering the ones above it (`surplus` lists those to stop once idle)."""
        while len(self.processes) < size:
            self.processes.append(None)
            self.busy.append(False)
            self._failures.append(0)
            self._not_before.append(0.0)
            self._locks.append(asyncio.Lock())
        self.limit = size

    def surplus(self) -> list[int]:
        """Idle running workers above the limit: to be stopped."""
        return [
            i
            for i in range(self.limit, len(self.processes))
            if self.processes[i] is not None and not self.busy[i]
        ]

    def process(self, index: int) -> AgentProcess | None:
        proc = self.processes[index]
        return proc if proc is not None and proc.alive else None

    async def ensure(self, index: int) -> AgentProcess:
        """A running, initialized process for worker `index`, respawning after backoff.
        Raises AgentGone when it cannot be started."""
        async with self._locks[index]:
            proc = self.processes[index]
            if proc is not None and proc.alive:
                return proc
            if proc is not None:
                await proc.kill()
            delay = self._not_before[index] - time.monotonic()
            if delay > 0:
                await asyncio.sleep(delay)
            fresh = self.factory(index)
            try:
                await fresh.start()
            except AgentGone:
                self._backoff(index)
                raise
            self.processes[index] = fresh
            self._failures[index] = 0
            return fresh

    def _backoff(self, index: int) -> None:
        n = self._failures[index]
        self._failures[index] = n + 1
        self._not_before[index] = time.monotonic() + RESPAWN_BACKOFF_S[min(n, len(RESPAWN_BACKOFF_S) - 1)]

    async def restart(self, index: int) -> None:
        """Stop worker `index` on purpose (its sessions are retired); the next `ensure` starts
        a fresh one without a backoff."""
        async with self._locks[index]:
            proc, self.processes[index] = self.processes[index], None
            if proc is not None:
                log.info("agent[%d]: restarting to close its old sessions", index)
                await proc.kill()

    def mark_dead(self, index: int) -> None:
        """Record that worker `index` died (crash or kill): its next `ensure` waits a backoff."""
        self._backoff(index)

    async def start_all(self) -> None:
        """Start every worker now (not `--lazy-pool`); failures are logged and retried later."""
        results = await asyncio.gather(*(self.ensure(i) for i in range(self.limit)), return_exceptions=True)
        for i, result in enumerate(results):
            if isinstance(result, BaseException):
                log.warning("agent[%d] did not start: %s", i, result)

    async def close(self) -> None:
        await asyncio.gather(*(p.kill() for p in self.processes if p is not None), return_exceptions=True)
