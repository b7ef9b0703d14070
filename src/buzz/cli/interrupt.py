"""Ctrl-C in `buzz`: at any moment one JSON line on stderr and exit 130 (128 + SIGINT), never a
traceback or click's `Aborted!` (exit 1), which scripts and agents cannot parse.

`install()` is the first thing `buzz.cli.main.main` does, before click or any command module
is imported, so a Ctrl-C during start-up is covered too. At the first Ctrl-C the error object
(`{"error": "interrupted", …}`, its category in `buzz.cli.output.EXIT_CODES`) is written at
once, and the process ends with 130 by one of three paths:

- inside an import, at once (`os._exit`): an exception raised into an extension module's
  initialisation can crash the interpreter (orjson's does, with SIGSEGV), and start-up has
  nothing to clean up;
- inside `run(coro)`, the event loop of a one-shot command, the main task is cancelled, so
  every `async with` and `finally` unwinds inside the loop (connections close, nothing is left
  half-written) and no other task is hit by a stray exception;
- anywhere else (argument parsing, synchronous work such as a backup), SystemExit(130) is
  raised, which nothing catches by mistake (`except Exception` does not, click passes it), so
  `finally` blocks still run (a partial backup is removed).

The clean-up gets CLEANUP_GRACE_S; a second Ctrl-C, or a clean-up still running then (a thread
stuck in a DNS lookup that asyncio.run waits for), ends the process at once. After the line,
`report` and `fail` print nothing more (`interrupted()`), so the line stays the only one.
Commands whose normal end is Ctrl-C (`messages watch`, `relay serve`, `huddle join`, `agent
run`) take SIGINT over while they run (`kept()` puts this handler back afterwards).

Imports only `os` and `signal` at first: it runs before anything else of buzz is loaded, and
every import before the handler is in place is time a Ctrl-C would still print a traceback.
"""

from __future__ import annotations

import os
import signal

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing before the handler
if TYPE_CHECKING:
    import asyncio
    from collections.abc import Coroutine
    from types import FrameType, TracebackType
    from typing import Any, TypeVar

    T = TypeVar("T")

EXIT_INTERRUPTED = 130  # 128 + SIGINT, what a shell reports for a process Ctrl-C ended
CLEANUP_GRACE_S = 2.0  # after the JSON line, how long clean-up may take before the process ends
# The error object of agents.md §2.1 item 2 for an interruption (the category's exit code is
# in EXIT_CODES): written by hand, so this module needs no JSON library.
LINE = (
    b'{"error":"interrupted","message":"interrupted (Ctrl-C): stopped before finishing","retryable":false}\n'
)

_interrupted = False
_details = b""  # more fields for LINE (`note`): `,"job_id":"…"`


def note(fields: bytes) -> None:
    """Add the fields of the JSON object `fields` (encoded by the caller) to the line a Ctrl-C
    writes from now on: what the person needs to act on what was left running (a job's id)."""
    global _details
    inner = fields.strip()[1:-1]
    _details = b"," + inner if inner else b""


def _line() -> bytes:
    return LINE[:-2] + _details + LINE[-2:] if _details else LINE


def interrupted() -> bool:
    """Whether Ctrl-C came (and its line is out): nothing else may be reported after it."""
    return _interrupted


def _first_interrupt() -> None:
    """Write the line and arm the clean-up bound; a second Ctrl-C ends the process at once."""
    global _interrupted
    if _interrupted:
        os._exit(EXIT_INTERRUPTED)
    _interrupted = True
    # On a terminal the line starts on a fresh one, after the `^C` the terminal echoed; with
    # stderr closed the exit code still says it. (No contextlib: not loaded this early.)
    try:  # noqa: SIM105
        os.write(2, (b"\n" if os.isatty(2) else b"") + _line())
    except OSError:
        pass
    import threading

    timer = threading.Timer(CLEANUP_GRACE_S, os._exit, (EXIT_INTERRUPTED,))
    timer.daemon = True
    timer.start()


def _on_sigint(signum: int, frame: FrameType | None) -> None:
    _first_interrupt()
    if _importing(frame):
        os._exit(EXIT_INTERRUPTED)
    raise SystemExit(EXIT_INTERRUPTED)


def _importing(frame: FrameType | None) -> bool:
    """Whether the interrupted code runs inside an import (importlib's frames are on the stack)."""
    while frame is not None:
        if frame.f_code.co_filename.startswith("<frozen importlib._bootstrap"):
            return True
        frame = frame.f_back
    return False


def install() -> None:
    """Make SIGINT give LINE and exit 130 from now on (main thread only, as signals are)."""
    signal.signal(signal.SIGINT, _on_sigint)


class kept:
    """Around an event loop that takes SIGINT over (`loop.add_signal_handler`): when the loop
    closes, asyncio puts Python's default handler back, which would print a traceback again;
    this puts ours back instead (if it was installed)."""

    def __enter__(self) -> None:
        self.previous = signal.getsignal(signal.SIGINT)

    def __exit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self.previous is _on_sigint and signal.getsignal(signal.SIGINT) is not _on_sigint:
            signal.signal(signal.SIGINT, _on_sigint)


def _cancel(task: asyncio.Task[Any]) -> None:
    _first_interrupt()
    task.cancel()


def run(main: Coroutine[Any, Any, T]) -> T:
    """`asyncio.run(main)` for a one-shot command: Ctrl-C cancels `main` inside the loop (see
    the module text) and the process exits 130, whatever `main` does with the cancellation."""
    import asyncio

    async def guarded() -> T:
        task = asyncio.current_task()
        assert task is not None
        if installed():
            asyncio.get_running_loop().add_signal_handler(signal.SIGINT, _cancel, task)
        return await main

    with kept():
        try:
            result = asyncio.run(guarded())
        except BaseException:
            if _interrupted:
                raise SystemExit(EXIT_INTERRUPTED) from None
            raise
    if _interrupted:  # `main` swallowed its cancellation: it still did not finish its work
        raise SystemExit(EXIT_INTERRUPTED)
    return result


def installed() -> bool:
    """Whether this handler answers SIGINT (the `buzz` process; not a test driving click)."""
    return signal.getsignal(signal.SIGINT) is _on_sigint
