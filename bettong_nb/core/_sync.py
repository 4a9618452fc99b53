"""Run a coroutine to completion from sync code — in a script or under a running event loop.

Why a private loop in a worker thread and not nest-asyncio: nest-asyncio (archived; its fork is
nest-asyncio2) patches the event loop of the user's whole kernel, changing how every other
library's coroutines are scheduled, and it does not make widget clicks arrive during a blocking
cell anyway (measured: no strategy that blocks the cell lets a click through). The worker loop
costs one thread hop per call (tens of microseconds, see bench/), leaves the caller's loop
untouched, and keeps one loop for all sync calls, so httpx connection pools are reused across
runs. Context variables (redaction switch, listeners) are copied into the task.

Ctrl-C (or a notebook's stop button on a blocking cell) cancels the task at once and raises
:class:`Interrupted`, which IPython shows as one line; a coroutine that handles its cancellation
and returns (a batch returning what finished) returns instead. A sync tool that holds the worker
loop gets the cancellation raised inside it, so the wait is about a second whatever the run is
doing (a call blocked in C code, like ``time.sleep``, ends first).

Awaited runs (``await agent.arun(...)``, ``await session.arun(...)``, ``await agent.amap(...)``)
go through :func:`awaited`: by default it just awaits, and an environment with a stop button of
its own installs a runner (:func:`install_runner`; ``%load_ext bettong_nb`` does, so Stop ends
such a cell as it ends a ``%%agent`` cell). The core never learns what that environment is.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import threading
from typing import Any, Awaitable, Callable, Coroutine, TypeVar

__all__ = ["run_sync", "Interrupted", "INTERRUPTED", "awaited", "install_runner"]

INTERRUPTED = "interrupted — the session is unchanged"
STOP_WAIT_S = 0.5  # how long a cancelled task may take to end before it is stopped harder


class Interrupted(KeyboardInterrupt):
    """A run ended by Ctrl-C or the stop button; nothing of it was kept (a session is as it was
    before). IPython shows it as one line, not a traceback."""

    def __init__(self, message: str = INTERRUPTED):
        super().__init__(message)

    def _render_traceback_(self) -> list[str]:
        return [str(self)]

T = TypeVar("T")
Runner = Callable[[Coroutine[Any, Any, Any]], Awaitable[Any]]
_runner: list[Runner | None] = [None]


def install_runner(runner: Runner | None) -> Runner | None:
    """Await every run started from async code through ``runner(coro)`` (None: plainly);
    returns the previous runner."""
    previous = _runner[0]
    _runner[0] = runner
    return previous


async def awaited(coro: Coroutine[Any, Any, T]) -> T:
    """Await one run's coroutine, through the installed runner when there is one."""
    runner = _runner[0]
    return await (coro if runner is None else runner(coro))


_loop: asyncio.AbstractEventLoop | None = None
_thread: threading.Thread | None = None
_lock = threading.Lock()


def _worker_loop() -> asyncio.AbstractEventLoop:
    global _loop, _thread
    with _lock:
        if _loop is None or not _thread or not _thread.is_alive():
            _loop = asyncio.new_event_loop()
            _thread = threading.Thread(target=_loop.run_forever, name="bettong-nb-loop", daemon=True)
            _thread.start()
        return _loop


def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro`` on the worker loop and wait. Ctrl-C (KeyboardInterrupt) cancels it."""
    loop = _worker_loop()
    if threading.current_thread() is _thread:
        coro.close()
        raise RuntimeError("a sync bettong_nb call was made from inside a running agent; await arun() instead")
    context = contextvars.copy_context()
    outcome: concurrent.futures.Future = concurrent.futures.Future()
    tasks: list[asyncio.Task] = []

    def start() -> None:
        task = loop.create_task(coro, context=context)
        tasks.append(task)

        def copy(t: asyncio.Task) -> None:
            if t.cancelled():  # (Future.cancel() would not wake a concurrent.futures.wait)
                outcome.set_exception(asyncio.CancelledError())
            elif t.exception() is not None:
                outcome.set_exception(t.exception())
            else:
                outcome.set_result(t.result())

        task.add_done_callback(copy)

    loop.call_soon_threadsafe(start)
    try:
        return outcome.result()
    except KeyboardInterrupt:
        _cancel(loop, tasks, outcome)
        # A coroutine that handles its cancellation and returns (a batch returning what
        # finished) has the last word; anything else is an interrupt.
        if outcome.done() and not outcome.cancelled() and outcome.exception() is None:
            return outcome.result()
        raise Interrupted() from None


def _cancel(loop: asyncio.AbstractEventLoop, tasks: list[asyncio.Task], outcome: concurrent.futures.Future) -> None:
    """Cancel the running task; when the loop does not get to it in time, something synchronous
    holds the loop (a sync tool): raise CancelledError in that thread, which cancels the task
    right where it is. Waits about a second in all."""
    reached = threading.Event()

    def cancel() -> None:
        reached.set()
        if tasks:
            tasks[0].cancel()

    loop.call_soon_threadsafe(cancel)
    try:
        if not reached.wait(STOP_WAIT_S) and _thread is not None:
            import ctypes  # only here: an interrupt is rare, and import bettong_nb stays cheap

            ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(_thread.ident),
                                                       ctypes.py_object(asyncio.CancelledError))
        concurrent.futures.wait([outcome], timeout=STOP_WAIT_S)
    except KeyboardInterrupt:
        pass  # pressed again: stop waiting
