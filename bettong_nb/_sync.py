"""Run a coroutine to completion from sync code — in a script or under a running event loop.

Why a private loop in a worker thread and not nest-asyncio: nest-asyncio (archived; its fork is
nest-asyncio2) patches the event loop of the user's whole kernel, changing how every other
library's coroutines are scheduled, and it does not make widget clicks arrive during a blocking
cell anyway (measured: no strategy that blocks the cell lets a click through). The worker loop
costs one thread hop per call (tens of microseconds, see bench/), leaves the caller's loop
untouched, and keeps one loop for all sync calls, so httpx connection pools are reused across
runs. Context variables (redaction switch, listeners) are copied into the task.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import threading
from typing import Any, Coroutine, TypeVar

__all__ = ["run_sync"]

T = TypeVar("T")
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
        loop.call_soon_threadsafe(lambda: tasks and tasks[0].cancel())
        concurrent.futures.wait([outcome], timeout=5)
        # A coroutine that handles its cancellation and returns (a batch returning what
        # finished) has the last word; anything else re-raises the interrupt.
        if outcome.done() and not outcome.cancelled() and outcome.exception() is None:
            return outcome.result()
        raise
