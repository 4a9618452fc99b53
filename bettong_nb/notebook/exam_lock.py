"""The exam lock as the notebook's page sees it: its metadata, read through the frontend
extension, so a lock holds in a renamed notebook and before the teacher's save.

    exam_lock.install(ipython)       # what %load_ext bettong_nb does
    await exam_lock.refresh()        # an awaiting %%agent cell reads the page's metadata first

The core (``core/policy.py``) also reads the saved notebook file; a notebook is locked when
either says so. Only kernels a Jupyter server started for a notebook (JPY_SESSION_NAME set) ask
the page: elsewhere (nbclient, papermill, a terminal) there is no page, and asking costs a wait.
"""

from __future__ import annotations

import asyncio
import os
from typing import Any, Mapping

from ..core import policy
from . import frontend

__all__ = ["install", "uninstall", "refresh", "seen", "cell_started"]

_seen: list[Mapping[str, Any] | None] = [None]  # the page's metadata as last read
_tasks: set[asyncio.Task] = set()  # refreshes under way (kept: a task nobody holds may vanish)


def seen() -> Mapping[str, Any] | None:
    """The notebook's metadata as the page last reported it; None before any answer."""
    return _seen[0]


async def refresh() -> None:
    """Read the page's metadata again, when there is a page; a failure keeps what was read."""
    if not os.environ.get("JPY_SESSION_NAME"):
        return
    try:
        page = await frontend.connect()
        if page is not None:
            _seen[0] = await page.notebook_metadata()
    except frontend.FrontendError:
        pass


def cell_started(info: Any = None) -> None:
    """pre_run_cell: refresh in the background, so a later run of this cell or the next sees it."""
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        return
    task = loop.create_task(refresh())
    _tasks.add(task)
    task.add_done_callback(_tasks.discard)


def install(ipython: Any) -> None:
    policy.install_notebook(seen)
    ipython.events.register("pre_run_cell", cell_started)


def uninstall(ipython: Any) -> None:
    policy.install_notebook(None)
    if cell_started in ipython.events.callbacks["pre_run_cell"]:
        ipython.events.unregister("pre_run_cell", cell_started)
    _seen[0] = None
