"""The stop button ends a cell running an agent at once.

    result = await guarded(turn())       # the stop button: Interrupted (one line) within a second

    task = asyncio.ensure_future(turn())
    with StopOnInterrupt(task) as stop:
        await task                       # the stop button: CancelledError here within a second
    stop.interrupted                     # True when that is why it ended

A ``%%agent`` cell runs its turn through :func:`guarded`. So does every run a cell awaits itself
(``r = await agent.arun(...)``, ``b = await agent.amap(...)``): ``%load_ext`` installs
:func:`cell_runner` as the core's runner and :func:`cell_started` as a pre_run_cell hook, and a run
awaited by the cell's own task is guarded. Runs inside a guarded one (a session's turn, a batch's
items) and runs in tasks of their own (a background turn) are left alone: the stop button then
belongs to whatever the cell awaits.

Why the cell needs its own handler: ipykernel (7.4) turns a kernel interrupt on an awaiting
cell into a callback scheduled without waking its event loop, so the interrupt only takes
effect when whatever the cell awaits ends — a slow model call held a Stop for 25 s. While
the guard is on, SIGINT cancels the task through ``call_soon_threadsafe``, which wakes the
loop. When the loop does not get to it in time, synchronous code holds the loop (a sync
tool): the guard signals the main thread again and raises CancelledError inside that code,
which cancels the task where it is (never KeyboardInterrupt, which would end the kernel's
loop). Off the main thread (a subshell) there are no signals and the guard does nothing.
"""

from __future__ import annotations

import asyncio
import signal
import threading
import weakref
from typing import Any, Coroutine, TypeVar

from ..core._sync import Interrupted

__all__ = ["StopOnInterrupt", "active", "guarded", "cell_runner", "cell_started"]

T = TypeVar("T")

STOP_WAIT_S = 0.3  # how long the loop may take to run the cancel before the guard pushes harder

_active: list["StopOnInterrupt"] = []
_cell_task: "weakref.ref[asyncio.Task] | None" = None  # the task running the current cell's code


def active() -> bool:
    """Whether a guard owns SIGINT now (approval prompts then leave interrupts to it)."""
    return bool(_active)


class StopOnInterrupt:
    """While entered, SIGINT cancels ``task`` (see the module doc); the previous handler is
    restored on exit."""

    def __init__(self, task: asyncio.Future, loop: asyncio.AbstractEventLoop | None = None):
        self.task = task
        self.loop = loop or asyncio.get_running_loop()
        self.interrupted = False
        self._reached = threading.Event()  # the loop ran the cancel
        self._push = False  # the next SIGINT is the guard's own: raise where the loop is stuck
        self._saved: Any = None
        self._on = False

    def __enter__(self) -> "StopOnInterrupt":
        if threading.current_thread() is threading.main_thread():
            self._saved = signal.signal(signal.SIGINT, self._handle)
            self._on = True
            _active.append(self)
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._on:
            signal.signal(signal.SIGINT, self._saved)
            _active.remove(self)
            self._on = False

    def _cancel(self) -> None:
        self._reached.set()
        self.task.cancel()

    def _handle(self, signum: int, frame: Any) -> None:
        if self._push and not self._reached.is_set() and not self.task.done():
            self._push = False
            raise asyncio.CancelledError  # inside the synchronous code that holds the loop
        if self.interrupted:
            return
        self.interrupted = True
        self.loop.call_soon_threadsafe(self._cancel)
        threading.Thread(target=self._watch, name="bettong-nb-stop", daemon=True).start()

    def _watch(self) -> None:
        if not self._reached.wait(STOP_WAIT_S) and self._on and not self.task.done():
            self._push = True
            signal.pthread_kill(threading.main_thread().ident, signal.SIGINT)


async def guarded(coro: Coroutine[Any, Any, T]) -> T:
    """Await ``coro`` in a task of its own that SIGINT cancels at once; an interrupt raises
    :class:`Interrupted`, which a notebook shows as one line. A coroutine that handles the
    cancellation and returns (a batch returning what finished) returns instead."""
    task = asyncio.ensure_future(coro)
    with StopOnInterrupt(task) as stop:
        try:
            return await task
        except asyncio.CancelledError:
            if stop.interrupted:
                raise Interrupted() from None
            raise


def _current_task() -> asyncio.Task | None:
    try:
        return asyncio.current_task()
    except RuntimeError:  # no event loop runs here
        return None


def cell_started(*_: Any) -> None:
    """The pre_run_cell hook: note the task that runs this cell's code (none for a cell run
    without an event loop)."""
    global _cell_task
    task = _current_task()
    _cell_task = None if task is None else weakref.ref(task)


def cell_runner(coro: Coroutine[Any, Any, T]) -> Any:
    """The core's runner: a run the cell's own task awaits is :func:`guarded`, any other as it is."""
    task = _current_task()
    if task is None or _cell_task is None or _cell_task() is not task:
        return coro
    return guarded(coro)
